/**
 * `npm run bench`: starts the service on a fresh PostgreSQL database, drives it over loopback with
 * autocannon, and prints one table: scenario, requests per second, p50, p99, server CPU per request,
 * the share of that CPU spent in garbage collection, how busy the server's main thread was, peak
 * memory, and each scenario's ratio to two references measured in the same run on the same
 * machine: the stack's floor (the smallest
 * HttpApi + @effect/sql-pg server doing the same queries, scripts/bench/StackFloor.ts) and a bare
 * `node:http` + `pg` server (scripts/bench/Reference.ts). It ends with the targets, MET or MISS.
 *
 * DATABASE_URL names the PostgreSQL server (an admin URL; a fresh database is made and dropped);
 * BENCH_DURATION (seconds per measured run, default 5), BENCH_CONNECTIONS (default "10,50") and
 * BENCH_INTENTS (intents per end-to-end and webhook run, default 1000) size the run; BENCH_WARMUP
 * (seconds, default 10) is how long each server is first driven with each kind of request, unmeasured,
 * so that V8 has compiled its code before anything is measured; BENCH_ONLY
 * (some of create, routing, lookup, e2e, webhooks, events, alpaca, comma-separated) runs those parts
 * only; `routing` runs the service's layers without HTTP in a process of their own (RoutingDriver.ts),
 * creations alone and routed through the mock, for routing's CPU per intent. The
 * service's Alpaca endpoints point at a fake Alpaca started in this process.
 */
import autocannon from "autocannon"
import type { ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import os from "node:os"
import pg from "pg"
import { finalStatuses } from "../src/domain/Intent.js"
import * as FakeAlpaca from "../src/services/brokers/alpaca/FakeAlpaca.js"
import { alpacaEnv } from "../test/support/Harness.js"
import { streamLatency } from "./bench/EventStreams.js"
import { liveBursts, liveEndToEnd, warmUpLive } from "./bench/LiveAlpaca.js"
import { percentile, spread } from "./bench/Percentile.js"
import { cpuMs, measure, peakRssMiB } from "./bench/ProcessStats.js"
import { BARE_TABLE, FLOOR_TABLE } from "./bench/ReferenceTable.js"
import { DRIVER_FIBERS, type DriverRun, mean, routingCost } from "./bench/RoutingCost.js"
import {
  gcShareBetween,
  gcSnapshot,
  type GcTally,
  PROCESS_START,
  type ReferenceServer,
  startReferenceServer,
  startService,
  type TracedService
} from "./bench/Traced.js"
import { arrival, listen } from "../test/support/Harness.js"
import {
  adminUrl,
  dropDatabase,
  expectStatus,
  freshDatabase,
  marketIntent,
  provision,
  type Provisioned,
  psqlColumn,
  repeatFor,
  request,
  run,
  runClients,
  type Service,
  sleep,
  stopService,
  stringField,
  subscribe,
  unsubscribe,
  waitUntil
} from "./lib/Service.js"

/** The warm-up before each measured run of a kind of request the server has already been warmed up with. */
const WARMUP_SECONDS = 1
const FILL_TIMEOUT_MS = 30_000
const POLL_INTERVAL_MS = 2
const LOOKUP_IDS = 2_000
/**
 * The pause between the warm-up and the measured run. The warm-up's end cuts off the requests in
 * flight; the server interrupts them, and its `@effect/sql-pg` pool cancels their statements with
 * `pg_cancel_backend(pid)` from another connection. A cancellation that lands after its statement
 * has finished hits whatever that connection runs next: without a pause, a statement of the
 * measured run, answered 500. Warm-up answers are not checked, so the previous run's cut-off
 * requests land there harmlessly.
 */
const RUN_GAP_MS = 300
/** How long after a measured run the bench waits for the server's last GC lines to reach it. */
const GC_SETTLE_MS = 50
/** How often the bench asks whether the routing of the creations has caught up, and for how long. */
const DRAIN_POLL_MS = 10
const DRAIN_TIMEOUT_MS = 120_000
/** Live bursts: intents placed at once on one account (inside its pace of 45 calls), and how many bursts. */
const BURST_SIZE = 40
const BURSTS = 10
/**
 * Whether PostgreSQL runs on this machine (DATABASE_URL names a loopback host or a socket), so that
 * the CPU of its processes can be read from /proc and counted per request.
 */
const LOCAL_DATABASE = ((host) => host === "" || host === "localhost" || host === "127.0.0.1" || host === "[::1]")(
  new URL(adminUrl()).hostname
)

/** The reference lines, by scenario name. */
const BARE_INSERT = "bare INSERT (reference)"
const FLOOR_INSERT = "floor INSERT (HttpApi + sql-pg)"
const BARE_SELECT = "bare SELECT (reference)"
const FLOOR_SELECT = "floor SELECT (HttpApi + sql-pg)"
const BARE_PAGE = "bare SELECT of 100 rows (reference)"
/** The service's lines the targets read. */
const POST_CREATE = "POST create"
const GET_BY_ID = "GET by id"
const GET_LIST = "GET list (20 per page)"
const END_TO_END = "market intent, POST → GET shows filled"
const ANSWERED_TO_FILLED = "  201 → GET shows filled"
const EVENT_STREAM = "event stream: commit → arrival, 100 streams"
/** The steady creation rate of the second event stream run, well below what the service can take. */
const PACED_INTENTS_PER_SECOND = 50

const PARTS = ["create", "routing", "lookup", "e2e", "webhooks", "events", "alpaca"] as const
type Part = (typeof PARTS)[number]

interface Settings {
  readonly parts: ReadonlyArray<Part>
  readonly durationSeconds: number
  /**
   * The warm-up before the first run of each kind of request on each server. V8 compiles a
   * server's hot code over its first seconds of load: cold, the service's CPU per creation was
   * twice its figure after 15 s of load, and the floor's 1.5 times.
   */
  readonly warmUpSeconds: number
  readonly connections: ReadonlyArray<number>
  readonly intents: number
}

/** One line of the table. */
interface Line {
  readonly scenario: string
  readonly connections: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  /** Server CPU (user + system) per request, in milliseconds. */
  readonly cpuMs: number
  /**
   * PostgreSQL's CPU (all its processes on this machine) per request over the same run, in
   * milliseconds: `NaN` when the database is elsewhere or the line has no run of its own.
   */
  readonly dbCpuMs?: number
  /** The fraction of that CPU spent in garbage collection. */
  readonly gcShare: number
  /**
   * The share of the run's time the server's main (JavaScript) thread was busy, on a core or
   * waiting for one: near 1, its requests queue for the thread. Absent on lines without a run of
   * their own.
   */
  readonly mainBusy?: number
  readonly peakMiB: number
  /** The floor's line this one is compared with, by scenario name and connections. */
  readonly floor?: string
  /** The bare reference's line this one is compared with, by scenario name and connections. */
  readonly bare?: string
  /** Another line this one is compared with in its note. */
  readonly relative?: string
  /**
   * Creations only: milliseconds from the end of the load until every intent it created was
   * final (routed), measured by asking the database.
   */
  readonly drainMs?: number
  readonly note?: string
}

const positiveInt = (name: string, fallback: number): number => {
  const text = process.env[name]
  if (text === undefined || text === "") return fallback
  const value = Number(text)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got "${text}"`)
  return value
}

const connectionCounts = (): ReadonlyArray<number> => {
  const text = process.env.BENCH_CONNECTIONS || "10,50"
  const counts = text.split(",").map(Number)
  if (counts.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`BENCH_CONNECTIONS: bad list "${text}"`)
  return counts
}

const selectedParts = (): ReadonlyArray<Part> => {
  const text = process.env.BENCH_ONLY
  if (text === undefined || text === "") return PARTS
  const names = text.split(",")
  const parts = PARTS.filter((part) => names.includes(part))
  if (parts.length !== names.length) throw new Error(`BENCH_ONLY: choose from ${PARTS.join(", ")}`)
  return parts
}


// ---------------------------------------------------------------------------------------------
// Load

/** A server process the bench measures: its CPU and memory from /proc, its GC from its trace. */
interface Measured {
  readonly pid: number
  readonly gc: GcTally
}

interface Target extends Measured {
  readonly baseUrl: string
  readonly headers: Record<string, string>
}

/**
 * `measure` (CPU and peak memory of `server` while `work` runs) with the share of the server's CPU
 * spent in GC meanwhile, from its GC trace and its threads' times (see scripts/bench/Traced.ts).
 */
const measured = async <A>(server: Measured, work: () => Promise<A>) => {
  const before = gcSnapshot(server.pid, server.gc)
  const stats = await measure(server.pid, work, LOCAL_DATABASE)
  await sleep(GC_SETTLE_MS)
  return { ...stats, gcShare: gcShareBetween(before, gcSnapshot(server.pid, server.gc)).share }
}

interface LoadSpec {
  /** The kind of request (with the target's address, the key of its warm-up). */
  readonly kind: string
  readonly method: "GET" | "POST"
  /** The path (and body) of each request, numbered from 0 across the run. */
  readonly next: (n: number) => { readonly path: string; readonly body?: string }
}

type Measurement = Pick<Line, "connections" | "perSecond" | "p50Ms" | "p99Ms" | "cpuMs" | "dbCpuMs" | "gcShare" | "mainBusy" | "peakMiB">

/** What one measured run saw, as totals that several runs against one server add up to. */
interface Run {
  readonly connections: number
  readonly requests: number
  readonly seconds: number
  /** Each answer's time, in milliseconds. */
  readonly latencies: ReadonlyArray<number>
  readonly cpuMs: number
  readonly dbCpuMs: number
  /** CPU milliseconds spent in garbage collection. */
  readonly gcMs: number
  /** Milliseconds the main thread was busy. */
  readonly busyMs: number
  readonly peakMiB: number
  /** When the load stopped (`performance.now()`). */
  readonly endedAt: number
}

/** The measurement of one or more runs against one server, as if they were one run. */
const summed = (runs: ReadonlyArray<Run>): Measurement & { readonly endedAt: number } => {
  let requests = 0, seconds = 0, cpu = 0, dbCpu = 0, gc = 0, busy = 0, peakMiB = 0, endedAt = Number.NaN
  const latencies: Array<number> = []
  for (const one of runs) {
    requests += one.requests
    seconds += one.seconds
    cpu += one.cpuMs
    dbCpu += one.dbCpuMs
    gc += one.gcMs
    busy += one.busyMs
    peakMiB = Math.max(peakMiB, one.peakMiB)
    endedAt = one.endedAt
    for (const latency of one.latencies) latencies.push(latency)
  }
  const { p50, p99 } = spread(latencies)
  return {
    connections: runs[0]?.connections ?? 0,
    perSecond: requests / seconds,
    p50Ms: p50,
    p99Ms: p99,
    cpuMs: cpu / requests,
    dbCpuMs: dbCpu / requests,
    gcShare: gc / cpu,
    mainBusy: busy / (seconds * 1000),
    peakMiB,
    endedAt
  }
}

/**
 * Drives `target` with autocannon at `connections` for a warm-up second, then for `seconds`
 * (the run's measured duration unless given), sampling the server process's CPU, memory and GC.
 * Every answer must be a 2xx: a benchmark that counts errors as throughput measures nothing.
 */
const measuredRun = async (
  settings: Settings,
  target: Target,
  connections: number,
  spec: LoadSpec,
  seconds = settings.durationSeconds
): Promise<Run> => {
  const fire = firing(target, connections, spec)
  await fire(warmUpFor(settings, target, spec))
  await sleep(RUN_GAP_MS)
  let endedAt = Number.NaN
  const latencies: Array<number> = []
  const { result, cpuMs: cpu, dbCpuMs, gcShare, mainBusy, peakMiB } = await measured(target, async () => {
    const result = await fire(seconds, latencies)
    endedAt = performance.now()
    return result
  })
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `${spec.method} ${target.baseUrl}: ${result.non2xx} non-2xx answers ${JSON.stringify(result.statusCodeStats)}` +
        ` and ${result.errors} errors`
    )
  }
  return {
    connections,
    requests: result.requests.total,
    seconds: result.duration,
    latencies,
    cpuMs: cpu,
    dbCpuMs,
    gcMs: gcShare * cpu,
    busyMs: mainBusy * result.duration * 1000,
    peakMiB,
    endedAt
  }
}

/** One measured run (see {@link measuredRun}) as a measurement. */
const load = async (settings: Settings, target: Target, connections: number, spec: LoadSpec) =>
  summed([await measuredRun(settings, target, connections, spec)])

/**
 * The floor measured in slices around `runs`: one slice before each run and one after the last,
 * the run's measured seconds shared among them. The machine's speed drifts, by a tenth or more
 * within a minute on a shared host; measured once before the service, the floor would
 * carry that drift into every ratio read against it, while slices around the service's runs move
 * with the machine as those runs do. Each slice's rate is kept (`note`) to show how far the
 * machine moved. `settle`, when given, runs before each slice and each run, so that none pays for
 * the background work of the one before it.
 */
const floorAround = async <A>(
  settings: Settings,
  floor: Target,
  connections: number,
  spec: LoadSpec,
  runs: ReadonlyArray<() => Promise<A>>,
  settle: () => Promise<void> = async () => {}
) => {
  const seconds = settings.durationSeconds / (runs.length + 1)
  const slice = async () => {
    await settle()
    return measuredRun(settings, floor, connections, spec, seconds)
  }
  const slices: Array<Run> = [await slice()]
  const results: Array<A> = []
  for (const between of runs) {
    await settle()
    results.push(await between())
    slices.push(await slice())
  }
  const note = `in ${slices.length} slices around the service's runs: ${
    slices.map((one) => (one.requests / one.seconds).toFixed(0)).join(", ")
  } a second`
  return { floor: { ...summed(slices), note }, results }
}

/** How many requests of each spec have been made: their numbers go on across runs of it. */
const made = new WeakMap<LoadSpec, number>()

/**
 * Runs of autocannon against `target` at `connections`, for the given seconds, numbering the
 * spec's requests on from its runs before; each answer's time is added to `latencies` when given.
 */
const firing = (target: Target, connections: number, spec: LoadSpec) =>
  (duration: number, latencies?: Array<number>) =>
    new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon({
        url: target.baseUrl,
        connections,
        duration,
        headers: { ...target.headers, "content-type": "application/json" },
        requests: [{
          method: spec.method,
          setupRequest: (req) => {
            const n = made.get(spec) ?? 0
            made.set(spec, n + 1)
            const { path, body } = spec.next(n)
            return body === undefined ? { ...req, path } : { ...req, path, body }
          }
        }]
      }, (error: unknown, result) => error === null || error === undefined ? resolve(result) : reject(error))
      if (latencies !== undefined) {
        instance.on("response", (_client, _status, _bytes, responseTime) => latencies.push(responseTime))
      }
    })

/** The kinds of request each server (by address) has been warmed up with. */
const warmedUp = new Set<string>()

/**
 * How long to warm `target` up before a run of `spec`: the whole warm-up the first time the server
 * gets this kind of request, a second after that.
 */
const warmUpFor = (settings: Settings, target: Target, spec: LoadSpec): number => {
  const key = `${target.baseUrl} ${spec.kind}`
  if (warmedUp.has(key)) return WARMUP_SECONDS
  warmedUp.add(key)
  return settings.warmUpSeconds
}

/** The connections of the creations' warm-up ahead of the parts that create without `load`: enough to batch as under load. */
const WARMUP_CONNECTIONS = 50

/**
 * Warms the service's creations up, unless a run of them already did, for the parts whose clients
 * create intents without `load` (end to end, webhooks, event streams); then waits for their routing.
 */
const warmUpCreations = async (context: Context) => {
  const target = serviceTarget(context)
  const spec = creations(context, "/api/v1/intents", "warmup")
  const seconds = warmUpFor(context.settings, target, spec)
  if (seconds === WARMUP_SECONDS) return
  await firing(target, WARMUP_CONNECTIONS, spec)(seconds)
  await quiesce(context.databaseUrl)
}

// ---------------------------------------------------------------------------------------------
// Processes

const pidOf = (child: ChildProcess): number => {
  if (child.pid === undefined) throw new Error("child process has no pid")
  return child.pid
}

/**
 * Waits until no routing job or delivery is left, then vacuums and checkpoints, so that a scenario
 * pays neither for the previous one's background work nor for its writes (dead rows, dirty pages,
 * autovacuum and a checkpoint arriving in the middle of the next run). With `tables`, only those
 * are vacuumed.
 */
const quiesce = async (databaseUrl: string, tables: ReadonlyArray<string> = []) => {
  const deadline = Date.now() + 120_000
  for (;;) {
    const [jobs, deliveries] = await psqlColumn(
      databaseUrl,
      "SELECT count(*) FROM routing_jobs UNION ALL SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"
    )
    if (jobs === "0" && deliveries === "0") break
    if (Date.now() > deadline) throw new Error(`still ${jobs} routing jobs and ${deliveries} deliveries after 2 min`)
    await sleep(200)
  }
  await run("psql", [databaseUrl, "-v", "ON_ERROR_STOP=1", "-qc", `VACUUM ANALYZE ${tables.join(", ")}`])
  // CHECKPOINT needs a superuser (or pg_checkpoint); without one the run goes on unsettled.
  await run("psql", [databaseUrl, "-qc", "CHECKPOINT"]).catch(() => undefined)
}

// ---------------------------------------------------------------------------------------------
// Scenarios

interface Context {
  readonly settings: Settings
  readonly databaseUrl: string
  /** A connection of the bench's own, for the questions it asks the database during a run. */
  readonly db: pg.Client
  readonly runId: string
  readonly service: Service
  readonly serviceGc: GcTally
  readonly account: Provisioned
  readonly reference: ReferenceServer
  readonly floor: ReferenceServer
}

/** The main service, or one of the limiter variants, called with the bench user's key. */
const serviceTarget = (context: Context, variant?: TracedService): Target => {
  const { service, gc } = variant ?? { service: context.service, gc: context.serviceGc }
  return {
    baseUrl: service.baseUrl,
    pid: pidOf(service.child),
    gc,
    headers: { authorization: `Bearer ${context.account.apiKey}` }
  }
}

const serviceProcess = (context: Context): Measured => ({ pid: pidOf(context.service.child), gc: context.serviceGc })

const referenceTarget = (server: ReferenceServer): Target => ({ ...server, headers: {} })

/** POSTs of market intents to `path`, each with an intent_id of its own. */
const creations = (context: Context, path: string, prefix: string): LoadSpec => ({
  kind: "create",
  method: "POST",
  next: (n) => ({
    path,
    body: JSON.stringify(marketIntent(`${prefix}-${context.runId}-${n}`, context.account.brokerId))
  })
})

const FINAL = [...finalStatuses]

/** How many of the bench user's intents created since `since` are not final yet (still to be routed). */
const unfinished = async (context: Context, since: Date): Promise<number> => {
  // `mode` is named so that the intents' listing index (user, mode, created_at) finds the rows.
  const result = await context.db.query<{ readonly n: number }>(
    `SELECT count(*)::int AS n FROM intents
     WHERE user_id = $1 AND mode IN ('test', 'live') AND created_at >= $2 AND status <> ALL($3::text[])`,
    [context.account.userId, since, FINAL]
  )
  return result.rows[0]?.n ?? 0
}

/**
 * Milliseconds from `endedAt` (the end of a creation load, `performance.now()`) until no intent
 * created since `since` is left unfinished: the time the routing needed to catch up with the load.
 * The database is asked every few milliseconds; the figure is the start of the first question
 * that found none.
 */
const drainTime = async (context: Context, since: Date, endedAt: number): Promise<number> => {
  for (;;) {
    const asked = performance.now()
    const left = await unfinished(context, since)
    if (left === 0) return Math.max(0, asked - endedAt)
    if (asked - endedAt > DRAIN_TIMEOUT_MS) {
      throw new Error(`${left} intents still unfinished ${DRAIN_TIMEOUT_MS / 1000} s after the creation load`)
    }
    await sleep(DRAIN_POLL_MS)
  }
}

const createScenarios = async (context: Context, connections: number): Promise<ReadonlyArray<Line>> => {
  const { settings } = context
  const bare = await load(
    settings,
    referenceTarget(context.reference),
    connections,
    creations(context, "/intents", `ref${connections}`)
  )
  // A little before the warm-up, on the machine's clock the service stamps its intents with.
  const since = new Date(Date.now() - 1000)
  const { floor, results: [service] } = await floorAround(
    settings,
    referenceTarget(context.floor),
    connections,
    creations(context, "/intents", `floor${connections}`),
    [async () => {
      const service = await load(
        settings,
        serviceTarget(context),
        connections,
        creations(context, "/api/v1/intents", `create${connections}`)
      )
      // Routed before the floor's next slice, which would otherwise pay for the routing.
      const drainMs = await drainTime(context, since, service.endedAt)
      return { ...service, drainMs }
    }],
    // Before each run, the references' rows vacuumed and every write checkpointed. The service's
    // tables wait for the part's end: analyzed while still empty, before the service's first run,
    // they made POST create at 10 connections run at half its rate, with 3.6 times PostgreSQL's
    // CPU per creation (plans made for empty tables, kept by its prepared statements, most likely).
    () => quiesce(context.databaseUrl, [BARE_TABLE, FLOOR_TABLE])
  )
  await quiesce(context.databaseUrl)
  if (service === undefined) throw new Error("the service's creations were not measured")
  return [
    { scenario: BARE_INSERT, ...bare },
    { scenario: FLOOR_INSERT, ...floor, bare: BARE_INSERT },
    {
      scenario: POST_CREATE,
      ...service,
      floor: FLOOR_INSERT,
      bare: BARE_INSERT,
      note: `market orders; all routed ${service.drainMs.toFixed(0)} ms after the load`
    }
  ]
}

const lookupScenarios = async (
  context: Context,
  connections: number,
  ids: {
    readonly service: ReadonlyArray<string>
    readonly reference: ReadonlyArray<string>
    readonly floor: ReadonlyArray<string>
  },
  unlimited: ReadonlyArray<{ readonly label: string; readonly traced: TracedService }>
): Promise<ReadonlyArray<Line>> => {
  const pick = (list: ReadonlyArray<string>, n: number) => list[n % list.length] ?? ""
  const byId = (prefix: string, list: ReadonlyArray<string>) => (n: number) => ({ path: `${prefix}/${pick(list, n)}` })
  const bare = await load(context.settings, referenceTarget(context.reference), connections, {
    kind: "lookup",
    method: "GET",
    next: byId("/intents", ids.reference)
  })
  const byIdOnService = (target: Target) => () =>
    load(context.settings, target, connections, { kind: "lookup", method: "GET", next: byId("/api/v1/intents", ids.service) })
  const listing = () =>
    load(context.settings, serviceTarget(context), connections, {
      kind: "list",
      method: "GET",
      next: (n) => ({ path: `/api/v1/intents?page=${1 + (n % 5)}&page_size=20` })
    })
  const { floor, results: [service, list, ...limited] } = await floorAround(
    context.settings,
    referenceTarget(context.floor),
    connections,
    { kind: "lookup", method: "GET", next: byId("/intents", ids.floor) },
    [
      byIdOnService(serviceTarget(context)),
      listing,
      ...unlimited.map((variant) => byIdOnService(serviceTarget(context, variant.traced)))
    ]
  )
  if (service === undefined || list === undefined) throw new Error("the service's lookups were not measured")
  const limiterLines = unlimited.flatMap((variant, i): Array<Line> => {
    const line = limited[i]
    return line === undefined ? [] : [{
      scenario: variant.label,
      ...line,
      floor: FLOOR_SELECT,
      bare: BARE_SELECT,
      relative: GET_BY_ID,
      note: "limiter cost = 1 − that"
    }]
  })
  return [
    { scenario: BARE_SELECT, ...bare },
    { scenario: FLOOR_SELECT, ...floor, bare: BARE_SELECT },
    { scenario: GET_BY_ID, ...service, floor: FLOOR_SELECT, bare: BARE_SELECT, note: "limiter in PostgreSQL" },
    { scenario: GET_LIST, ...list, floor: FLOOR_SELECT, bare: BARE_SELECT },
    ...limiterLines
  ]
}

const FINAL_NOT_FILLED = new Set(["canceled", "rejected", "failed"])

/**
 * Market intents on `connections` clients: each from its POST to the GET that first shows it
 * filled, and from its 201 to that GET.
 */
const endToEnd = async (context: Context, connections: number): Promise<ReadonlyArray<Line>> => {
  const { baseUrl } = context.service
  const { apiKey, brokerId } = context.account
  const samples: Array<number> = []
  const fromAnswer: Array<number> = []
  const started = performance.now()
  const { cpuMs: cpu, dbCpuMs, gcShare, mainBusy, peakMiB } = await measured(serviceProcess(context), () =>
    runClients(context.settings.intents, connections, async (index, signal) => {
      const sent = performance.now()
      const created = await request(`${baseUrl}/api/v1/intents`, apiKey, {
        method: "POST",
        body: marketIntent(`e2e${connections}-${context.runId}-${index}`, brokerId),
        signal
      })
      const id = stringField(expectStatus("POST /api/v1/intents", created, 201), "id")
      const answered = performance.now()
      for (;;) {
        const response = await request(`${baseUrl}/api/v1/intents/${id}`, apiKey, { signal })
        const status = stringField(expectStatus(`GET /api/v1/intents/${id}`, response, 200), "status")
        if (status === "filled") break
        if (FINAL_NOT_FILLED.has(status)) throw new Error(`intent ${id} ended ${status}`)
        if (performance.now() - sent > FILL_TIMEOUT_MS) throw new Error(`intent ${id} not filled in time`)
        await sleep(POLL_INTERVAL_MS)
      }
      const filled = performance.now()
      samples.push(filled - sent)
      fromAnswer.push(filled - answered)
    }))
  const wallMs = performance.now() - started
  await quiesce(context.databaseUrl)
  const sorted = samples.sort((a, b) => a - b)
  const sortedFromAnswer = fromAnswer.sort((a, b) => a - b)
  return [
    {
      scenario: END_TO_END,
      connections,
      perSecond: samples.length / (wallMs / 1000),
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      cpuMs: cpu / samples.length,
      dbCpuMs: dbCpuMs / samples.length,
      gcShare,
      mainBusy,
      peakMiB,
      floor: FLOOR_INSERT,
      bare: BARE_INSERT,
      note: "per intent, polling included"
    },
    {
      scenario: ANSWERED_TO_FILLED,
      connections,
      perSecond: Number.NaN,
      p50Ms: percentile(sortedFromAnswer, 50),
      p99Ms: percentile(sortedFromAnswer, 99),
      cpuMs: Number.NaN,
      gcShare: Number.NaN,
      peakMiB: Number.NaN,
      note: `from the 201 to the GET that shows it, polled every ${POLL_INTERVAL_MS} ms`
    }
  ]
}

/**
 * Webhooks: latency from each state change (the event's `created_at`) to its arrival while intents
 * flow on `connections` clients, then a backlog of every event so far drained by a new endpoint.
 */
const webhooks = async (context: Context, connections: number): Promise<ReadonlyArray<Line>> => {
  const receiver = await listen(() => 204)
  const server = serviceProcess(context)
  try {
    const endpoint = await subscribe(context.service.baseUrl, context.account.userId, receiver.url)
    const started = performance.now()
    const live = await measured(server, () =>
      runClients(context.settings.intents, connections, async (index, signal) => {
        const response = await request(`${context.service.baseUrl}/api/v1/intents`, context.account.apiKey, {
          method: "POST",
          body: marketIntent(`hook${connections}-${context.runId}-${index}`, context.account.brokerId),
          signal
        })
        expectStatus("POST /api/v1/intents", response, 201)
      }).then(() => waitUntil(() => receiver.received.length >= context.settings.intents * 2, "live deliveries")))
    const liveMs = performance.now() - started
    const latency = receiver.received.map(arrival).map((event) => event.at - event.createdAt).sort((a, b) => a - b)
    await unsubscribe(context.service.baseUrl, endpoint)

    const backlogEndpoint = await subscribe(context.service.baseUrl, context.account.userId, receiver.url)
    const before = receiver.received.length
    const [backlogText] = await psqlColumn(context.databaseUrl, `
      WITH added AS (
        INSERT INTO webhook_deliveries (id, endpoint_id, event_id, status, next_attempt_at, created_at, updated_at)
        SELECT gen_random_uuid(), '${backlogEndpoint}', id, 'pending', now(), now(), now() FROM events
        RETURNING 1)
      SELECT count(*) FROM added`)
    const backlog = Number(backlogText)
    const drainStarted = performance.now()
    const drainStartedAt = Date.now()
    const drain = await measured(server, async () => {
      await run("psql", [context.databaseUrl, "-qc", "SELECT pg_notify('webhook_deliveries', 'due')"])
      // The backlog is every event so far, more on a faster machine: allowed 100 deliveries a second at least.
      await waitUntil(() => receiver.received.length >= before + backlog, "backlog", Math.max(120_000, backlog * 10))
    })
    const drainMs = performance.now() - drainStarted
    const drained = receiver.received.slice(before).map((arrival) => arrival.at - drainStartedAt).sort((a, b) => a - b)
    await unsubscribe(context.service.baseUrl, backlogEndpoint)
    await quiesce(context.databaseUrl)
    return [
      {
        scenario: "webhook: state change → delivered",
        connections,
        perSecond: latency.length / (liveMs / 1000),
        p50Ms: percentile(latency, 50),
        p99Ms: percentile(latency, 99),
        cpuMs: live.cpuMs / latency.length,
        dbCpuMs: live.dbCpuMs / latency.length,
        gcShare: live.gcShare,
        mainBusy: live.mainBusy,
        peakMiB: live.peakMiB,
        note: "while intents flow; CPU per event incl. the intents'"
      },
      {
        scenario: `webhook: backlog of ${backlog} drained`,
        connections: 0,
        perSecond: backlog / (drainMs / 1000),
        p50Ms: percentile(drained, 50),
        p99Ms: percentile(drained, 99),
        cpuMs: drain.cpuMs / backlog,
        dbCpuMs: drain.dbCpuMs / backlog,
        gcShare: drain.gcShare,
        mainBusy: drain.mainBusy,
        peakMiB: drain.peakMiB,
        note: "latency = time from the drain's start"
      }
    ]
  } finally {
    await receiver.close()
  }
}

/**
 * The events API: a page of 100 events against the reference's page of 100 rows (both tables
 * filled first if the creation runs did not), then stream latency with 100 streams open.
 */
const eventScenarios = async (context: Context): Promise<ReadonlyArray<Line>> => {
  const { apiKey, brokerId } = context.account
  for (let i = 0; i < 60; i++) {
    const created = await request(`${context.service.baseUrl}/api/v1/intents`, apiKey, {
      method: "POST",
      body: marketIntent(`events-${context.runId}-${i}`, brokerId)
    })
    expectStatus("POST /api/v1/intents", created, 201)
    await fetch(`${context.reference.baseUrl}/intents`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(marketIntent(`events-ref-${context.runId}-${i}`, brokerId))
    }).then((response) => response.text())
  }
  await quiesce(context.databaseUrl)
  const lines: Array<Line> = []
  for (const connections of context.settings.connections) {
    console.log(`event pages at ${connections} connections`)
    const reference = await load(context.settings, referenceTarget(context.reference), connections, {
      kind: "page",
      method: "GET",
      next: () => ({ path: "/intents?page" })
    })
    const service = await load(context.settings, serviceTarget(context), connections, {
      kind: "events",
      method: "GET",
      next: () => ({ path: "/api/v1/events?limit=100" })
    })
    lines.push(
      { scenario: BARE_PAGE, ...reference },
      { scenario: "GET events, page of 100", ...service, bare: BARE_PAGE }
    )
  }
  const streaming = {
    databaseUrl: context.databaseUrl,
    streams: 100,
    clients: 10,
    intents: context.settings.intents
  }
  // The streams' path compiled first, as every other kind of request is: whole runs, unmeasured.
  console.log("event stream latency, 100 streams, warming up")
  await repeatFor(context.settings.warmUpSeconds, () => streamLatency(context.service, streaming))
  await quiesce(context.databaseUrl)
  console.log("event stream latency, 100 streams")
  const { cpuMs: cpu, dbCpuMs, gcShare, mainBusy, peakMiB, result } = await measured(
    serviceProcess(context),
    () => streamLatency(context.service, streaming)
  )
  await quiesce(context.databaseUrl)
  console.log(`event stream latency, 100 streams, ${PACED_INTENTS_PER_SECOND} intents per s`)
  const paced = await measured(serviceProcess(context), () =>
    streamLatency(context.service, {
      ...streaming,
      intents: Math.ceil(context.settings.intents / 2),
      perSecond: PACED_INTENTS_PER_SECOND
    }))
  await quiesce(context.databaseUrl)
  lines.push({
    scenario: EVENT_STREAM,
    connections: 100,
    perSecond: result.perSecond,
    p50Ms: result.p50,
    p99Ms: result.p99,
    cpuMs: cpu / result.events,
    dbCpuMs: dbCpuMs / result.events,
    gcShare,
    mainBusy,
    peakMiB,
    note: `${result.events} events from 10 clients creating; the commit as a LISTEN of the bench's hears it`
  }, {
    scenario: "  event written → arrival",
    connections: 100,
    perSecond: Number.NaN,
    p50Ms: result.fromCreated.p50,
    p99Ms: result.fromCreated.p99,
    cpuMs: Number.NaN,
    gcShare: Number.NaN,
    peakMiB: Number.NaN,
    note: "from the event's created_at: the service's decision, before the transaction that writes it"
  }, {
    scenario: `event stream at ${PACED_INTENTS_PER_SECOND} intents per s: commit → arrival`,
    connections: 100,
    perSecond: paced.result.perSecond,
    p50Ms: paced.result.p50,
    p99Ms: paced.result.p99,
    cpuMs: paced.cpuMs / paced.result.events,
    dbCpuMs: paced.dbCpuMs / paced.result.events,
    gcShare: paced.gcShare,
    mainBusy: paced.mainBusy,
    peakMiB: paced.peakMiB,
    note: `${paced.result.events} events, created at a steady rate below the service's capacity; no target`
  })
  return lines
}

/**
 * GET by id and list on the main service; GET by id on both references and on two more instances
 * with the other limiter stores.
 */
const lookups = async (context: Context): Promise<ReadonlyArray<Line>> => {
  const ids = {
    service: await psqlColumn(context.databaseUrl, `SELECT id FROM intents ORDER BY random() LIMIT ${LOOKUP_IDS}`),
    reference: await psqlColumn(
      context.databaseUrl,
      `SELECT id FROM reference_intents ORDER BY random() LIMIT ${LOOKUP_IDS}`
    ),
    floor: await psqlColumn(context.databaseUrl, `SELECT id FROM floor_intents ORDER BY random() LIMIT ${LOOKUP_IDS}`)
  }
  const redisUrl = process.env.REDIS_URL || "redis://127.0.0.1:6379"
  const variants = [
    { label: "GET by id, limiter in Redis", env: { REDIS_URL: redisUrl } },
    { label: "GET by id, no limiter", env: { RATE_LIMITS: "off" } }
  ]
  const started: Array<{ readonly label: string; readonly traced: TracedService }> = []
  try {
    for (const variant of variants) {
      started.push({ label: variant.label, traced: await startService(context.databaseUrl, variant.env, variant.label) })
    }
    const lines: Array<Line> = []
    for (const connections of context.settings.connections) {
      console.log(`lookups at ${connections} connections`)
      lines.push(...(await lookupScenarios(context, connections, ids, started)))
    }
    return lines
  } finally {
    await Promise.all(started.map((variant) => stopService(variant.traced.service.child)))
  }
}

// ---------------------------------------------------------------------------------------------
// Output

const machine = () => {
  const cpus = os.cpus()
  const memoryGiB = (os.totalmem() / 1024 ** 3).toFixed(1)
  return `machine: ${cpus[0]?.model ?? "unknown cpu"}, ${cpus.length} cores, ${memoryGiB} GiB, ${os.type()} ${os.release()}, node ${process.version}`
}

const formatTable = (header: ReadonlyArray<string>, lines: ReadonlyArray<ReadonlyArray<string>>) => {
  const all = [header, ...lines]
  const widths = header.map((_, column) => Math.max(...all.map((line) => (line[column] ?? "").length)))
  const format = (line: ReadonlyArray<string>) =>
    line.map((cell, column) =>
      column === 0 || column === line.length - 1 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)
    ).join("  ").trimEnd()
  const rule = widths.map((w) => "-".repeat(w)).join("  ")
  return [format(header), rule, ...lines.map(format)].join("\n")
}

const lineOf = (lines: ReadonlyArray<Line>, scenario: string, connections: number) =>
  lines.find((line) => line.scenario === scenario && line.connections === connections)

/** `line`'s requests per second over those of the line named `other` at the same connections. */
const ratioTo = (line: Line, other: string | undefined, lines: ReadonlyArray<Line>): number | undefined => {
  const reference = other === undefined ? undefined : lineOf(lines, other, line.connections)
  return reference === undefined ? undefined : line.perSecond / reference.perSecond
}

/** A figure, or a dash where the line has none. */
const figure = (value: number, digits: number) => Number.isNaN(value) ? "-" : value.toFixed(digits)

const percent = (ratio: number | undefined) => ratio === undefined || Number.isNaN(ratio) ? "" : `${(ratio * 100).toFixed(0)}%`

const printTable = (lines: ReadonlyArray<Line>) => {
  const header = ["scenario", "conns", "req/s", "p50 ms", "p99 ms", "CPU ms/req", "DB CPU ms/req", "GC %", "main busy %", "peak MiB", "vs floor", "vs bare", "note"]
  const rows = lines.map((line) => {
    const relative = ratioTo(line, line.relative, lines)
    const note = relative === undefined ? line.note : `${percent(relative)} of ${line.relative}; ${line.note ?? ""}`
    return [
      line.scenario,
      line.connections === 0 ? "-" : String(line.connections),
      figure(line.perSecond, 0),
      figure(line.p50Ms, 1),
      figure(line.p99Ms, 1),
      figure(line.cpuMs, 2),
      figure(line.dbCpuMs ?? Number.NaN, 2),
      figure(line.gcShare * 100, 1),
      figure((line.mainBusy ?? Number.NaN) * 100, 0),
      figure(line.peakMiB, 0),
      percent(ratioTo(line, line.floor, lines)),
      percent(ratioTo(line, line.bare, lines)),
      note ?? ""
    ]
  })
  console.log(formatTable(header, rows))
}

interface Goal {
  readonly label: string
  /** Undefined when the run did not measure what the target needs. */
  readonly met: boolean | undefined
  readonly value: string
}

/** The connection counts the targets name. */
const TARGET_CONNECTIONS = [10, 50] as const

const ms = (value: number) => `${value.toFixed(1)} ms`

const goals = (lines: ReadonlyArray<Line>, parts: ReadonlyArray<Part>, peakMiB: number): ReadonlyArray<Goal> => {
  const result: Array<Goal> = []
  const unmeasured = (label: string) => result.push({ label, met: undefined, value: "not measured in this run" })

  /** `scenario` at `connections` against `reference`'s req/s: at least `share` of it. */
  const throughput = (scenario: string, reference: string, connections: number, share: number) => {
    const label = `${scenario} ≥ ${(share * 100).toFixed(0)}% of ${reference} req/s at ${connections}`
    const line = lineOf(lines, scenario, connections)
    const ratio = line === undefined ? undefined : ratioTo(line, reference, lines)
    if (ratio === undefined) return unmeasured(label)
    result.push({ label, met: ratio >= share, value: percent(ratio) })
  }

  /** `scenario`'s p99 at `connections` within `factor` times `reference`'s. */
  const tail = (scenario: string, reference: string, connections: number, factor: number) => {
    const label = `${scenario} p99 ≤ ${factor}× ${reference} p99 at ${connections}`
    const line = lineOf(lines, scenario, connections)
    const floor = lineOf(lines, reference, connections)
    if (line === undefined || floor === undefined) return unmeasured(label)
    result.push({
      label,
      met: line.p99Ms <= factor * floor.p99Ms,
      value: `${ms(line.p99Ms)} against ${ms(floor.p99Ms)} (${(line.p99Ms / floor.p99Ms).toFixed(2)}×)`
    })
  }

  if (parts.includes("lookup")) {
    for (const connections of TARGET_CONNECTIONS) throughput(GET_BY_ID, FLOOR_SELECT, connections, 0.8)
  }
  if (parts.includes("create")) {
    const label = `${POST_CREATE} ≥ 80% of ${FLOOR_INSERT} req/s at 50, all routed ≤ 1 s after the load`
    const line = lineOf(lines, POST_CREATE, 50)
    const ratio = line === undefined ? undefined : ratioTo(line, FLOOR_INSERT, lines)
    if (line === undefined || ratio === undefined || line.drainMs === undefined) unmeasured(label)
    else {
      result.push({
        label,
        met: ratio >= 0.8 && line.drainMs <= 1000,
        value: `${percent(ratio)}, routed ${line.drainMs.toFixed(0)} ms after the load`
      })
    }
  }
  if (parts.includes("lookup")) {
    for (const connections of TARGET_CONNECTIONS) throughput(GET_LIST, FLOOR_SELECT, connections, 0.5)
    for (const connections of TARGET_CONNECTIONS) tail(GET_BY_ID, FLOOR_SELECT, connections, 1.5)
  }
  if (parts.includes("create")) {
    for (const connections of TARGET_CONNECTIONS) tail(POST_CREATE, FLOOR_INSERT, connections, 1.5)
  }
  if (parts.includes("e2e")) {
    const label = "market intent 201 → GET shows filled p99 < 100 ms at 10"
    const line = lineOf(lines, ANSWERED_TO_FILLED, 10)
    if (line === undefined) unmeasured(label)
    else result.push({ label, met: line.p99Ms < 100, value: ms(line.p99Ms) })
  }
  const peakMB = peakMiB * 1.048576
  result.push({ label: "service peak RSS < 250 MB", met: peakMB < 250, value: `${peakMB.toFixed(0)} MB` })
  for (const line of lines) {
    if (line.scenario === EVENT_STREAM) {
      result.push({ label: "event stream p99 < 50 ms with 100 streams", met: line.p99Ms < 50, value: ms(line.p99Ms) })
    }
    if (line.scenario.startsWith("live market intent") && line.connections === 10) {
      const label = "live intent (Alpaca fake) 201 → filled p99 < 150 ms at 10"
      result.push({ label, met: line.p99Ms < 150, value: ms(line.p99Ms) })
    }
    if (line.scenario.startsWith("  router:")) {
      const label = `${line.scenario.trim()} p99 < 20 ms at ${line.connections}`
      result.push({ label, met: line.p99Ms < 20, value: ms(line.p99Ms) })
    }
  }
  return result
}

/** One process's whole life: peak memory, CPU and the share of it spent in GC. */
const processSummary = (name: string, pid: number, gc: GcTally) => {
  const share = gcShareBetween(PROCESS_START, gcSnapshot(pid, gc))
  const seconds = (value: number) => `${(value / 1000).toFixed(1)} s`
  return `${name}: peak RSS ${peakRssMiB(pid).toFixed(0)} MiB, ${seconds(cpuMs(pid))} CPU, ` +
    `GC ${(share.share * 100).toFixed(1)}% of it (${seconds(share.gcCpuMs)} in ${gc.collections()} collections; ` +
    `${seconds(share.gcClockMs)} by V8's clock)`
}

// ---------------------------------------------------------------------------------------------
// Main

/**
 * A line of the routing driver's runs (RoutingCost.ts): their mean rate and CPU per intent, each
 * run's CPU in the note.
 */
const driverLine = (scenario: string, runs: ReadonlyArray<DriverRun>, note?: string): Line => ({
  scenario,
  connections: DRIVER_FIBERS,
  perSecond: mean(runs, (run) => run.perSecond),
  p50Ms: Number.NaN,
  p99Ms: Number.NaN,
  cpuMs: mean(runs, (run) => run.cpuUs) / 1000,
  dbCpuMs: LOCAL_DATABASE ? mean(runs, (run) => run.databaseUs) / 1000 : Number.NaN,
  gcShare: Number.NaN,
  peakMiB: Number.NaN,
  note: [`${runs.length} runs: ${runs.map((run) => run.cpuUs.toFixed(0)).join(", ")} µs per intent`, note].filter(Boolean).join("; ")
})

const main = async () => {
  const began = performance.now()
  const settings: Settings = {
    parts: selectedParts(),
    durationSeconds: positiveInt("BENCH_DURATION", 5),
    warmUpSeconds: positiveInt("BENCH_WARMUP", 10),
    connections: connectionCounts(),
    intents: positiveInt("BENCH_INTENTS", 1000)
  }
  const admin = adminUrl()
  console.log(machine())
  console.log(
    `runs: ${settings.warmUpSeconds} s warm-up on each server's first run of a kind of request, ${WARMUP_SECONDS} s on later ones, ` +
      `+ ${settings.durationSeconds} s measured, connections ${settings.connections.join(", ")}; ` +
      `${settings.intents} intents per end-to-end and webhook run`
  )
  const database = await freshDatabase(admin)
  const children: Array<ChildProcess> = []
  const alpaca = await FakeAlpaca.start()
  const db = new pg.Client({ connectionString: database.url })
  try {
    await db.connect()
    const { service, gc: serviceGc } = await startService(database.url, {
      ...alpacaEnv(alpaca),
      CREDENTIALS_KEY: randomBytes(32).toString("hex")
    })
    children.push(service.child)
    const referenceServer = await startReferenceServer("Reference.ts", database.url, "reference")
    children.push(referenceServer.child)
    const floorServer = await startReferenceServer("StackFloor.ts", database.url, "floor")
    children.push(floorServer.child)
    const context: Context = {
      settings,
      databaseUrl: database.url,
      db,
      runId: randomBytes(4).toString("hex"),
      service,
      serviceGc,
      account: await provision(service.baseUrl),
      reference: referenceServer,
      floor: floorServer
    }
    const lines: Array<Line> = []
    // Lookups need intents to look up: the creation runs make them.
    const parts: ReadonlyArray<Part> = settings.parts.includes("lookup") && !settings.parts.includes("create")
      ? ["create", ...settings.parts]
      : settings.parts
    /**
     * Runs one part of the bench. A part that fails (a non-2xx answer, a stream the service
     * closed) is reported and its lines are missing, but the other parts still run and print: the
     * run then ends with a non-zero exit code.
     */
    const failures: Array<string> = []
    const part = async (name: Part, work: () => Promise<void>) => {
      if (!parts.includes(name)) return
      try {
        await work()
      } catch (error) {
        console.error(`${name}: failed`, error)
        failures.push(`${name}: ${error instanceof Error ? error.message : String(error)}`)
        await quiesce(database.url).catch(() => undefined)
      }
    }
    await part("create", async () => {
      for (const connections of settings.connections) {
        console.log(`creations at ${connections} connections`)
        lines.push(...(await createScenarios(context, connections)))
      }
    })
    await part("routing", async () => {
      console.log(`routing's cost in process, ${DRIVER_FIBERS} fibers creating`)
      const { alone, routed } = await routingCost(admin)
      const cost = (of: (run: DriverRun) => number) => (mean(routed, of) - mean(alone, of)).toFixed(0)
      const databaseCost = LOCAL_DATABASE ? ` and ${cost((run) => run.databaseUs)} µs of PostgreSQL's` : ""
      lines.push(
        driverLine("creations in process, no routing worker (driver)", alone),
        driverLine(
          "creations in process, routed through the mock (driver)",
          routed,
          `routing: ${cost((run) => run.cpuUs)} µs of the driver's CPU per intent${databaseCost}`
        )
      )
    })
    await part("lookup", async () => {
      lines.push(...(await lookups(context)))
    })
    await part("e2e", async () => {
      await warmUpCreations(context)
      for (const connections of settings.connections) {
        console.log(`end to end at ${connections} connections`)
        lines.push(...(await endToEnd(context, connections)))
      }
    })
    await part("webhooks", async () => {
      await warmUpCreations(context)
      for (const connections of settings.connections) {
        console.log(`webhooks at ${connections} connections`)
        lines.push(...(await webhooks(context, connections)))
      }
    })
    await part("events", async () => {
      await warmUpCreations(context)
      lines.push(...(await eventScenarios(context)))
    })
    await part("alpaca", async () => {
      // The live path compiled first, as every other kind of request is (the later run follows at once).
      const [first = 10] = settings.connections
      console.log(`live intents through the fake Alpaca at ${first} connections, warming up`)
      await warmUpLive(service, database.url, alpaca, first, settings.warmUpSeconds)
      await quiesce(database.url)
      for (const connections of settings.connections) {
        console.log(`live intents through the fake Alpaca at ${connections} connections`)
        const { result: live, gcShare } = await measured(
          serviceProcess(context),
          () => liveEndToEnd(service, database.url, alpaca, connections, settings.intents)
        )
        lines.push(
          {
            scenario: "live market intent, 201 → filled committed (Alpaca fake)",
            connections,
            perSecond: live.perSecond,
            p50Ms: live.p50Ms,
            p99Ms: live.p99Ms,
            cpuMs: live.cpuMs,
            gcShare,
            mainBusy: live.mainBusy,
            peakMiB: live.peakMiB,
            note: `${live.intents} intents, one Alpaca account per client; GC % over the setup too`
          },
          {
            scenario: "  router: 201 → Alpaca receives the POST",
            connections,
            perSecond: Number.NaN,
            p50Ms: live.submit.p50,
            p99Ms: live.submit.p99,
            cpuMs: Number.NaN,
            gcShare: Number.NaN,
            peakMiB: Number.NaN
          },
          {
            scenario: "  router: Alpaca's fill event → filled committed",
            connections,
            perSecond: Number.NaN,
            p50Ms: live.fill.p50,
            p99Ms: live.fill.p99,
            cpuMs: Number.NaN,
            gcShare: Number.NaN,
            peakMiB: Number.NaN
          }
        )
        await quiesce(database.url)
      }
      console.log(`live bursts of ${BURST_SIZE} intents on one account`)
      const { result: burst, gcShare } = await measured(
        serviceProcess(context),
        () => liveBursts(service, database.url, alpaca, BURST_SIZE, BURSTS)
      )
      lines.push({
        scenario: `live burst of ${BURST_SIZE} on one account: last fill event → all filled committed`,
        connections: BURST_SIZE,
        perSecond: Number.NaN,
        p50Ms: burst.p50Ms,
        p99Ms: burst.p99Ms,
        cpuMs: burst.cpuMs,
        gcShare,
        mainBusy: burst.mainBusy,
        peakMiB: burst.peakMiB,
        note: `${burst.bursts} bursts, one after another, each on an account of its own; no target`
      })
    })
    const peak = peakRssMiB(pidOf(service.child))
    console.log()
    printTable(lines)
    console.log()
    console.log(processSummary("service", pidOf(service.child), serviceGc))
    console.log(processSummary("floor", floorServer.pid, floorServer.gc))
    console.log(processSummary("bare reference", referenceServer.pid, referenceServer.gc))
    console.log(
      "CPU is each server process's alone. DB CPU is every PostgreSQL process's on this machine over the same run" +
        (LOCAL_DATABASE ? "" : " (not measured: the database is elsewhere)") +
        ". GC: V8's GC trace (--trace-gc-nvp), its clock time" +
        " scaled by the share of runnable time the threads were on a core (schedstat)."
    )
    console.log("\ntargets:")
    for (const goal of goals(lines, parts, peak)) {
      const status = goal.met === undefined ? "n/a " : goal.met ? "MET " : "MISS"
      console.log(`  ${status}  ${goal.label}: ${goal.value}`)
    }
    if (failures.length > 0) {
      console.log("\nfailed parts (their lines are missing above):")
      for (const failure of failures) console.log(`  ${failure}`)
      process.exitCode = 1
    }
  } finally {
    await Promise.all(children.map((child) => stopService(child)))
    await db.end().catch(() => undefined)
    await alpaca.stop()
    await dropDatabase(admin, database.name)
  }
  console.log(`\ntotal run time: ${((performance.now() - began) / 1000).toFixed(1)} s`)
}

main().catch((error: unknown) => {
  console.error("bench failed:", error)
  process.exitCode = 1
})
