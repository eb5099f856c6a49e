import { afterEach } from "@effect/vitest"
import type { ChildProcess } from "node:child_process"
import * as Schema from "effect/Schema"
import { execFileSync } from "node:child_process"
import * as Harness from "./Harness.js"

export { call, clientOf, freePort, ROOT as root, type Started, signUpOver, stop } from "./Harness.js"

const children = new Set<ChildProcess>()

// A failed assertion must not leave a service running: every child still alive is killed.
afterEach(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
  children.clear()
})

/** `npm start` as the README runs it (the bundle the test run built first), until `/healthz` answers. */
export const start = async (env: Record<string, string>) => {
  const started = await Harness.start(env)
  children.add(started.child)
  return started
}

/** One value from PostgreSQL at `url`, through psql. */
export const psql = (url: string, query: string): string =>
  execFileSync("psql", [url, "-At", "-c", query], { encoding: "utf8" }).trim()

/** POST an intent; the 201's id. */
export const createIntent = async (baseUrl: string, key: string, body: Record<string, unknown>) => {
  const response = await fetch(`${baseUrl}/api/v1/intents`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  if (response.status !== 201) throw new Error(`create: ${response.status} ${await response.text()}`)
  return Schema.decodeUnknownSync(Schema.Struct({ id: Schema.String }))(await response.json()).id
}

/** Polls until `check` holds, for at most `seconds`. */
export const eventually = async (check: () => boolean, seconds: number) => {
  const deadline = Date.now() + seconds * 1000
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not reached in time")
    await new Promise((r) => setTimeout(r, 200))
  }
}
