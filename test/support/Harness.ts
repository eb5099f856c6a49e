/**
 * The one harness the tests, the bench and the drills share: the service as a child process (run as
 * `npm start` runs it, until `/healthz` answers), a free port, a local webhook receiver and an
 * operator sign-up through the typed client. It imports no test framework, so that the scripts
 * (`npm run bench`, `npm run drill`) can use it as they are.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { readFileSync } from "node:fs"
import * as Http from "node:http"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"
import type { CreateUserPayload } from "../../src/api/AdminApi.js"
import * as Client from "../../src/Client.js"

export const ROOT = fileURLToPath(new URL("../..", import.meta.url))

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** `npm start`'s command, from package.json's `start` script: `[NAME=value …] node <args>`. */
export const startCommand = (): { readonly env: Readonly<Record<string, string>>; readonly args: ReadonlyArray<string> } => {
  const manifest: unknown = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8"))
  const script = typeof manifest === "object" && manifest !== null && "scripts" in manifest &&
      typeof manifest.scripts === "object" && manifest.scripts !== null && "start" in manifest.scripts
    ? manifest.scripts.start
    : undefined
  const words = typeof script === "string" ? script.trim().split(/\s+/) : []
  const unexpected = () => new Error(`package.json's start script must run node, after any NAME=value, not: ${String(script)}`)
  const node = words.indexOf("node")
  if (node < 0) throw unexpected()
  const env: Record<string, string> = {}
  for (const word of words.slice(0, node)) {
    const assignment = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(word)
    if (assignment === null) throw unexpected()
    env[assignment[1]] = assignment[2]
  }
  return { env, args: words.slice(node + 1) }
}

/** `npm start`'s arguments to node (its flags and `dist/main.js`). */
export const startArgs = (): ReadonlyArray<string> => startCommand().args

/** The environment `npm start` sets for node (its `NAME=value` words before `node`). */
export const startEnv = (): Readonly<Record<string, string>> => startCommand().env

/** A loopback port nobody listens on. */
export const freePort = async (): Promise<number> => {
  const server = createServer().listen(0, "127.0.0.1")
  await once(server, "listening")
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (address === null || typeof address === "string") throw new Error("could not find a free port")
  return address.port
}

// ---------------------------------------------------------------------------------------------
// The service

export interface Started {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly port: number
  /** Everything it printed so far. */
  readonly output: () => string
}

export interface StartOptions {
  /** Node flags before `npm start`'s own (e.g. `--cpu-prof`). */
  readonly nodeArgs?: ReadonlyArray<string>
  /** Takes each line the service prints, as it comes. */
  readonly onLine?: (line: string) => void
  readonly healthTimeoutMs?: number
}

/**
 * `npm start`'s command (the bundle built beforehand) with `env` added, until `/healthz` answers 200.
 * The caller's DATABASE_URL and REDIS_URL never leak in: without one the service runs on PGlite,
 * without the other it counts requests in the database; pass them in `env`.
 */
/** Whether `/healthz` at `baseUrl` answered 200 within `timeoutMs`, asked every 200 ms while `child` runs. */
export const untilHealthy = async (child: ChildProcess, baseUrl: string, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline && child.exitCode === null) {
    const healthy = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
      async (response) => {
        await response.body?.cancel()
        return response.status === 200
      },
      () => false
    )
    if (healthy) return true
    await sleep(200)
  }
  return false
}

export const start = async (env: Record<string, string>, options: StartOptions = {}): Promise<Started> => {
  const port = await freePort()
  const { DATABASE_URL: _database, REDIS_URL: _redis, ...inherited } = process.env
  const command = startCommand()
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...command.args], {
    cwd: ROOT,
    env: { ...inherited, ...command.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  const take = (chunk: Buffer) => {
    const text = chunk.toString()
    output += text
    if (options.onLine !== undefined) for (const line of text.split("\n")) if (line !== "") options.onLine(line)
  }
  child.stdout?.on("data", take)
  child.stderr?.on("data", take)
  const baseUrl = `http://127.0.0.1:${port}`
  if (await untilHealthy(child, baseUrl, options.healthTimeoutMs ?? 60_000)) return { child, baseUrl, port, output: () => output }
  child.kill("SIGKILL")
  throw new Error(`the service did not start (exit code ${child.exitCode}):\n${output}`)
}

/** Sends `signal` and resolves with the exit code; SIGKILL if it has not exited after `graceMs`. */
export const stop = async (child: ChildProcess, signal: NodeJS.Signals = "SIGTERM", graceMs = 30_000) => {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
  const exited = once(child, "exit")
  child.kill(signal)
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
  const [code] = await exited
  clearTimeout(timer)
  return typeof code === "number" ? code : null
}

// ---------------------------------------------------------------------------------------------
// Alpaca, faked

/** The key pair a fake Alpaca accepts unless told otherwise: what sign-ups connect Alpaca with. */
export const fakeAlpacaCredentials = { api_key_id: "fake-key-id", api_secret_key: "fake-secret-key" } as const

/** Where a fake Alpaca listening at `url` takes the `trade_updates` stream. */
export const fakeStreamUrl = (fake: { readonly url: string }) => `${fake.url.replace(/^http/, "ws")}/stream`

/**
 * The variables that point a process's Alpaca at fakes: the paper environment at `paper`, the
 * live one at `live` (the same fake unless given).
 */
export const alpacaEnv = (paper: { readonly url: string }, live: { readonly url: string } = paper) => ({
  ALPACA_PAPER_API_URL: paper.url,
  ALPACA_PAPER_STREAM_URL: fakeStreamUrl(paper),
  ALPACA_LIVE_API_URL: live.url,
  ALPACA_LIVE_STREAM_URL: fakeStreamUrl(live)
})

// ---------------------------------------------------------------------------------------------
// The typed client and an operator sign-up

/** The typed client derived from the API definition. */
export type ApiClient = Effect.Effect.Success<ReturnType<typeof Client.make>>

/** Runs one typed call against a real process, over `fetch`. */
export const call = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>): Promise<A> =>
  Effect.runPromise(Effect.provide(effect, FetchHttpClient.layer))

/** The typed client of the service at `baseUrl`, authenticated with `token` (a key or the admin token). */
export const clientOf = (baseUrl: string, token: string) => call(Client.make({ baseUrl, token }))

/** A user with a test key and a mock broker connection, made through the operator API as the dashboard would. */
export const signUp = (operator: ApiClient, user: Partial<typeof CreateUserPayload.Type> = {}) =>
  Effect.gen(function*() {
    const created = yield* operator.admin.createUser({ payload: { name: "Ada", tier: "free", ...user } })
    const path = { user_id: created.id }
    const key = yield* operator.admin.createApiKey({ path, payload: { name: "test key", mode: "test" } })
    const broker = yield* operator.admin.createBroker({ path, payload: { name: "Mock", kind: "mock", mode: "test" } })
    return { userId: created.id, key: key.key, keyId: key.id, brokerId: broker.id }
  })

/**
 * `signUp` against a real process (an enterprise user allowed 100,000 requests a minute unless
 * `user` says otherwise), with the operator's typed client for further calls.
 */
export const signUpOver = async (
  baseUrl: string,
  adminToken: string,
  user: Partial<typeof CreateUserPayload.Type> = {}
) => {
  const operator = await clientOf(baseUrl, adminToken)
  const account = await Effect.runPromise(
    signUp(operator, { name: "Drill", tier: "enterprise", requests_per_minute: 100_000, ...user })
  )
  return { ...account, operator }
}

// ---------------------------------------------------------------------------------------------
// A webhook receiver

/** One POST as the receiver saw it: raw body, headers, path, and when it arrived (epoch ms). */
export interface Received {
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
  readonly at: number
}

/** What the receiver answers to the n-th request (from 1): a status, or `hang` to never answer. */
export type Responder = (request: Received, n: number) => number | "hang"

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: ReadonlyArray<Received>
  /** Changes the answer from now on. */
  readonly respond: (responder: Responder) => void
  /** Closes the port (connections are refused from now on). */
  readonly close: () => Promise<void>
  /** Listens on the same port again. */
  readonly reopen: () => Promise<void>
}

/** A real HTTP receiver on loopback (`/hooks`); `close()` it when done. */
export const listen = async (responder: Responder = () => 200): Promise<Receiver> => {
  const received: Array<Received> = []
  let respond = responder
  const server = Http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const request = { path: req.url ?? "/", headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() }
      received.push(request)
      const answer = respond(request, received.length)
      if (answer === "hang") return
      res.writeHead(answer, answer >= 300 && answer < 400 ? { location: "/redirected" } : {}).end("ok")
    })
  })
  const open = async (port: number) => {
    server.listen(port, "127.0.0.1")
    await once(server, "listening")
  }
  await open(0)
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("receiver has no port")
  const port = address.port
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    respond: (next) => {
      respond = next
    },
    close: () =>
      server.listening
        ? new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        })
        : Promise.resolve(),
    reopen: () => open(port)
  }
}

/** A received webhook event: its id, type, intent (`data.id`) and `created_at` (epoch ms). */
export interface Arrival {
  readonly id: string
  readonly type: string
  readonly intentId: string
  readonly createdAt: number
  readonly at: number
}

const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null && name in value ? Reflect.get(value, name) : undefined

/** Reads a received request as a webhook event. */
export const arrival = (request: Received): Arrival => {
  const body: unknown = JSON.parse(request.body)
  return {
    id: String(field(body, "id")),
    type: String(field(body, "type")),
    intentId: String(field(field(body, "data"), "id")),
    createdAt: Date.parse(String(field(body, "created_at"))),
    at: request.at
  }
}
