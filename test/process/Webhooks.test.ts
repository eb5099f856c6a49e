import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Postgres from "../support/Postgres.js"
import { call, createIntent, eventually, psql, signUpOver, start, stop } from "../support/Process.js"
import { isGenuine, type Receiver, receiver } from "../support/Receiver.js"

/** A fresh PostgreSQL database and a local receiver that never answers, both gone afterwards. */
const withDatabaseAndReceiver = (body: (url: string, hooks: Receiver) => Promise<void>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const { url } = yield* Postgres.freshDatabaseUrl
        const hooks = yield* receiver(() => "hang")
        yield* Effect.promise(() => body(url, hooks))
      })
    )
  )

const env = (url: string) => ({
  DATABASE_URL: url,
  ADMIN_TOKEN: "adm",
  WEBHOOK_RETRY_SCHEDULE: "200ms,200ms,200ms",
  WEBHOOK_LEASE: "1s"
})

describe("webhook delivery across processes on PostgreSQL", () => {
  it("a process killed with SIGKILL mid-delivery: after a restart every event is delivered, signed", () =>
    withDatabaseAndReceiver(async (url, hooks) => {
      const first = await start(env(url))
      const { brokerId, key, operator, userId } = await signUpOver(first.baseUrl, "adm")
      const endpoint = await call(
        operator.admin.createWebhookEndpoint({ path: { user_id: userId }, payload: { url: hooks.url, mode: "test" } })
      )
      for (let i = 0; i < 5; i++) {
        await createIntent(first.baseUrl, key, { intent_id: `hook-${i}`, symbol: "AAPL", side: "buy", quantity: 1, order_type: "market", broker_id: brokerId })
      }
      // The receiver holds the first POSTs open: the process dies with deliveries in flight.
      await eventually(() => hooks.received.length >= 1, 10)
      await stop(first.child, "SIGKILL")
      expect(Number(psql(url, "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"))).toBeGreaterThan(0)

      hooks.respond(() => 200)
      const second = await start(env(url))
      await eventually(() => psql(url, "SELECT count(*) FROM intents WHERE status = 'filled'") === "5", 30)
      await eventually(() => psql(url, "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'") === "10", 30)
      expect(psql(url, "SELECT count(*) FROM webhook_deliveries")).toBe("10")
      const events = psql(url, "SELECT string_agg(id, ',' ORDER BY id) FROM events").split(",")
      expect(events).toHaveLength(10) // five intents, created and filled
      const genuine = hooks.received.filter((request) => isGenuine(request, endpoint.secret))
      expect(genuine).toHaveLength(hooks.received.length)
      expect(new Set(genuine.map((r) => r.headers["sr-event-id"]))).toEqual(new Set(events))
      expect(await stop(second.child)).toBe(0)
    }), 90_000)
})
