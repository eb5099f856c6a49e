/**
 * `npm run bench`: starts the service on a fresh PostgreSQL database, runs each scenario against it
 * over HTTP, prints latency percentiles and drops the database. DATABASE_URL names the server (an
 * admin URL); BENCH_INTENTS and BENCH_CONCURRENCY size the runs.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { once } from "node:events"
import { createServer as createHttpServer } from "node:http"
import { createServer } from "node:net"
import os from "node:os"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const ADMIN_TOKEN = "bench-admin"
const REQUEST_TIMEOUT_MS = 10_000
const HEALTH_TIMEOUT_MS = 60_000
const FILL_TIMEOUT_MS = 10_000
const POLL_INTERVAL_MS = 2
const STOP_GRACE_MS = 10_000
const WARMUP_INTENTS = 50
const P99_TARGET_MS = 100

const run = promisify(execFile)
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------
// Harness

interface Settings {
  readonly intents: number
  readonly concurrency: number
}

interface BenchContext extends Settings {
  readonly baseUrl: string
  readonly databaseUrl: string
  readonly userId: string
  readonly apiKey: string
  readonly brokerId: string
  readonly runId: string
}

/** One line of the table: latency samples, and the wall time they were taken over. */
interface Row {
  readonly label: string
  readonly samplesMs: ReadonlyArray<number>
  readonly wallMs: number
}

interface Target {
  readonly label: string
  readonly p99Ms: number
  readonly targetMs: number
}

interface Report {
  readonly rows: ReadonlyArray<Row>
  readonly targets: ReadonlyArray<Target>
}

interface Scenario {
  readonly name: string
  readonly run: (context: BenchContext) => Promise<Report>
}

const positiveInt = (name: string, fallback: number): number => {
  const text = process.env[name]
  if (text === undefined || text === "") return fallback
  const value = Number(text)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got "${text}"`)
  return value
}

/** Nearest-rank percentile of ascending samples. */
const percentile = (sorted: ReadonlyArray<number>, p: number): number => {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1] ?? Number.NaN
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const stringField = (body: unknown, name: string): string => {
  const value = isRecord(body) ? body[name] : undefined
  if (typeof value !== "string") throw new Error(`response has no string "${name}": ${JSON.stringify(body)}`)
  return value
}

interface JsonResponse {
  readonly status: number
  readonly body: unknown
}

const request = async (
  url: string,
  token: string,
  init: { readonly method?: string; readonly body?: unknown; readonly signal?: AbortSignal } = {}
): Promise<JsonResponse> => {
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS)
  const response = await fetch(url, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    signal: init.signal === undefined ? timeout : AbortSignal.any([timeout, init.signal])
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? null : JSON.parse(text) }
}

const expectStatus = (what: string, response: JsonResponse, status: number): unknown => {
  if (response.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`)
  }
  return response.body
}

/**
 * Runs `task(0..total-1)` on `concurrency` clients that each take the next index when done. The
 * first failure aborts the others, so a broken run ends quickly.
 */
const runClients = async (
  total: number,
  concurrency: number,
  task: (index: number, signal: AbortSignal) => Promise<void>
): Promise<void> => {
  const abort = new AbortController()
  let next = 0
  const client = async () => {
    while (next < total && !abort.signal.aborted) {
      const index = next++
      try {
        await task(index, abort.signal)
      } catch (error) {
        abort.abort(error)
        throw error
      }
    }
  }
  const results = await Promise.allSettled(Array.from({ length: Math.min(concurrency, total) }, client))
  if (abort.signal.aborted) throw abort.signal.reason
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected")
  if (failed !== undefined) throw failed.reason
}

// ---------------------------------------------------------------------------------------------
// Database and service

const freshDatabase = async (adminUrl: string) => {
  const name = `tir_bench_${randomBytes(6).toString("hex")}`
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  await run("psql", [adminUrl, "-v", "ON_ERROR_STOP=1", "-qc", `CREATE DATABASE ${name}`])
  return { name, url: url.toString() }
}

const dropDatabase = (adminUrl: string, name: string) =>
  run("psql", [adminUrl, "-v", "ON_ERROR_STOP=1", "-qc", `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`])

const freePort = async (): Promise<number> => {
  const server = createServer()
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const address = server.address()
  server.close()
  if (address === null || typeof address === "string") throw new Error("could not find a free port")
  return address.port
}

const startService = (databaseUrl: string, port: number, env: Record<string, string> = {}): ChildProcess => {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: "127.0.0.1",
      ADMIN_TOKEN,
      LOG_LEVEL: "warn",
      ...env
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  // Warnings and errors are worth seeing next to the numbers.
  const forward = (chunk: Buffer) => {
    for (const line of chunk.toString().split("\n")) if (line !== "") process.stderr.write(`[service] ${line}\n`)
  }
  child.stdout?.on("data", forward)
  child.stderr?.on("data", forward)
  return child
}

const waitHealthy = async (baseUrl: string, child: ChildProcess) => {
  const deadline = Date.now() + HEALTH_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`service exited with code ${child.exitCode} before it was healthy`)
    try {
      const response = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(2_000) })
      await response.body?.cancel()
      if (response.status === 200) return
    } catch {
      // not listening yet
    }
    await sleep(200)
  }
  throw new Error(`service not healthy after ${HEALTH_TIMEOUT_MS / 1000} s`)
}

const stopService = async (child: ChildProcess) => {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, "exit")
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS)
  await exited
  clearTimeout(timer)
}

/** A user with a test key and a mock broker connection, made through the operator API. */
const provision = async (baseUrl: string) => {
  const admin = (path: string, body: unknown) =>
    request(`${baseUrl}/admin/v1${path}`, ADMIN_TOKEN, { method: "POST", body }).then((r) =>
      expectStatus(`POST /admin/v1${path}`, r, 201)
    )
  const user = stringField(
    await admin("/users", { name: "bench", tier: "enterprise", requests_per_minute: 1_000_000 }),
    "id"
  )
  const apiKey = stringField(await admin(`/users/${user}/api-keys`, { name: "bench", mode: "test" }), "key")
  const brokerId = stringField(
    await admin(`/users/${user}/brokers`, { name: "bench mock", kind: "mock", mode: "test" }),
    "id"
  )
  return { apiKey, brokerId, userId: user }
}

// ---------------------------------------------------------------------------------------------
// Scenarios

const createIntent = async (context: BenchContext, intentId: string, signal: AbortSignal) => {
  const response = await request(`${context.baseUrl}/api/v1/intents`, context.apiKey, {
    method: "POST",
    body: {
      intent_id: intentId,
      symbol: "AAPL",
      side: "buy",
      quantity: 1,
      order_type: "market",
      broker_id: context.brokerId
    },
    signal
  })
  return stringField(expectStatus(`POST /api/v1/intents (${intentId})`, response, 201), "id")
}

const FINAL_NOT_FILLED = new Set(["canceled", "rejected", "failed"])

/** Polls the intent until it is filled; resolves when the GET that shows it returns. */
const awaitFilled = async (context: BenchContext, id: string, signal: AbortSignal) => {
  const deadline = performance.now() + FILL_TIMEOUT_MS
  for (;;) {
    const response = await request(`${context.baseUrl}/api/v1/intents/${id}`, context.apiKey, { signal })
    const status = stringField(expectStatus(`GET /api/v1/intents/${id}`, response, 200), "status")
    if (status === "filled") return
    if (FINAL_NOT_FILLED.has(status)) throw new Error(`intent ${id} ended ${status}: ${JSON.stringify(response.body)}`)
    if (performance.now() > deadline) throw new Error(`intent ${id} not filled after ${FILL_TIMEOUT_MS / 1000} s`)
    await sleep(POLL_INTERVAL_MS)
  }
}

const marketIntentFilled: Scenario = {
  name: "market intent: 201 → filled",
  run: async (context) => {
    const pass = async (phase: string, total: number) => {
      const postMs: Array<number> = []
      const fillMs: Array<number> = []
      const started = performance.now()
      await runClients(total, context.concurrency, async (index, signal) => {
        const sent = performance.now()
        const id = await createIntent(context, `bench-${context.runId}-${phase}-${index}`, signal)
        const created = performance.now()
        await awaitFilled(context, id, signal)
        postMs.push(created - sent)
        fillMs.push(performance.now() - created)
      })
      return { postMs, fillMs, wallMs: performance.now() - started }
    }
    await pass("warmup", WARMUP_INTENTS)
    const measured = await pass("run", context.intents)
    const fillP99 = percentile([...measured.fillMs].sort((a, b) => a - b), 99)
    return {
      rows: [
        { label: "POST create (201)", samplesMs: measured.postMs, wallMs: measured.wallMs },
        { label: "201 → filled (GET shows filled)", samplesMs: measured.fillMs, wallMs: measured.wallMs }
      ],
      targets: [{ label: "p99 201 → filled", p99Ms: fillP99, targetMs: P99_TARGET_MS }]
    }
  }
}

/** A local webhook receiver answering 204, noting when each event arrived (by body `id`). */
const startReceiver = async () => {
  const arrivals: Array<{ readonly id: string; readonly createdAt: number; readonly at: number }> = []
  const server = createHttpServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const at = Date.now()
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      arrivals.push({ id: stringField(body, "id"), createdAt: Date.parse(stringField(body, "created_at")), at })
      res.writeHead(204).end()
    })
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("receiver has no port")
  return { url: `http://127.0.0.1:${address.port}/hooks`, arrivals, close: () => server.close() }
}

const waitUntil = async (check: () => boolean, what: string, timeoutMs = 60_000) => {
  const deadline = performance.now() + timeoutMs
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`${what}: not done after ${timeoutMs / 1000} s`)
    await sleep(5)
  }
}

const webhookDelivery: Scenario = {
  name: "webhooks",
  run: async (context) => {
    const receiver = await startReceiver()
    try {
      const subscribe = async () =>
        stringField(
          expectStatus(
            "POST webhook endpoint",
            await request(`${context.baseUrl}/admin/v1/users/${context.userId}/webhook-endpoints`, ADMIN_TOKEN, {
              method: "POST",
              body: { url: receiver.url, mode: "test" }
            }),
            201
          ),
          "id"
        )
      // Latency: from the state change (the event's created_at) to its arrival, while intents flow.
      await subscribe()
      const started = performance.now()
      await runClients(context.intents, context.concurrency, async (index, signal) => {
        await createIntent(context, `bench-${context.runId}-hook-${index}`, signal)
      })
      const expected = context.intents * 2 // intent.created and intent.filled
      await waitUntil(() => receiver.arrivals.length >= expected, "live deliveries")
      const wallMs = performance.now() - started
      const latency = receiver.arrivals.map((arrival) => arrival.at - arrival.createdAt)

      // Throughput: a second endpoint gets a backlog of every event so far at once, then drains it.
      const backlogEndpoint = await subscribe()
      const before = receiver.arrivals.length
      const backlog = Number(
        (await run("psql", [context.databaseUrl, "-At", "-c", `
          WITH added AS (
            INSERT INTO webhook_deliveries (id, endpoint_id, event_id, status, next_attempt_at, created_at, updated_at)
            SELECT gen_random_uuid(), '${backlogEndpoint}', id, 'pending', now(), now(), now() FROM events
            RETURNING 1)
          SELECT count(*) FROM added`])).stdout.trim().split("\n")[0]
      )
      const drainStarted = performance.now()
      const drainStartedAt = Date.now()
      await run("psql", [context.databaseUrl, "-qc", "SELECT pg_notify('webhook_deliveries', 'due')"])
      await waitUntil(() => receiver.arrivals.length >= before + backlog, "backlog")
      const drainMs = performance.now() - drainStarted
      // Each backlog event's time from the drain's start to its arrival; the rate is the throughput.
      const drained = receiver.arrivals.slice(before).map((arrival) => arrival.at - drainStartedAt)
      return {
        rows: [
          { label: "state change → delivered", samplesMs: latency, wallMs },
          { label: `backlog of ${backlog} drained`, samplesMs: drained, wallMs: drainMs }
        ],
        targets: [{
          label: "p99 state change → webhook delivered",
          p99Ms: percentile([...latency].sort((a, b) => a - b), 99),
          targetMs: P99_TARGET_MS
        }]
      }
    } finally {
      receiver.close()
    }
  }
}

const LIMITER_ROUNDS = 3
const LOOKUPS_PER_ROUND = 1000

/**
 * The limiter's cost: GET by id on three instances of the service on the same database, one per
 * limiter store (database, Redis, none), in interleaved rounds so that drift hits all alike.
 */
const limiterCost: Scenario = {
  name: "GET by id",
  run: async (context) => {
    const id = await createIntent(context, `bench-${context.runId}-lookup`, new AbortController().signal)
    const variants = [
      { label: "limiter in the database", env: {} },
      { label: "limiter in Redis", env: { REDIS_URL: process.env.REDIS_URL || "redis://127.0.0.1:6379" } },
      { label: "no limiter (RATE_LIMITS=off)", env: { RATE_LIMITS: "off" } }
    ]
    const running = await Promise.all(variants.map(async (variant) => {
      const port = await freePort()
      const child = startService(context.databaseUrl, port, variant.env)
      return { ...variant, child, baseUrl: `http://127.0.0.1:${port}`, samples: [] as Array<number>, wallMs: 0 }
    }))
    try {
      await Promise.all(running.map((service) => waitHealthy(service.baseUrl, service.child)))
      const round = async (service: (typeof running)[number], record: boolean) => {
        const started = performance.now()
        await runClients(LOOKUPS_PER_ROUND, context.concurrency, async (_, signal) => {
          const sent = performance.now()
          const response = await request(`${service.baseUrl}/api/v1/intents/${id}`, context.apiKey, { signal })
          expectStatus("GET /api/v1/intents/{id}", response, 200)
          if (record) service.samples.push(performance.now() - sent)
        })
        if (record) service.wallMs += performance.now() - started
      }
      for (const service of running) await round(service, false)
      for (let r = 0; r < LIMITER_ROUNDS; r++) for (const service of running) await round(service, true)
    } finally {
      await Promise.all(running.map((service) => stopService(service.child)))
    }
    const rate = (service: (typeof running)[number]) => service.samples.length / (service.wallMs / 1000)
    const baseline = running[2]!
    for (const service of running.slice(0, 2)) {
      const cost = 1 - rate(service) / rate(baseline)
      console.log(`limiter cost, ${service.label}: ${(cost * 100).toFixed(1)}% of GET-by-id throughput (target < 10%)`)
    }
    return {
      rows: running.map((service) => ({ label: service.label, samplesMs: service.samples, wallMs: service.wallMs })),
      targets: []
    }
  }
}

const SCENARIOS: ReadonlyArray<Scenario> = [marketIntentFilled, webhookDelivery, limiterCost]

// ---------------------------------------------------------------------------------------------
// Output

const machine = () => {
  const cpus = os.cpus()
  const memoryGiB = (os.totalmem() / 1024 ** 3).toFixed(1)
  return `machine: ${cpus[0]?.model ?? "unknown cpu"}, ${cpus.length} cores, ${memoryGiB} GiB, node ${process.version}`
}

const formatTable = (header: ReadonlyArray<string>, lines: ReadonlyArray<ReadonlyArray<string>>) => {
  const all = [header, ...lines]
  const widths = header.map((_, column) => Math.max(...all.map((line) => (line[column] ?? "").length)))
  // The first column is text (left), the rest are numbers (right).
  const format = (line: ReadonlyArray<string>) =>
    line.map((cell, column) => column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))
      .join("  ")
  const rule = widths.map((w) => "-".repeat(w)).join("  ")
  return [format(header), rule, ...lines.map(format)].join("\n")
}

const tableLine = (scenario: string, row: Row): ReadonlyArray<string> => {
  const sorted = [...row.samplesMs].sort((a, b) => a - b)
  const ms = (value: number) => value.toFixed(1)
  return [
    `${scenario} / ${row.label}`,
    String(sorted.length),
    ms(percentile(sorted, 50)),
    ms(percentile(sorted, 99)),
    ms(sorted.at(-1) ?? Number.NaN),
    (sorted.length / (row.wallMs / 1000)).toFixed(1)
  ]
}

const printReports = (reports: ReadonlyArray<{ readonly scenario: Scenario; readonly report: Report }>) => {
  const header = ["scenario", "count", "p50 ms", "p99 ms", "max ms", "per s"]
  const lines = reports.flatMap(({ report, scenario }) => report.rows.map((row) => tableLine(scenario.name, row)))
  console.log(formatTable(header, lines))
  console.log("(per s: samples over the wall time of the measured run, warm-up excluded: intents, or webhook events)")
  for (const { report } of reports) {
    for (const target of report.targets) {
      const verdict = target.p99Ms <= target.targetMs ? "PASS" : "MISS"
      console.log(`${target.label}: ${target.p99Ms.toFixed(1)} ms vs target ${target.targetMs} ms: ${verdict}`)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Main

const main = async () => {
  const began = performance.now()
  const settings: Settings = {
    intents: positiveInt("BENCH_INTENTS", 1000),
    concurrency: positiveInt("BENCH_CONCURRENCY", 50)
  }
  const adminUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres"
  console.log(machine())
  console.log(`intents: ${settings.intents}, concurrency: ${settings.concurrency}, warm-up: ${WARMUP_INTENTS}`)

  const database = await freshDatabase(adminUrl)
  let child: ChildProcess | undefined
  try {
    const port = await freePort()
    const baseUrl = `http://127.0.0.1:${port}`
    child = startService(database.url, port)
    await waitHealthy(baseUrl, child)
    const context: BenchContext = {
      ...settings,
      ...(await provision(baseUrl)),
      baseUrl,
      databaseUrl: database.url,
      runId: randomBytes(4).toString("hex")
    }
    const reports = []
    for (const scenario of SCENARIOS) {
      console.log(`running: ${scenario.name}`)
      reports.push({ scenario, report: await scenario.run(context) })
    }
    console.log()
    printReports(reports)
  } finally {
    if (child !== undefined) await stopService(child)
    await dropDatabase(adminUrl, database.name)
  }
  console.log(`total run time: ${((performance.now() - began) / 1000).toFixed(1)} s`)
}

main().catch((error: unknown) => {
  console.error("bench failed:", error)
  process.exitCode = 1
})
