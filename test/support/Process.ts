import { afterEach } from "@effect/vitest"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createServer } from "node:net"
import { startArgs } from "../../scripts/lib/StartCommand.js"

export const root = new URL("../..", import.meta.url).pathname

const children = new Set<ChildProcess>()

// A failed assertion must not leave a service running: every child still alive is killed.
afterEach(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
  children.clear()
})

export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

export interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  readonly baseUrl: string
}

/** `npm start` as the README runs it (the bundle the test run built first), until `/healthz` answers. */
export const start = async (env: Record<string, string>): Promise<Started> => {
  const port = await freePort()
  // The test run's own DATABASE_URL and REDIS_URL must not leak in: without one the service runs on
  // PGlite, without the other it counts requests in the database. Tests pass them in `env`.
  const { DATABASE_URL: _database, REDIS_URL: _redis, ...inherited } = process.env
  const child = spawn(process.execPath, [...startArgs()], {
    cwd: root,
    env: { ...inherited, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.add(child)
  let output = ""
  child.stdout?.on("data", (chunk) => (output += chunk))
  child.stderr?.on("data", (chunk) => (output += chunk))
  const baseUrl = `http://127.0.0.1:${port}`
  for (let i = 0; i < 120; i++) {
    const healthy = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false
    )
    if (healthy) return { child, output: () => output, baseUrl }
    if (child.exitCode !== null) break
    await new Promise((r) => setTimeout(r, 250))
  }
  child.kill("SIGKILL")
  throw new Error(`the service did not start:\n${output}`)
}

export const stop = (child: ChildProcess, signal: NodeJS.Signals = "SIGTERM") =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode)
    child.once("exit", (code) => resolve(code))
    child.kill(signal)
  })

/** One value from PostgreSQL at `url`, through psql. */
export const psql = (url: string, query: string): string =>
  execFileSync("psql", [url, "-At", "-c", query], { encoding: "utf8" }).trim()

export const json = async <A>(response: Response): Promise<A> => (await response.json()) as A

/** A user with a test key and a mock connection, made through the operator API of `baseUrl`. */
export const signUpOver = async (baseUrl: string, adminToken: string) => {
  const call = async <A>(path: string, body: unknown) => {
    const response = await fetch(`${baseUrl}/admin/v1${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    if (response.status !== 201) throw new Error(`${path}: ${response.status} ${await response.text()}`)
    return json<A>(response)
  }
  const user = await call<{ id: string }>("/users", { name: "Drill", tier: "enterprise", requests_per_minute: 100_000 })
  const key = await call<{ key: string }>(`/users/${user.id}/api-keys`, { name: "drill", mode: "test" })
  const broker = await call<{ id: string }>(`/users/${user.id}/brokers`, { name: "Mock", kind: "mock", mode: "test" })
  return { key: key.key, brokerId: broker.id, userId: user.id, call }
}

/** POST an intent; the 201's id. */
export const createIntent = async (baseUrl: string, key: string, body: Record<string, unknown>) => {
  const response = await fetch(`${baseUrl}/api/v1/intents`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  if (response.status !== 201) throw new Error(`create: ${response.status} ${await response.text()}`)
  return (await json<{ id: string }>(response)).id
}

/** Polls until `check` holds, for at most `seconds`. */
export const eventually = async (check: () => boolean, seconds: number) => {
  const deadline = Date.now() + seconds * 1000
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not reached in time")
    await new Promise((r) => setTimeout(r, 200))
  }
}
