/**
 * `npm run bench`: starts the service on a fresh PostgreSQL database, drives it over loopback with
 * autocannon, and prints one table: scenario, requests per second, p50, p99, server CPU per request,
 * peak memory, and each scenario's ratio to its reference, measured in the same run on the same
 * machine (a bare `node:http` + `pg` server, see scripts/bench/Reference.ts).
 *
 * DATABASE_URL names the PostgreSQL server (an admin URL; a fresh database is made and dropped);
 * BENCH_DURATION (seconds per measured run, default 5), BENCH_CONNECTIONS (default "10,50") and
 * BENCH_INTENTS (intents per end-to-end and webhook run, default 1000) size the run; BENCH_ONLY
 * (some of create, lookup, e2e, webhooks, events, alpaca, comma-separated) runs those parts only. The
 * service's Alpaca endpoints point at a fake Alpaca started in this process.
 */
import autocannon from "autocannon"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import os from "node:os"
import * as FakeAlpaca from "../src/services/brokers/alpaca/FakeAlpaca.js"
import { alpacaEnv } from "../test/support/Harness.js"
import { streamLatency } from "./bench/EventStreams.js"
import { liveEndToEnd } from "./bench/LiveAlpaca.js"
import { percentile } from "./bench/Percentile.js"
import { cpuMs, measure, peakRssMiB } from "./bench/ProcessStats.js"
import { arrival, listen } from "../test/support/Harness.js"
import {
  adminUrl,
  dropDatabase,
  expectStatus,
  freePort,
  freshDatabase,
  marketIntent,
  provision,
  type Provisioned,
  psqlColumn,
  request,
  ROOT,
  run,
  runClients,
  type Service,
  sleep,
  startHealthy,
  stopService,
  stringField,
  subscribe,
  unsubscribe,
  waitUntil
} from "./lib/Service.js"

const WARMUP_SECONDS = 1
const FILL_TIMEOUT_MS = 30_000
const POLL_INTERVAL_MS = 2
const LOOKUP_IDS = 2_000

const PARTS = ["create", "lookup", "e2e", "webhooks", "events", "alpaca"] as const
type Part = (typeof PARTS)[number]

interface Settings {
  readonly parts: ReadonlyArray<Part>
  readonly durationSeconds: number
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
  readonly peakMiB: number
  /** The reference line this one is compared with, by scenario name and connections. */
  readonly reference?: string
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

interface Target {
  readonly baseUrl: string
  readonly pid: number
  readonly headers: Record<string, string>
}

interface LoadSpec {
  readonly method: "GET" | "POST"
  /** The path (and body) of each request, numbered from 0 across the run. */
  readonly next: (n: number) => { readonly path: string; readonly body?: string }
}

/**
 * Drives `target` with autocannon at `connections` for a warm-up second, then for the measured
 * duration, sampling the server process's CPU and memory. Every answer must be a 2xx: a benchmark
 * that counts errors as throughput measures nothing.
 */
const load = async (
  settings: Settings,
  target: Target,
  connections: number,
  spec: LoadSpec
): Promise<Omit<Line, "scenario" | "reference">> => {
  let n = 0
  const fire = (duration: number) =>
    autocannon({
      url: target.baseUrl,
      connections,
      duration,
      headers: { ...target.headers, "content-type": "application/json" },
      requests: [{
        method: spec.method,
        setupRequest: (req) => {
          const { path, body } = spec.next(n++)
          return body === undefined ? { ...req, path } : { ...req, path, body }
        }
      }]
    })
  await fire(WARMUP_SECONDS)
  const { result, cpuMs: cpu, peakMiB } = await measure(target.pid, () => fire(settings.durationSeconds))
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `${spec.method} ${target.baseUrl}: ${result.non2xx} non-2xx answers ${JSON.stringify(result.statusCodeStats)}` +
        ` and ${result.errors} errors`
    )
  }
  const requests = result.requests.total
  return {
    connections,
    perSecond: requests / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    cpuMs: cpu / requests,
    peakMiB
  }
}

// ---------------------------------------------------------------------------------------------
// Processes

const pidOf = (child: ChildProcess): number => {
  if (child.pid === undefined) throw new Error("child process has no pid")
  return child.pid
}

const startReference = async (databaseUrl: string) => {
  const port = await freePort()
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/bench/Reference.ts", databaseUrl, String(port)], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"]
  })
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once("data", () => resolve())
    child.once("exit", (code) => reject(new Error(`reference server exited with ${code}`)))
  })
  return { child, baseUrl: `http://127.0.0.1:${port}`, pid: pidOf(child) }
}

/**
 * Waits until no routing job or delivery is left, then vacuums and checkpoints, so that a scenario
 * pays neither for the previous one's background work nor for its writes (dead rows, dirty pages,
 * autovacuum and a checkpoint arriving in the middle of the next run).
 */
const quiesce = async (databaseUrl: string) => {
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
  await run("psql", [databaseUrl, "-v", "ON_ERROR_STOP=1", "-qc", "VACUUM ANALYZE"])
  // CHECKPOINT needs a superuser (or pg_checkpoint); without one the run goes on unsettled.
  await run("psql", [databaseUrl, "-qc", "CHECKPOINT"]).catch(() => undefined)
}

// ---------------------------------------------------------------------------------------------
// Scenarios

interface Context {
  readonly settings: Settings
  readonly databaseUrl: string
  readonly runId: string
  readonly service: Service
  readonly account: Provisioned
  readonly reference: { readonly baseUrl: string; readonly pid: number }
}

const serviceTarget = (context: Context, service: Service = context.service): Target => ({
  baseUrl: service.baseUrl,
  pid: pidOf(service.child),
  headers: { authorization: `Bearer ${context.account.apiKey}` }
})

const intentBody = (context: Context, path: string, prefix: string) => (n: number) => ({
  path,
  body: JSON.stringify(marketIntent(`${prefix}-${context.runId}-${n}`, context.account.brokerId))
})

const createScenarios = async (context: Context, connections: number): Promise<ReadonlyArray<Line>> => {
  const reference = await load(context.settings, { ...context.reference, headers: {} }, connections, {
    method: "POST",
    next: intentBody(context, "/intents", `ref${connections}`)
  })
  const service = await load(context.settings, serviceTarget(context), connections, {
    method: "POST",
    next: intentBody(context, "/api/v1/intents", `create${connections}`)
  })
  await quiesce(context.databaseUrl)
  return [
    { scenario: "bare INSERT (reference)", ...reference },
    { scenario: "POST create", ...service, reference: "bare INSERT (reference)", note: "market orders, routed after" }
  ]
}

const lookupScenarios = async (
  context: Context,
  connections: number,
  ids: { readonly service: ReadonlyArray<string>; readonly reference: ReadonlyArray<string> },
  unlimited: ReadonlyArray<{ readonly label: string; readonly service: Service }>
): Promise<ReadonlyArray<Line>> => {
  const pick = (list: ReadonlyArray<string>, n: number) => list[n % list.length] ?? ""
  const byId = (prefix: string, list: ReadonlyArray<string>) => (n: number) => ({ path: `${prefix}/${pick(list, n)}` })
  const reference = await load(context.settings, { ...context.reference, headers: {} }, connections, {
    method: "GET",
    next: byId("/intents", ids.reference)
  })
  const service = await load(context.settings, serviceTarget(context), connections, {
    method: "GET",
    next: byId("/api/v1/intents", ids.service)
  })
  const list = await load(context.settings, serviceTarget(context), connections, {
    method: "GET",
    next: (n) => ({ path: `/api/v1/intents?page=${1 + (n % 5)}&page_size=20` })
  })
  const limiterLines: Array<Line> = []
  for (const variant of unlimited) {
    const line = await load(context.settings, serviceTarget(context, variant.service), connections, {
      method: "GET",
      next: byId("/api/v1/intents", ids.service)
    })
    limiterLines.push({ scenario: variant.label, ...line, reference: "GET by id", note: "limiter cost = 1 − ratio" })
  }
  return [
    { scenario: "bare SELECT (reference)", ...reference },
    { scenario: "GET by id", ...service, reference: "bare SELECT (reference)", note: "limiter in PostgreSQL" },
    { scenario: "GET list (20 per page)", ...list, reference: "bare SELECT (reference)" },
    ...limiterLines
  ]
}

const FINAL_NOT_FILLED = new Set(["canceled", "rejected", "failed"])

/** Market intents on `connections` clients: each from its POST to the GET that first shows it filled. */
const endToEnd = async (context: Context, connections: number): Promise<Line> => {
  const { baseUrl } = context.service
  const { apiKey, brokerId } = context.account
  const samples: Array<number> = []
  const started = performance.now()
  const { cpuMs: cpu, peakMiB } = await measure(pidOf(context.service.child), () =>
    runClients(context.settings.intents, connections, async (index, signal) => {
      const sent = performance.now()
      const created = await request(`${baseUrl}/api/v1/intents`, apiKey, {
        method: "POST",
        body: marketIntent(`e2e${connections}-${context.runId}-${index}`, brokerId),
        signal
      })
      const id = stringField(expectStatus("POST /api/v1/intents", created, 201), "id")
      for (;;) {
        const response = await request(`${baseUrl}/api/v1/intents/${id}`, apiKey, { signal })
        const status = stringField(expectStatus(`GET /api/v1/intents/${id}`, response, 200), "status")
        if (status === "filled") break
        if (FINAL_NOT_FILLED.has(status)) throw new Error(`intent ${id} ended ${status}`)
        if (performance.now() - sent > FILL_TIMEOUT_MS) throw new Error(`intent ${id} not filled in time`)
        await sleep(POLL_INTERVAL_MS)
      }
      samples.push(performance.now() - sent)
    }))
  const wallMs = performance.now() - started
  await quiesce(context.databaseUrl)
  const sorted = samples.sort((a, b) => a - b)
  return {
    scenario: "market intent, POST → GET shows filled",
    connections,
    perSecond: samples.length / (wallMs / 1000),
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    cpuMs: cpu / samples.length,
    peakMiB,
    reference: "bare INSERT (reference)",
    note: "per intent, polling included"
  }
}

/**
 * Webhooks: latency from each state change (the event's `created_at`) to its arrival while intents
 * flow on `connections` clients, then a backlog of every event so far drained by a new endpoint.
 */
const webhooks = async (context: Context, connections: number): Promise<ReadonlyArray<Line>> => {
  const receiver = await listen(() => 204)
  const pid = pidOf(context.service.child)
  try {
    const endpoint = await subscribe(context.service.baseUrl, context.account.userId, receiver.url)
    const started = performance.now()
    const live = await measure(pid, () =>
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
    const drain = await measure(pid, async () => {
      await run("psql", [context.databaseUrl, "-qc", "SELECT pg_notify('webhook_deliveries', 'due')"])
      await waitUntil(() => receiver.received.length >= before + backlog, "backlog", 120_000)
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
    const reference = await load(context.settings, { ...context.reference, headers: {} }, connections, {
      method: "GET",
      next: () => ({ path: "/intents?page" })
    })
    const service = await load(context.settings, serviceTarget(context), connections, {
      method: "GET",
      next: () => ({ path: "/api/v1/events?limit=100" })
    })
    lines.push(
      { scenario: "bare SELECT of 100 rows (reference)", ...reference },
      { scenario: "GET events, page of 100", ...service, reference: "bare SELECT of 100 rows (reference)" }
    )
  }
  console.log("event stream latency, 100 streams")
  const pid = pidOf(context.service.child)
  const { cpuMs: cpu, peakMiB, result } = await measure(pid, () =>
    streamLatency(context.service, { streams: 100, clients: 10, intents: context.settings.intents }))
  await quiesce(context.databaseUrl)
  lines.push({
    scenario: "event stream: commit → arrival, 100 streams",
    connections: 100,
    perSecond: result.perSecond,
    p50Ms: result.p50,
    p99Ms: result.p99,
    cpuMs: cpu / result.events,
    peakMiB,
    note: `${result.events} events from 10 clients creating`
  })
  return lines
}

/** GET by id and list on the main service; GET by id on the reference and with the other limiter stores. */
const lookups = async (context: Context): Promise<ReadonlyArray<Line>> => {
  const ids = {
    service: await psqlColumn(context.databaseUrl, `SELECT id FROM intents ORDER BY random() LIMIT ${LOOKUP_IDS}`),
    reference: await psqlColumn(
      context.databaseUrl,
      `SELECT id FROM reference_intents ORDER BY random() LIMIT ${LOOKUP_IDS}`
    )
  }
  const redisUrl = process.env.REDIS_URL || "redis://127.0.0.1:6379"
  const variants = [
    { label: "GET by id, limiter in Redis", env: { REDIS_URL: redisUrl } },
    { label: "GET by id, no limiter", env: { RATE_LIMITS: "off" } }
  ]
  const started: Array<{ readonly label: string; readonly service: Service }> = []
  try {
    for (const variant of variants) {
      started.push({ label: variant.label, service: await startHealthy(context.databaseUrl, variant.env, variant.label) })
    }
    const lines: Array<Line> = []
    for (const connections of context.settings.connections) {
      console.log(`lookups at ${connections} connections`)
      lines.push(...(await lookupScenarios(context, connections, ids, started)))
    }
    return lines
  } finally {
    await Promise.all(started.map((variant) => stopService(variant.service.child)))
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
    ).join("  ")
  const rule = widths.map((w) => "-".repeat(w)).join("  ")
  return [format(header), rule, ...lines.map(format)].join("\n")
}

const ratioOf = (line: Line, lines: ReadonlyArray<Line>): number | undefined => {
  const reference = lines.find((other) => other.scenario === line.reference && other.connections === line.connections)
  return reference === undefined ? undefined : line.perSecond / reference.perSecond
}

/** A figure, or a dash where the line has none. */
const figure = (value: number, digits: number) => Number.isNaN(value) ? "-" : value.toFixed(digits)

const printTable = (lines: ReadonlyArray<Line>) => {
  const header = ["scenario", "conns", "req/s", "p50 ms", "p99 ms", "CPU ms/req", "peak MiB", "ratio", "reference / note"]
  const rows = lines.map((line) => {
    const ratio = ratioOf(line, lines)
    return [
      line.scenario,
      line.connections === 0 ? "-" : String(line.connections),
      figure(line.perSecond, 0),
      figure(line.p50Ms, 1),
      figure(line.p99Ms, 1),
      figure(line.cpuMs, 2),
      figure(line.peakMiB, 0),
      ratio === undefined ? "" : `${(ratio * 100).toFixed(0)}%`,
      [line.reference === undefined ? "" : `of ${line.reference}`, line.note ?? ""].filter((s) => s !== "").join("; ")
    ]
  })
  console.log(formatTable(header, rows))
}

interface Goal {
  readonly label: string
  readonly met: boolean
  readonly value: string
}

const goals = (lines: ReadonlyArray<Line>, peakMiB: number): ReadonlyArray<Goal> => {
  const result: Array<Goal> = []
  for (const line of lines) {
    const ratio = ratioOf(line, lines)
    if (line.scenario === "POST create" && ratio !== undefined) {
      result.push({ label: `POST create ≥ 60% of bare INSERT at ${line.connections}`, met: ratio >= 0.6, value: `${(ratio * 100).toFixed(0)}%` })
    }
    if (line.scenario === "GET by id" && ratio !== undefined) {
      result.push({ label: `GET by id ≥ 40% of bare SELECT at ${line.connections}`, met: ratio >= 0.4, value: `${(ratio * 100).toFixed(0)}%` })
    }
    if ((line.scenario === "POST create" || line.scenario === "GET by id") && line.connections === 50) {
      result.push({ label: `${line.scenario} p99 < 30 ms at 50`, met: line.p99Ms < 30, value: `${line.p99Ms.toFixed(1)} ms` })
    }
  }
  for (const line of lines) {
    if (line.scenario.startsWith("event stream")) {
      result.push({ label: "event stream p99 < 50 ms with 100 streams", met: line.p99Ms < 50, value: `${line.p99Ms.toFixed(1)} ms` })
    }
    if (line.scenario.startsWith("live market intent") && line.connections === 10) {
      result.push({ label: "live intent 201 → filled p99 < 150 ms at 10", met: line.p99Ms < 150, value: `${line.p99Ms.toFixed(1)} ms` })
    }
    if (line.scenario.startsWith("  router:")) {
      result.push({
        label: `${line.scenario.trim()} p99 < 20 ms at ${line.connections}`,
        met: line.p99Ms < 20,
        value: `${line.p99Ms.toFixed(1)} ms`
      })
    }
  }
  result.push({ label: "service peak memory < 250 MB", met: peakMiB * 1.048576 < 250, value: `${(peakMiB * 1.048576).toFixed(0)} MB` })
  return result
}

// ---------------------------------------------------------------------------------------------
// Main

const main = async () => {
  const began = performance.now()
  const settings: Settings = {
    parts: selectedParts(),
    durationSeconds: positiveInt("BENCH_DURATION", 5),
    connections: connectionCounts(),
    intents: positiveInt("BENCH_INTENTS", 1000)
  }
  const admin = adminUrl()
  console.log(machine())
  console.log(
    `runs: ${WARMUP_SECONDS} s warm-up + ${settings.durationSeconds} s measured, connections ${settings.connections.join(", ")}; ` +
      `${settings.intents} intents per end-to-end and webhook run`
  )
  const database = await freshDatabase(admin)
  const children: Array<ChildProcess> = []
  const alpaca = await FakeAlpaca.start()
  try {
    const service = await startHealthy(database.url, {
      ...alpacaEnv(alpaca),
      CREDENTIALS_KEY: randomBytes(32).toString("hex")
    })
    children.push(service.child)
    const referenceServer = await startReference(database.url)
    children.push(referenceServer.child)
    const context: Context = {
      settings,
      databaseUrl: database.url,
      runId: randomBytes(4).toString("hex"),
      service,
      account: await provision(service.baseUrl),
      reference: referenceServer
    }
    const lines: Array<Line> = []
    // Lookups need intents to look up: the creation runs make them.
    const parts = settings.parts.includes("lookup") && !settings.parts.includes("create")
      ? ["create", ...settings.parts]
      : settings.parts
    if (parts.includes("create")) {
      for (const connections of settings.connections) {
        console.log(`creations at ${connections} connections`)
        lines.push(...(await createScenarios(context, connections)))
      }
    }
    if (parts.includes("lookup")) lines.push(...(await lookups(context)))
    if (parts.includes("e2e")) {
      for (const connections of settings.connections) {
        console.log(`end to end at ${connections} connections`)
        lines.push(await endToEnd(context, connections))
      }
    }
    if (parts.includes("webhooks")) {
      for (const connections of settings.connections) {
        console.log(`webhooks at ${connections} connections`)
        lines.push(...(await webhooks(context, connections)))
      }
    }
    if (parts.includes("events")) lines.push(...(await eventScenarios(context)))
    if (parts.includes("alpaca")) {
      for (const connections of settings.connections) {
        console.log(`live intents through the fake Alpaca at ${connections} connections`)
        const live = await liveEndToEnd(service, database.url, alpaca, context.account.userId, connections, settings.intents)
        lines.push(
          {
            scenario: "live market intent, 201 → filled committed (Alpaca fake)",
            connections,
            perSecond: live.perSecond,
            p50Ms: live.p50Ms,
            p99Ms: live.p99Ms,
            cpuMs: live.cpuMs,
            peakMiB: live.peakMiB,
            note: `${live.intents} intents, one Alpaca account per client`
          },
          {
            scenario: "  router: 201 → Alpaca receives the POST",
            connections,
            perSecond: Number.NaN,
            p50Ms: live.submit.p50,
            p99Ms: live.submit.p99,
            cpuMs: Number.NaN,
            peakMiB: Number.NaN
          },
          {
            scenario: "  router: Alpaca's fill event → filled committed",
            connections,
            perSecond: Number.NaN,
            p50Ms: live.fill.p50,
            p99Ms: live.fill.p99,
            cpuMs: Number.NaN,
            peakMiB: Number.NaN
          }
        )
        await quiesce(database.url)
      }
    }
    const peak = peakRssMiB(pidOf(service.child))
    const referencePeak = peakRssMiB(referenceServer.pid)
    console.log()
    printTable(lines)
    console.log(
      `\nservice: peak RSS ${peak.toFixed(0)} MiB over the whole run, ${(cpuMs(pidOf(service.child)) / 1000).toFixed(1)} s CPU;` +
        ` reference server: peak RSS ${referencePeak.toFixed(0)} MiB. CPU is the server process's alone (not PostgreSQL's).`
    )
    console.log("\ntargets:")
    for (const goal of goals(lines, peak)) console.log(`  ${goal.met ? "MET " : "MISS"}  ${goal.label}: ${goal.value}`)
  } finally {
    await Promise.all(children.map((child) => stopService(child)))
    await alpaca.stop()
    await dropDatabase(admin, database.name)
  }
  console.log(`\ntotal run time: ${((performance.now() - began) / 1000).toFixed(1)} s`)
}

main().catch((error: unknown) => {
  console.error("bench failed:", error)
  process.exitCode = 1
})
