import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { type CreateIntentPayload, TradeIntent } from "../../src/domain/Intent.js"
import { create, order, signUp } from "../support/Scenario.js"
import { FakeAlpacas, send } from "../support/TestServer.js"
import { waitFor } from "../support/Waiting.js"
import { servers } from "./Backends.js"

const final = (intent: TradeIntent) => ["filled", "canceled", "rejected", "failed"].includes(intent.status)

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`routing to the mock broker on ${name}`, (it) => {
    /** Creates an intent and returns it once `done` holds. */
    const route = (overrides: Partial<CreateIntentPayload>, done: (intent: TradeIntent) => boolean = final) =>
      Effect.gen(function*() {
        const user = yield* signUp({ requests_per_minute: 10_000 })
        const { id } = yield* create(user.testKey, order(user.mockId, overrides))
        return { ...user, id, intent: yield* waitFor(user.testKey, id, done) }
      })

    const fillsOf = (intent: {
      readonly orders: ReadonlyArray<{ readonly fills: ReadonlyArray<{ readonly quantity: number; readonly price: number }> }>
    }) => intent.orders.flatMap((o) => o.fills.map((f) => [f.quantity, f.price]))

    describe("the mock broker's cases, one by one", () => {
      it.effect("market: one fill of the whole quantity at 100, filled", () =>
        Effect.gen(function*() {
          const { intent } = yield* route({ quantity: 7 })
          expect(intent.status).toBe("filled")
          expect(intent.status_reason).toBeNull()
          expect(intent.orders).toHaveLength(1)
          expect(intent.orders[0]).toMatchObject({ status: "filled", broker_order_id: expect.stringMatching(/^mock-tir-/) })
          expect(fillsOf(intent)).toEqual([[7, 100]])
        }))

      it.effect("marketable limits fill at 100: buy at or above, sell at or below", () =>
        Effect.gen(function*() {
          for (const [side, limit] of [["buy", 100], ["buy", 120.5], ["sell", 100], ["sell", 80]] as const) {
            const { intent } = yield* route({ side, order_type: "limit", limit_price: limit })
            expect(intent.status).toBe("filled")
            expect(fillsOf(intent)).toEqual([[10, 100]])
          }
        }))

      it.effect("other limits rest as new orders; ioc and fok are canceled", () =>
        Effect.gen(function*() {
          for (const time_in_force of ["day", "gtc"] as const) {
            const { intent } = yield* route(
              { side: "buy", order_type: "limit", limit_price: 99, time_in_force },
              (i) => i.orders.length > 0
            )
            expect(intent.status).toBe("pending")
            expect(intent.orders[0]?.status).toBe("new")
          }
          for (const time_in_force of ["ioc", "fok"] as const) {
            const { intent } = yield* route({ side: "sell", order_type: "limit", limit_price: 101, time_in_force })
            expect(intent.status).toBe("canceled")
            expect(intent.orders[0]?.status).toBe("canceled")
            expect(fillsOf(intent)).toEqual([])
          }
        }))

      it.effect("stops trigger when 100 is at or through the stop, then trade as market or limit", () =>
        Effect.gen(function*() {
          const filled: ReadonlyArray<Partial<CreateIntentPayload>> = [
            { side: "buy", order_type: "stop", stop_price: 95 },
            { side: "buy", order_type: "stop", stop_price: 100 },
            { side: "sell", order_type: "stop", stop_price: 105 },
            { side: "buy", order_type: "stop_limit", stop_price: 95, limit_price: 101 }
          ]
          for (const stop of filled) expect((yield* route(stop)).intent.status).toBe("filled")
          const resting: ReadonlyArray<Partial<CreateIntentPayload>> = [
            { side: "buy", order_type: "stop", stop_price: 105 },
            { side: "sell", order_type: "stop", stop_price: 95 },
            { side: "buy", order_type: "stop_limit", stop_price: 95, limit_price: 99 }
          ]
          for (const stop of resting) {
            const { intent } = yield* route(stop, (i) => i.orders.length > 0)
            expect(intent.status).toBe("pending")
            expect(intent.orders[0]?.status).toBe("new")
          }
        }))

      it.effect("REJECT: rejected, with the broker's reason", () =>
        Effect.gen(function*() {
          const { intent } = yield* route({ symbol: "REJECT" })
          expect(intent.status).toBe("rejected")
          expect(intent.status_reason).toBe("Rejected by the mock broker: symbol REJECT is not tradable")
          expect(intent.orders[0]?.status).toBe("rejected")
        }))

      it.effect("PARTIAL: half filled and the rest resting; ioc cancels the rest; fok fills nothing", () =>
        Effect.gen(function*() {
          const partial = yield* route({ symbol: "PARTIAL", quantity: 9 }, (i) => i.status === "partially_filled")
          expect(partial.intent.orders[0]?.status).toBe("partially_filled")
          expect(fillsOf(partial.intent)).toEqual([[4.5, 100]])

          const ioc = yield* route({ symbol: "PARTIAL", quantity: 9, time_in_force: "ioc" })
          expect(ioc.intent.status).toBe("canceled")
          expect(fillsOf(ioc.intent)).toEqual([[4.5, 100]])

          const fok = yield* route({ symbol: "PARTIAL", time_in_force: "fok" })
          expect(fok.intent.status).toBe("canceled")
          expect(fillsOf(fok.intent)).toEqual([])
        }))

      it.effect("FAIL: the broker is unreachable, so failed after the retry schedule, with no order", () =>
        Effect.gen(function*() {
          const { intent } = yield* route({ symbol: "FAIL" })
          expect(intent.status).toBe("failed")
          expect(intent.status_reason).toBe("Broker unreachable after 4 attempts: Mock broker unreachable (symbol FAIL)")
          expect(intent.orders).toEqual([])
        }))

    })

    describe("cancel", () => {
      it.effect("HOLD: accepted and never filled; a cancel reaches the broker and the intent is canceled", () =>
        Effect.gen(function*() {
          const { id, intent, testKey } = yield* route({ symbol: "HOLD" }, (i) => i.orders.length > 0)
          expect(intent.status).toBe("pending")
          const canceled = yield* send("POST", `/api/v1/intents/${id}/cancel`, { key: testKey })
          expect(canceled.status).toBe(200)
          expect(canceled.body).toMatchObject({ id, status: "canceled", status_reason: "Canceled by the client" })
          expect(canceled.body).toHaveProperty(["orders", 0, "status"], "canceled")

          const again = yield* send("POST", `/api/v1/intents/${id}/cancel`, { key: testKey })
          expect(again.status).toBe(409)
          expect(again.body).toMatchObject({
            error_code: "intent_not_cancelable",
            detail: "Trade Intent cannot be canceled in status canceled"
          })
        }))

      it.effect("a partially filled intent cancels the rest and keeps its fills", () =>
        Effect.gen(function*() {
          const { id, testKey } = yield* route({ symbol: "PARTIAL" }, (i) => i.status === "partially_filled")
          const canceled = yield* send("POST", `/api/v1/intents/${id}/cancel`, { key: testKey })
          expect(canceled.body).toMatchObject({ status: "canceled" })
          expect(fillsOf(Schema.decodeUnknownSync(Schema.encodedSchema(TradeIntent))(canceled.body))).toEqual([[5, 100]])
        }))

      it.effect("final intents, unknown ids and other users' intents cannot be canceled", () =>
        Effect.gen(function*() {
          const { id, testKey } = yield* route({})
          const filled = yield* send("POST", `/api/v1/intents/${id}/cancel`, { key: testKey })
          expect(filled.status).toBe(409)
          expect(filled.body).toMatchObject({ detail: "Trade Intent cannot be canceled in status filled" })
          const other = yield* signUp()
          for (const [key, target] of [[other.testKey, id], [testKey, "nope"], [testKey, crypto.randomUUID()]]) {
            const reply = yield* send("POST", `/api/v1/intents/${target}/cancel`, { key })
            expect(reply.status).toBe(404)
            expect(reply.body).toMatchObject({ error_code: "not_found", detail: "Trade Intent not found" })
          }
          const readOnly = yield* (yield* signUp()).key("test", { scopes: ["intents:read"] })
          expect((yield* send("POST", `/api/v1/intents/${id}/cancel`, { key: readOnly.key })).status).toBe(403)
        }))
    })

    describe("what routing leaves behind", () => {
      it.effect("one event per transition, in the same transaction, carrying the intent as GET shows it", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const { id, intent } = yield* route({})
          const events = yield* sql<{ id: string; type: string; data: typeof TradeIntent.Encoded }>`
            SELECT id, type, data FROM events WHERE intent_id = ${id} ORDER BY created_at, type`
          expect(events.map((e) => e.type)).toEqual(["intent.created", "intent.filled"])
          expect(events.every((e) => /^evt_[0-9a-f]{32}$/.test(e.id))).toBe(true)
          expect(events[0]?.data).toMatchObject({ id, status: "pending", orders: [] })
          expect(events[1]?.data).toEqual(Schema.encodeSync(TradeIntent)(intent))

          const rejected = yield* route({ symbol: "REJECT" })
          const types = yield* sql<{ type: string }>`SELECT type FROM events WHERE intent_id = ${rejected.id} ORDER BY created_at`
          expect(types.map((t) => t.type)).toEqual(["intent.created", "intent.rejected"])
        }))

      it.effect("every intent is submitted to the broker exactly once and holds exactly one order", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const user = yield* signUp({ requests_per_minute: 10_000 })
          const created = yield* Effect.all(
            Array.from({ length: 40 }, (_, i) =>
              create(user.testKey, order(user.mockId, { symbol: i % 4 === 0 ? "PARTIAL" : "AAPL" }))),
            { concurrency: 10 }
          )
          const ids = created.map((intent) => intent.id)
          for (const id of ids) yield* waitFor(user.testKey, id, (i) => i.status !== "pending")
          const rows = yield* sql<{ submissions: number; orders: string }>`
            SELECT m.submissions, (SELECT count(*) FROM orders o WHERE o.client_order_id = m.client_order_id)::text AS orders
            FROM mock_broker_orders m WHERE m.client_order_id IN ${sql.in(ids.map((id) => `tir-${id}`))}`
          expect(rows).toHaveLength(40)
          expect(rows.every((r) => r.submissions === 1 && r.orders === "1")).toBe(true)
          const jobs = yield* sql`SELECT 1 FROM routing_jobs WHERE intent_id IN ${sql.in(ids)} AND kind = 'submit'`
          expect(jobs).toHaveLength(0)
        }))
    })
  })
}

// A server of its own: its fake Alpaca stops answering for good.
for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`routing to an Alpaca gone away on ${name}`, (it) => {
    it.effect("live keys route to their Alpaca connection: Alpaca unreachable fails the intent after the retries", () =>
      Effect.gen(function*() {
        const { alpacaId, liveKey } = yield* signUp()
        const { paper } = yield* FakeAlpacas
        yield* Effect.promise(() => paper.stop())
        const created = yield* create(liveKey, order(alpacaId))
        const intent = yield* waitFor(liveKey, created.id, final)
        expect(intent.status).toBe("failed")
        expect(intent.status_reason).toMatch(/^Broker unreachable after 4 attempts: POST \/v2\/orders: Alpaca unreachable/)
        expect(intent.orders).toEqual([])
      }))
  })
}
