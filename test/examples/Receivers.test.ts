import { expect, it, layer } from "@effect/vitest"
import * as HttpApp from "@effect/platform/HttpApp"
import * as Effect from "effect/Effect"
import { readFileSync } from "node:fs"
import type { Server } from "node:http"
import { makeReceiver } from "../../examples/receiver-node.js"
import { webhookRoutes } from "../../examples/receiver-effect.js"
import { type ReceivedEvent, sign } from "../../src/Receiver.js"
import * as Database from "../../src/sql/Database.js"
import { freePort } from "../support/Harness.js"
import { until } from "../support/Receiver.js"
import { create, operator, order, signUp } from "../support/Scenario.js"
import * as TestServer from "../support/TestServer.js"

const secret = "ab".repeat(32)

layer(TestServer.layer(Database.migrated(Database.pglite(undefined))), { timeout: 60_000, excludeTestServices: true })(
  "the documented receivers",
  (it) => {
    it.scoped("the node:http receiver gets a market intent's two events from the service, each once", () =>
      Effect.gen(function*() {
        const events: Array<{ id: string; type: string; data: unknown }> = []
        const url = `http://127.0.0.1:${yield* Effect.promise(freePort)}/hooks`
        const user = yield* signUp({ requests_per_minute: 10_000 })
        const { admin } = yield* operator
        const { secret } = yield* admin.createWebhookEndpoint({ path: { user_id: user.userId }, payload: { url, mode: "test" } })
        yield* Effect.acquireRelease(
          Effect.async<Server>((resume) => {
            const server = makeReceiver(secret, (event) => events.push(event))
            server.listen(Number(new URL(url).port), "127.0.0.1", () => resume(Effect.succeed(server)))
          }),
          (server) => Effect.sync(() => server.close())
        )
        const intent = yield* create(user.testKey, order(user.mockId))
        yield* until(() => events.length >= 2)
        expect(events.map((e) => e.type).sort()).toEqual(["intent.created", "intent.filled"])
        for (const event of events) expect(event.data).toMatchObject({ id: intent.id })

        const forged = yield* Effect.promise(() =>
          fetch(url, { method: "POST", headers: { "sr-signature": "v1=00", "sr-timestamp": `${Math.floor(Date.now() / 1000)}` }, body: "{}" })
        )
        expect(forged.status).toBe(401)
        expect(yield* Effect.promise(() => forged.json())).toEqual({ reason: "signature_mismatch" })
      }))
  }
)

it.effect("the Effect receiver answers 204 to a genuine delivery with a decoded event, 401 with the reason otherwise", () =>
  Effect.gen(function*() {
    const received: Array<ReceivedEvent> = []
    const handler = HttpApp.toWebHandler(webhookRoutes(secret, (event) => Effect.sync(() => received.push(event))))
    const body = JSON.stringify({
      id: "evt_00000000000000000000000000000001",
      type: "intent.created",
      created_at: "2026-11-21T10:00:00.000Z",
      data: {
        id: "6f1c1d7e-2a53-4b2f-9a43-1c2d3e4f5a6b", intent_id: "ext-1", symbol: "AAPL", side: "buy", quantity: 5,
        order_type: "market", limit_price: null, stop_price: null, time_in_force: "day", extended_hours: false,
        status: "pending", status_reason: null, broker_id: "0b6a3c1e-6a0f-4f5e-8b1d-2c3d4e5f6a7b", orders: [],
        created_at: "2026-11-21T10:00:00.000Z", updated_at: "2026-11-21T10:00:00.000Z"
      }
    })
    const post = (timestamp: number) =>
      Effect.promise(() =>
        handler(new Request("http://receiver.test/hooks", {
          method: "POST",
          headers: { "sr-signature": sign(secret, timestamp, body), "sr-timestamp": String(timestamp), "sr-event-id": "evt_00000000000000000000000000000001" },
          body
        }))
      )
    const now = Math.floor(Date.now() / 1000)
    expect((yield* post(now)).status).toBe(204)
    expect(received).toHaveLength(1)
    const event = received[0]
    expect(event?.type === "webhook.test" ? undefined : event?.data.quantity).toBe(5)
    const stale = yield* post(now - 301)
    expect(stale.status).toBe(401)
    expect(yield* Effect.promise(() => stale.json())).toEqual({ reason: "timestamp_expired" })
    expect(received).toHaveLength(1)
  }).pipe(Effect.scoped))

it("the webhooks guide shows both receivers exactly as they are tested", () => {
  const readme = readFileSync(new URL("../../docs/webhooks.md", import.meta.url), "utf8")
  for (const file of ["receiver-node.ts", "receiver-effect.ts"]) {
    expect(readme).toContain(readFileSync(new URL(`../../examples/${file}`, import.meta.url), "utf8").trim())
  }
})
