import { expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Owner } from "../../src/domain/Ids.js"
import type { OrderSpec } from "../../src/domain/Intent.js"
import { clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { BrokerGateway } from "../../src/services/brokers/BrokerGateway.js"
import { MockMarket } from "../../src/services/brokers/mock/MockMarket.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { databases } from "../support/Databases.js"
import { eventId, marketSpec, newIntent, seedUser } from "../support/Fixtures.js"
import { withSpansRecorded } from "../support/Spans.js"
import * as TestServer from "../support/TestServer.js"

const limitBuy = (limit: number): OrderSpec => ({ ...marketSpec, order_type: "limit", limit_price: limit, time_in_force: "gtc" })
const stopSell = (stop: number): OrderSpec => ({ ...marketSpec, side: "sell", order_type: "stop", stop_price: stop, time_in_force: "gtc" })
const stopLimitSell = (stop: number, limit: number): OrderSpec => ({
  ...marketSpec,
  side: "sell",
  order_type: "stop_limit",
  stop_price: stop,
  limit_price: limit,
  time_in_force: "gtc"
})

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`the mock market on ${name}`, (it) => {
    it.effect("a price move acts on every resting order it reaches in a few statements, whatever their number; each intent as a single move would leave it", () =>
      Effect.gen(function*() {
        const broker = yield* BrokerGateway
        const market = yield* MockMarket
        const intents = yield* IntentRepository
        const { testBroker, user } = yield* seedUser
        const owner: Owner = { userId: user.id, mode: "test" }
        const connection = { id: testBroker.id, kind: "mock" as const }
        const now = yield* DateTime.now
        /** An intent routed to the mock broker, its order resting in the book. */
        const resting = (spec: OrderSpec) =>
          Effect.gen(function*() {
            const input = newIntent(owner, testBroker.id, spec)
            yield* intents.create(input, { now, quota: undefined, eventId: eventId() })
            const placed = yield* broker.submit(connection, { clientOrderId: clientOrderId(input.id), spec })
            expect(placed).toMatchObject({ status: "new", fills: [] })
            return input.id
          })
        const reached = yield* Effect.forEach(Array.from({ length: 20 }, () => limitBuy(90)), resting)
        const beyond = yield* Effect.forEach([limitBuy(80), limitBuy(84.99)], resting)
        const stops = yield* Effect.forEach([stopSell(88), stopSell(86)], resting)
        const stopLimit = yield* resting(stopLimitSell(88, 86))

        const { spans } = yield* withSpansRecorded(market.setPrice(user.id, { symbol: "AAPL", price: 85 }))
        // The price, the book's open orders, the stop limit's trigger, the fills, and the fills'
        // recording (the intents locked, the orders and fills, the transitions): 7 statements,
        // where moving each order on its own took about 4 an order (91 here).
        expect(spans.filter((span) => span.name === "sql.execute").length).toBeLessThanOrEqual(8)

        const intentOf = (id: (typeof reached)[number]) => Effect.flatten(intents.findById(owner, id))
        for (const id of [...reached, ...stops]) {
          const intent = yield* intentOf(id)
          expect(intent).toMatchObject({ status: "filled", orders: [{ status: "filled" }] })
          expect(intent.orders[0]?.fills.map(({ price, quantity }) => ({ price, quantity }))).toEqual([{ price: 85, quantity: 10 }])
        }
        for (const id of [...beyond, stopLimit]) expect(yield* intentOf(id)).toMatchObject({ status: "pending", orders: [] })

        // The stop limit, triggered at 85 (at or below its stop), rests on its limit of 86: the
        // price coming back up to it fills it there; the others, filled, stay as they are.
        yield* market.setPrice(user.id, { symbol: "AAPL", price: 86 })
        const filled = yield* intentOf(stopLimit)
        expect(filled).toMatchObject({ status: "filled", orders: [{ status: "filled" }] })
        expect(filled.orders[0]?.fills.map(({ price }) => price)).toEqual([86])
        for (const id of beyond) expect(yield* intentOf(id)).toMatchObject({ status: "pending" })
        expect((yield* intentOf(reached[0]!)).orders[0]?.fills).toHaveLength(1)
      }))
  })
}
