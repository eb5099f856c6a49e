import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { CreateIntentPayload, TradeIntent } from "../../src/domain/Intent.js"
import { create, order, signUp } from "../support/Scenario.js"
import { client, send } from "../support/TestServer.js"
import { waitFor } from "../support/Waiting.js"
import { servers } from "./Backends.js"

const PRICES = "/api/v1/test/prices"

const hasOrder = (intent: TradeIntent) => intent.orders.length > 0

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`mock prices on ${name}`, (it) => {
    /** A user with an intent created as `overrides` and routed to the mock broker (its order recorded). */
    const placed = (overrides: Partial<CreateIntentPayload>, user?: Effect.Effect.Success<ReturnType<typeof signUp>>) =>
      Effect.gen(function*() {
        const owner = user ?? (yield* signUp({ requests_per_minute: 10_000 }))
        const { id } = yield* create(owner.testKey, order(owner.mockId, { time_in_force: "gtc", ...overrides }))
        return { ...owner, id, intent: yield* waitFor(owner.testKey, id, hasOrder) }
      })

    const setPrice = (key: string, symbol: string, price: unknown) => send("POST", PRICES, { key, json: { symbol, price } })
    const intentOf = (key: string, id: string) => send("GET", `/api/v1/intents/${id}`, { key })

    describe("POST /api/v1/test/prices", () => {
      it.effect("a resting limit buy fills whole at the new price once the price reaches its limit, before the answer", () =>
        Effect.gen(function*() {
          const { id, intent, testKey } = yield* placed({ symbol: "AAPL", quantity: 3, order_type: "limit", limit_price: 90 })
          expect(intent).toMatchObject({ status: "pending", orders: [{ status: "new", fills: [] }] })

          const above = yield* setPrice(testKey, "aapl", 90.5)
          expect(above.status).toBe(200)
          expect(above.body).toMatchObject({ symbol: "AAPL", price: 90.5 })
          expect((yield* intentOf(testKey, id)).body).toMatchObject({ status: "pending", orders: [{ status: "new", fills: [] }] })

          expect((yield* setPrice(testKey, "AAPL", 89.25)).status).toBe(200)
          const filled = yield* intentOf(testKey, id)
          expect(filled.body).toMatchObject({
            status: "filled",
            orders: [{ status: "filled", fills: [{ quantity: 3, price: 89.25 }] }]
          })
          // The feed shows an event once every transaction older than it has ended, on the whole
          // server: other test files' transactions may hold it back a moment.
          const filledEvent = send("GET", `/api/v1/events?intent_id=${id}`, { key: testKey }).pipe(
            Effect.repeat(Schedule.spaced("50 millis").pipe(
              Schedule.upTo("10 seconds"),
              Schedule.whileInput((events: { readonly body: unknown }) => !JSON.stringify(events.body).includes(`"intent.filled"`)),
              Schedule.passthrough
            ))
          )
          expect((yield* filledEvent).body).toMatchObject({
            items: expect.arrayContaining([expect.objectContaining({ type: "intent.filled" })])
          })

          // Moving the price again changes nothing for a filled intent.
          expect((yield* setPrice(testKey, "AAPL", 80)).status).toBe(200)
          expect((yield* intentOf(testKey, id)).body).toEqual(filled.body)
        }))

      it.effect("a resting limit sell fills when the price rises to it; the other symbols' orders stay", () =>
        Effect.gen(function*() {
          const sell = yield* placed({ symbol: "MSFT", side: "sell", order_type: "limit", limit_price: 110 })
          const other = yield* placed({ symbol: "IBM", side: "sell", order_type: "limit", limit_price: 110 }, sell)
          yield* setPrice(sell.testKey, "MSFT", 120)
          expect((yield* intentOf(sell.testKey, sell.id)).body).toMatchObject({
            status: "filled",
            orders: [{ fills: [{ price: 120 }] }]
          })
          expect((yield* intentOf(sell.testKey, other.id)).body).toMatchObject({ status: "pending" })
        }))

      it.effect("a stop buy triggers when the price reaches its stop and fills as a market order", () =>
        Effect.gen(function*() {
          const { id, testKey } = yield* placed({ symbol: "TSLA", order_type: "stop", stop_price: 105 })
          yield* setPrice(testKey, "TSLA", 104.99)
          expect((yield* intentOf(testKey, id)).body).toMatchObject({ status: "pending" })
          yield* setPrice(testKey, "TSLA", 105)
          expect((yield* intentOf(testKey, id)).body).toMatchObject({
            status: "filled",
            orders: [{ fills: [{ price: 105 }] }]
          })
        }))

      it.effect("a triggered stop limit rests on its limit, and fills once the price comes back to it", () =>
        Effect.gen(function*() {
          const { id, testKey } = yield* placed({ symbol: "NVDA", order_type: "stop_limit", stop_price: 105, limit_price: 103 })
          yield* setPrice(testKey, "NVDA", 106) // stop reached, limit not: triggered, resting
          expect((yield* intentOf(testKey, id)).body).toMatchObject({ status: "pending" })
          yield* setPrice(testKey, "NVDA", 102.5) // below the stop now, but triggered before: the limit fills
          expect((yield* intentOf(testKey, id)).body).toMatchObject({
            status: "filled",
            orders: [{ fills: [{ price: 102.5 }] }]
          })
        }))

      it.effect("later orders are decided at the price set: a market order fills at it, a limit through it fills at once", () =>
        Effect.gen(function*() {
          const user = yield* signUp({ requests_per_minute: 10_000 })
          yield* setPrice(user.testKey, "AMD", 50)
          const market = yield* placed({ symbol: "AMD", order_type: "market", time_in_force: "day" }, user)
          const done = yield* waitFor(user.testKey, market.id, (intent) => intent.status === "filled")
          expect(done.orders[0]?.fills[0]?.price).toBe(50)
          const limit = yield* placed({ symbol: "AMD", order_type: "limit", limit_price: 60 }, user)
          expect(limit.intent).toMatchObject({ status: "filled", orders: [{ fills: [{ price: 50 }] }] })
          const resting = yield* placed({ symbol: "AMD", order_type: "limit", limit_price: 40 }, user)
          expect(resting.intent).toMatchObject({ status: "pending" })
        }))

      it.effect("prices are each user's own: another user's price moves none of my orders", () =>
        Effect.gen(function*() {
          const mine = yield* placed({ symbol: "ORCL", order_type: "limit", limit_price: 90 })
          const other = yield* signUp()
          expect((yield* setPrice(other.testKey, "ORCL", 10)).status).toBe(200)
          expect((yield* intentOf(mine.testKey, mine.id)).body).toMatchObject({ status: "pending" })
          const listed = yield* send("GET", PRICES, { key: mine.testKey })
          expect(listed).toMatchObject({ status: 200, body: { items: [] } })
          const theirs = yield* send("GET", PRICES, { key: other.testKey })
          expect(theirs.body).toMatchObject({ items: [{ symbol: "ORCL", price: 10 }] })
        }))

      it.effect("a canceled intent's order and HOLD never fill", () =>
        Effect.gen(function*() {
          const canceled = yield* placed({ symbol: "SAP", order_type: "limit", limit_price: 90 })
          expect((yield* send("POST", `/api/v1/intents/${canceled.id}/cancel`, { key: canceled.testKey })).body)
            .toMatchObject({ status: "canceled" })
          const hold = yield* placed({ symbol: "HOLD", order_type: "limit", limit_price: 90 }, canceled)
          yield* setPrice(canceled.testKey, "SAP", 1)
          yield* setPrice(canceled.testKey, "HOLD", 1)
          expect((yield* intentOf(canceled.testKey, canceled.id)).body).toMatchObject({ status: "canceled" })
          expect((yield* intentOf(canceled.testKey, hold.id)).body).toMatchObject({ status: "pending" })
        }))

      it.effect("through the typed client", () =>
        Effect.gen(function*() {
          const { id, testKey } = yield* placed({ symbol: "QQQ", order_type: "limit", limit_price: 90 })
          const { testHelpers } = yield* client(testKey)
          const price = yield* testHelpers.setMockPrice({ payload: { symbol: "QQQ", price: 88 } })
          expect(price).toMatchObject({ symbol: "QQQ", price: 88 })
          const listed = yield* testHelpers.listMockPrices()
          expect(listed.items.map((item) => item.symbol)).toEqual(["QQQ"])
          expect((yield* intentOf(testKey, id)).body).toMatchObject({ status: "filled" })
        }))

      it.effect("bad input gets a clear error and changes nothing; a live key gets 403", () =>
        Effect.gen(function*() {
          const { id, liveKey, testKey } = yield* placed({ symbol: "SPY", order_type: "limit", limit_price: 90 })
          const cases: ReadonlyArray<readonly [unknown, number, string, string]> = [
            [{ symbol: "SPY", price: 0 }, 422, "unprocessable_entity", "price must be greater than 0"],
            [{ symbol: "SPY", price: -5 }, 422, "unprocessable_entity", "price must be greater than 0"],
            [{ symbol: "SPY", price: 1.0000000001 }, 422, "unprocessable_entity", "price must have at most 9 decimal places"],
            [{ symbol: "SPY", price: "80" }, 400, "validation_error", "price must be a number"],
            [{ symbol: "SPY" }, 400, "validation_error", "price is required"],
            [{ symbol: "S P Y", price: 80 }, 400, "validation_error", "symbol must be 1 to 32 characters of A-Z a-z 0-9 . - /"],
            [{ symbol: "SPY", price: 80, broker_id: "x" }, 400, "validation_error", "broker_id is not a known field"]
          ]
          for (const [json, status, error_code, detail] of cases) {
            const reply = yield* send("POST", PRICES, { key: testKey, json })
            expect({ json, status: reply.status, body: reply.body }).toMatchObject({ status, body: { error_code, detail } })
          }
          const live = yield* setPrice(liveKey, "SPY", 80)
          expect(live).toMatchObject({ status: 403, body: { error_code: "forbidden" } })
          expect((yield* send("GET", PRICES, { key: liveKey })).status).toBe(403)
          expect((yield* send("POST", PRICES, { json: { symbol: "SPY", price: 80 } })).status).toBe(401)
          expect((yield* intentOf(testKey, id)).body).toMatchObject({ status: "pending" })
          expect((yield* send("GET", PRICES, { key: testKey })).body).toEqual({ items: [] })
        }))
    })
  })
}
