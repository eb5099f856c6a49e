import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as Crypto from "node:crypto"
import { promisify } from "node:util"
import { check, secretKey } from "../../src/domain/WebhookSignature.js"
import { arrival, listen } from "../support/Harness.js"
import { withDatabase } from "../support/Postgres.js"
import { eventually, root, signUpOver, start, stop } from "../support/Process.js"

const cli = (env: Record<string, string>, args: ReadonlyArray<string>) =>
  promisify(execFile)(process.execPath, ["--import", "tsx", "scripts/events.ts", ...args], {
    cwd: root,
    env: { ...process.env, ...env }
  })

describe("npm run events, against a running service on PostgreSQL", () => {
  it("listen prints each event as it commits and forwards it signed as a webhook; trigger makes the chosen event", () =>
    withDatabase(async (url) => {
      const service = await start({ DATABASE_URL: url, ADMIN_TOKEN: "adm" })
      const { brokerId, key } = await signUpOver(service.baseUrl, "adm")
      const receiver = await listen(() => 204)
      const secret = Crypto.randomBytes(32).toString("hex")
      const env = { API_KEY: key, ROUTER_URL: service.baseUrl }
      let printed = ""
      const listener: ChildProcess = spawn(
        process.execPath,
        ["--import", "tsx", "scripts/events.ts", "listen", "--forward-to", receiver.url, "--secret", secret],
        { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] }
      )
      listener.stdout?.on("data", (chunk: Buffer) => (printed += chunk.toString()))
      listener.stderr?.on("data", (chunk: Buffer) => (printed += chunk.toString()))
      try {
        await eventually(() => printed.includes("Listening for events"), 20)
        const triggered = await cli(env, ["trigger", "intent.filled", "--broker", brokerId])
        const id = /Created intent ([0-9a-f-]{36})/.exec(triggered.stdout)?.[1] ?? ""
        expect(id).not.toBe("")
        // Generous: the feed shows an event once every older transaction on the server has ended, and
        // other process tests running beside this one hold transactions open for seconds on purpose.
        await eventually(() => receiver.received.length === 2, 45)
        expect(receiver.received.map((request) => [arrival(request).type, arrival(request).intentId])).toEqual([
          ["intent.created", id],
          ["intent.filled", id]
        ])
        const key = Either.getOrThrow(secretKey(secret))
        for (const request of receiver.received) {
          const verdict = check({
            signature: String(request.headers["sr-signature"]),
            timestamp: String(request.headers["sr-timestamp"]),
            body: request.body
          }, key, Math.floor(Date.now() / 1000))
          expect(Either.isRight(verdict)).toBe(true)
          expect(request.headers["sr-event-id"]).toBe(arrival(request).id)
        }
        expect(printed).toMatch(new RegExp(`intent\\.created\\s+trigger-\\S+ \\(${id}\\) pending`))
        expect(printed).toMatch(new RegExp(`intent\\.filled\\s+trigger-\\S+ \\(${id}\\) filled`))

        const listed = await cli(env, ["list", "--intent", id])
        expect(JSON.parse(listed.stdout).items.map((event: { readonly type: string }) => event.type)).toEqual([
          "intent.created",
          "intent.filled"
        ])
        const refused = await cli(env, ["list", "--after", "nope"]).catch((error: { readonly stderr: string; readonly code: number }) => error)
        expect(refused).toMatchObject({ code: 2 })
        expect("stderr" in refused ? refused.stderr : "").toContain("400 after must be a cursor")

        // A shutdown does not wait for open event streams: they end, and the service exits 0 at once.
        const stopping = Date.now()
        expect(await stop(service.child)).toBe(0)
        expect(Date.now() - stopping).toBeLessThan(5_000)
      } finally {
        listener.kill("SIGTERM")
        await receiver.close()
        await stop(service.child)
      }
    }), 90_000)
})
