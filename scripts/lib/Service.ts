/**
 * What the bench and the drills share beyond the harness: fresh PostgreSQL databases, load, JSON
 * calls, and the harness's service and sign-up with the bench's admin token.
 */
import { execFile, execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { setMaxListeners } from "node:events"
import * as Http from "node:http"
import { promisify } from "node:util"
import type { CreateUserPayload } from "../../src/api/AdminApi.js"
import type { CreateIntentPayload } from "../../src/domain/Intent.js"
import * as Harness from "../../test/support/Harness.js"
import type { UserId, WebhookEndpointId } from "../../src/domain/Ids.js"

export { freePort, ROOT, stop as stopService } from "../../test/support/Harness.js"
export const ADMIN_TOKEN = "bench-admin"
const REQUEST_TIMEOUT_MS = 10_000

export const run = promisify(execFile)
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Runs `round` again and again, each to its end, until `seconds` have passed (a warm-up of whole runs). */
export const repeatFor = async (seconds: number, round: () => Promise<unknown>) => {
  const until = performance.now() + seconds * 1000
  while (performance.now() < until) await round()
}

/** The admin URL of the PostgreSQL server to use: DATABASE_URL, or the local default. */
export const adminUrl = () => process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres"

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const stringField = (body: unknown, name: string): string => {
  const value = isRecord(body) ? body[name] : undefined
  if (typeof value !== "string") throw new Error(`response has no string "${name}": ${JSON.stringify(body)}`)
  return value
}

export interface JsonResponse {
  readonly status: number
  readonly body: unknown
}

/**
 * The connections of the bench's JSON calls, kept open between calls. Node's own client costs the
 * bench about a third of `fetch`'s CPU per call, which leaves more of the cores the bench shares
 * with the service and the database to them. A connection idle for 4 s is closed by the bench
 * before the server closes it (after 5 s): without a timeout of its own the agent kept idle
 * connections for ever, and a call that took one at the moment the server closed it failed with
 * `ECONNRESET` or `socket hang up` (a part's first calls after a pause between parts).
 */
const agent = new Http.Agent({ keepAlive: true, timeout: 4_000 })

/** One JSON call with a bearer token: its status and parsed body. Fails after `REQUEST_TIMEOUT_MS` without a word. */
export const request = (
  url: string,
  token: string,
  init: { readonly method?: string; readonly body?: unknown; readonly signal?: AbortSignal } = {}
): Promise<JsonResponse> =>
  new Promise((resolve, reject) => {
    const body = init.body === undefined ? undefined : JSON.stringify(init.body)
    const outgoing = Http.request(url, {
      agent,
      method: init.method ?? "GET",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) })
      },
      timeout: REQUEST_TIMEOUT_MS,
      ...(init.signal === undefined ? {} : { signal: init.signal })
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("error", reject)
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        try {
          resolve({ status: response.statusCode ?? 0, body: text === "" ? null : JSON.parse(text) })
        } catch (error) {
          reject(error)
        }
      })
    })
    outgoing.on("timeout", () => outgoing.destroy(new Error(`${url}: no answer within ${REQUEST_TIMEOUT_MS} ms`)))
    outgoing.on("error", reject)
    outgoing.end(body)
  })

export const expectStatus = (what: string, response: JsonResponse, status: number): unknown => {
  if (response.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`)
  }
  return response.body
}

/**
 * Runs `task(0..total-1)` on `concurrency` clients that each take the next index when done. The
 * first failure aborts the others, so a broken run ends quickly.
 */
export const runClients = async (
  total: number,
  concurrency: number,
  task: (index: number, signal: AbortSignal) => Promise<void>
): Promise<void> => {
  const abort = new AbortController()
  // Every client's call in flight listens to it.
  setMaxListeners(0, abort.signal)
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

export const waitUntil = async (check: () => boolean, what: string, timeoutMs = 60_000) => {
  const deadline = performance.now() + timeoutMs
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`${what}: not done after ${timeoutMs / 1000} s`)
    await sleep(5)
  }
}

/** Polls `check` every `intervalMs` until it resolves true; throws after `timeoutMs`. */
export const waitFor = async (
  check: () => Promise<boolean>,
  what: string,
  timeoutMs = 60_000,
  intervalMs = 100
) => {
  const deadline = performance.now() + timeoutMs
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what}: not done after ${timeoutMs / 1000} s`)
    await sleep(intervalMs)
  }
}

export interface Load {
  /** Requests started so far. */
  readonly started: () => number
  /** Requests started and not yet answered. */
  readonly inFlight: () => number
  /** Starts no more requests (at once) and resolves when those in flight have ended. */
  readonly stop: () => Promise<void>
}

/**
 * `concurrency` clients calling `task(0, 1, 2, …)` back to back until stopped: load that keeps
 * going through a fault. A task records its own outcome; one that throws is simply over.
 */
export const startLoad = (concurrency: number, task: (index: number) => Promise<void>): Load => {
  let stopped = false
  let next = 0
  let inFlight = 0
  const client = async () => {
    while (!stopped) {
      const index = next++
      inFlight++
      try {
        await task(index)
      } catch {
        // the task's own business
      } finally {
        inFlight--
      }
    }
  }
  const clients = Array.from({ length: concurrency }, client)
  return {
    started: () => next,
    inFlight: () => inFlight,
    stop: async () => {
      stopped = true
      await Promise.allSettled(clients)
    }
  }
}

/** Median and 95th percentile of `values`, for figures. */
export const percentiles = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
  return { p50: at(0.5), p95: at(0.95), max: sorted.at(-1) ?? Number.NaN }
}

// ---------------------------------------------------------------------------------------------
// Databases

export interface Database {
  readonly name: string
  readonly url: string
}

export const freshDatabase = async (admin: string, prefix = "tir_bench"): Promise<Database> => {
  const name = `${prefix}_${randomBytes(6).toString("hex")}`
  const url = new URL(admin)
  url.pathname = `/${name}`
  await run("psql", [admin, "-v", "ON_ERROR_STOP=1", "-qc", `CREATE DATABASE ${name}`])
  return { name, url: url.toString() }
}

export const dropDatabase = (admin: string, name: string) =>
  run("psql", [admin, "-v", "ON_ERROR_STOP=1", "-qc", `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`])

/** The first column of each row of `query`, through psql. */
export const psqlColumn = async (url: string, query: string): Promise<ReadonlyArray<string>> =>
  (await run("psql", [url, "-v", "ON_ERROR_STOP=1", "-At", "-c", query], { maxBuffer: 64 * 1024 * 1024 })).stdout
    .split("\n")
    .filter((line) => line !== "")

/** The ids of every event of `userId`, from the database. */
export const eventIds = (url: string, userId: string) =>
  psqlColumn(url, `SELECT id FROM events WHERE user_id = '${userId}'`)

// ---------------------------------------------------------------------------------------------
// The service

export type Service = Harness.Started

let built = false

/** `npm run build`, once per process: the bundle `npm start` runs. */
export const build = () => {
  if (built) return
  execFileSync("npm", ["run", "--silent", "build"], { cwd: Harness.ROOT, stdio: "inherit" })
  built = true
}

/**
 * The shared harness's `start` on PostgreSQL at `databaseUrl`, with the bench's admin token; `env`
 * adds or overrides settings. Its output goes to stderr, each line labelled, unless `onLine` takes it.
 */
export const startHealthy = (
  databaseUrl: string,
  env: Record<string, string> = {},
  label = "service",
  nodeArgs: ReadonlyArray<string> = [],
  onLine: (line: string) => void = (line) => process.stderr.write(`[${label}] ${line}\n`)
) => {
  build()
  return Harness.start({ DATABASE_URL: databaseUrl, ADMIN_TOKEN, ...env }, { nodeArgs, onLine })
}

/**
 * Service output counted by level and `message` (logfmt or JSON logs): a summary instead of a
 * flood of expected errors. Lines that are no log record are counted whole.
 */
export const logTally = () => {
  const counts = new Map<string, number>()
  const onLine = (line: string) => {
    const message = /message="((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? /"message":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1]
    const level = /level=(\w+)/.exec(line)?.[1] ?? /"level":"(\w+)"/.exec(line)?.[1]
    const key = message === undefined ? line.slice(0, 200) : `${level ?? "?"} ${message}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  const summary = () => [...counts].map(([key, n]) => `${n}× ${key}`)
  /** How many lines so far had a key containing `text`. */
  const count = (text: string) => [...counts].reduce((sum, [key, n]) => (key.includes(text) ? sum + n : sum), 0)
  return { onLine, summary, count }
}

export interface Provisioned {
  readonly userId: UserId
  readonly apiKey: string
  readonly brokerId: string
}

/** The shared typed sign-up: an enterprise user allowed a million requests a minute, unless `user` says otherwise. */
export const provision = async (
  baseUrl: string,
  user: Partial<typeof CreateUserPayload.Type> = {}
): Promise<Provisioned> => {
  const { brokerId, key, userId } = await Harness.signUpOver(baseUrl, ADMIN_TOKEN, {
    name: "bench",
    requests_per_minute: 1_000_000,
    ...user
  })
  return { apiKey: key, brokerId, userId }
}

/** Subscribes `userId`'s test events to `url` through the typed operator client; the endpoint's id. */
export const subscribe = async (baseUrl: string, userId: UserId, url: string) => {
  const { admin } = await Harness.clientOf(baseUrl, ADMIN_TOKEN)
  const endpoint = await Harness.call(admin.createWebhookEndpoint({ path: { user_id: userId }, payload: { url, mode: "test" } }))
  return endpoint.id
}

/** Deletes a webhook endpoint (and its deliveries) through the typed operator client. */
export const unsubscribe = async (baseUrl: string, endpointId: WebhookEndpointId) => {
  const { admin } = await Harness.clientOf(baseUrl, ADMIN_TOKEN)
  await Harness.call(admin.deleteWebhookEndpoint({ path: { endpoint_id: endpointId } }))
}

/** A market buy of one AAPL on `brokerId`: fills at once on the mock broker. */
export const marketIntent = (intentId: string, brokerId: string): CreateIntentPayload => ({
  intent_id: intentId,
  symbol: "AAPL",
  side: "buy",
  quantity: 1,
  order_type: "market",
  broker_id: brokerId
})
