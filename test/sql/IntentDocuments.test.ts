import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Owner } from "../../src/domain/Ids.js"
import { clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { RoutingRepository } from "../../src/services/routing/RoutingRepository.js"
import { eventId, newIntent, seedUser, uuid } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"
import { databases } from "../support/Databases.js"

/** The intents whose stored document differs from the one the database would build now. */
const staleDocuments = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ readonly id: string }>`
    SELECT id FROM intents WHERE document::text IS DISTINCT FROM intent_document(intents)::text`)

const order = (intentId: string, status: "new" | "partially_filled" | "filled", fills: ReadonlyArray<readonly [string, number]>) => ({
  brokerOrderId: `broker-${intentId}`,
  clientOrderId: clientOrderId(intentId),
  status,
  fills: fills.map(([id, quantity]) => ({ id, quantity, price: 100, filledAt: DateTime.unsafeMake("2026-11-24T15:00:00Z") }))
})

/** `count` new intents of a seeded user's live mode, created now; with the owner. */
const createLive = (count: number) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const { liveBroker, user } = yield* seedUser
    const owner: Owner = { userId: user.id, mode: "live" }
    const now = yield* DateTime.now
    const created = Array.from({ length: count }, () => newIntent(owner, liveBroker.id))
    for (const input of created) yield* intents.create(input, { now, quota: undefined, eventId: eventId() })
    return { owner, now, ids: created.map((input) => input.id) }
  })

/** A new intent of a seeded user's test mode, not written yet; with its owner and broker connection. */
const unwrittenTestIntent = Effect.map(seedUser, ({ testBroker, user }) => {
  const owner: Owner = { userId: user.id, mode: "test" }
  return { owner, user, testBroker, input: newIntent(owner, testBroker.id) }
})

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`stored intent documents on ${name}`, (it) => {
    it.effect("creation, orders, fills, transitions and cancels leave every stored document as GET would build it", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const routing = yield* RoutingRepository
        const { ids, now, owner } = yield* createLive(4)
        const [resting, partial, filled, canceled] = ids
        if (resting === undefined || partial === undefined || filled === undefined || canceled === undefined) {
          return yield* Effect.dieMessage("no intents")
        }
        expect(yield* staleDocuments).toEqual([])
        yield* routing.record(resting, order(resting, "new", []))
        yield* routing.record(partial, order(partial, "partially_filled", [["p1", 4]]))
        yield* routing.record(filled, order(filled, "partially_filled", [["f1", 4]]))
        yield* routing.record(filled, order(filled, "filled", [["f1", 4], ["f2", 6]]))
        expect(yield* intents.requestCancel(owner, canceled, { now, eventId: eventId() })).toBe("canceled")
        expect(yield* intents.requestCancel(owner, resting, { now, eventId: eventId() })).toBe("requested")
        expect(yield* staleDocuments).toEqual([])

        const shown = yield* Effect.flatten(intents.findById(owner, filled))
        expect(shown).toMatchObject({ status: "filled", orders: [{ status: "filled" }] })
        expect(shown.orders[0]?.fills.map((fill) => fill.quantity).sort((a, b) => a - b)).toEqual([4, 6])
        const resting_ = yield* Effect.flatten(intents.findById(owner, resting))
        expect(resting_.orders.map((o) => o.status)).toEqual(["new"])
      }))

    it.effect("a batch of recorded words, changing a status or not, builds every document once with its orders and fills", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const routing = yield* RoutingRepository
        const { ids, owner } = yield* createLive(6)
        const [a, b, c, d, e, f] = ids
        if (a === undefined || b === undefined || c === undefined || d === undefined || e === undefined || f === undefined) {
          return yield* Effect.dieMessage("no intents")
        }
        yield* routing.record(d, order(d, "partially_filled", [["d1", 2]]))
        // Recorded together (one batch, one transaction): a status unchanged (a resting order, a
        // second partial fill), a status changed (filled, partially filled), two words about one intent.
        yield* Effect.all([
          routing.record(a, order(a, "new", [])),
          routing.record(b, order(b, "filled", [["b1", 10]])),
          routing.record(c, order(c, "partially_filled", [["c1", 3]])),
          routing.record(d, order(d, "partially_filled", [["d1", 2], ["d2", 3]])),
          routing.record(e, order(e, "partially_filled", [["e1", 1]])),
          routing.record(e, order(e, "filled", [["e1", 1], ["e2", 9]]))
        ], { concurrency: "unbounded" })
        expect(yield* staleDocuments).toEqual([])
        const shown = (id: typeof a) => Effect.flatten(intents.findById(owner, id))
        expect(yield* shown(a)).toMatchObject({ status: "pending", orders: [{ status: "new", fills: [] }] })
        expect(yield* shown(d)).toMatchObject({ status: "partially_filled", orders: [{ status: "partially_filled" }] })
        expect((yield* shown(d)).orders[0]?.fills.map((fill) => fill.quantity).sort((x, y) => x - y)).toEqual([2, 3])
        expect((yield* shown(e)).orders[0]?.fills).toHaveLength(2)
        expect(yield* shown(f)).toMatchObject({ status: "pending", orders: [] })
      }))

    it.effect("an order written after a recording, in the same transaction, still updates its intent's document", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const routing = yield* RoutingRepository
        const sql = yield* SqlClient.SqlClient
        const { testBroker, user } = yield* seedUser
        const owner: Owner = { userId: user.id, mode: "test" }
        const [recorded, written] = [newIntent(owner, testBroker.id), newIntent(owner, testBroker.id)]
        const now = yield* DateTime.now
        for (const input of [recorded, written]) yield* intents.create(input, { now, quota: undefined, eventId: eventId() })
        const orderId = uuid()
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* routing.record(recorded.id, order(recorded.id, "new", []))
          yield* sql`
            INSERT INTO orders (id, intent_id, client_order_id, broker_order_id, status, created_at, updated_at)
            VALUES (${orderId}, ${written.id}, ${`manual-${orderId}`}, 'b-2', 'new', now(), now())`
          expect(yield* staleDocuments).toEqual([])
        }))
        expect(yield* Effect.flatten(intents.findById(owner, written.id))).toMatchObject({ orders: [{ status: "new" }] })
        expect(yield* Effect.flatten(intents.findById(owner, recorded.id))).toMatchObject({ orders: [{ status: "new" }] })
      }))

    it.effect("an order or a fill written by any statement updates its intent's document in the same transaction", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const sql = yield* SqlClient.SqlClient
        const { input } = yield* unwrittenTestIntent
        yield* intents.create(input, { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
        const orderId = uuid()
        const document = sql<{ readonly document: string }>`SELECT document::text AS document FROM intents WHERE id = ${input.id}`
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`
            INSERT INTO orders (id, intent_id, client_order_id, broker_order_id, status, created_at, updated_at)
            VALUES (${orderId}, ${input.id}, ${`manual-${orderId}`}, 'b-1', 'new', now(), now())`
          expect(JSON.parse((yield* document)[0]?.document ?? "null")).toMatchObject({ orders: [{ status: "new", fills: [] }] })
          yield* sql`
            INSERT INTO fills (id, order_id, broker_fill_id, quantity, price, filled_at)
            VALUES (${uuid()}, ${orderId}, 'fill-1', 3, 99.5, now())`
          expect(JSON.parse((yield* document)[0]?.document ?? "null")).toMatchObject({
            orders: [{ status: "new", fills: [{ quantity: 3, price: 99.5 }] }]
          })
          yield* sql`UPDATE orders SET status = 'partially_filled' WHERE id = ${orderId}`
        }))
        expect(JSON.parse((yield* document)[0]?.document ?? "null")).toMatchObject({
          status: "pending",
          orders: [{ status: "partially_filled", fills: [{ quantity: 3, price: 99.5 }] }]
        })
        expect(yield* staleDocuments).toEqual([])
      }))

    it.effect("an intent written in one statement with an order of its own still shows that order", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const sql = yield* SqlClient.SqlClient
        const { input, owner, testBroker, user } = yield* unwrittenTestIntent
        const orderId = uuid()
        // A new intent's document is built without looking for orders; the orders' statement trigger adds this one.
        yield* sql`
          WITH intent AS (
            INSERT INTO intents (id, user_id, mode, intent_id, symbol, side, quantity, order_type, time_in_force,
              extended_hours, status, broker_id, created_at, updated_at)
            VALUES (${input.id}, ${user.id}, 'test', ${input.intent_id}, 'AAPL', 'buy', 1, 'market', 'day', false,
              'pending', ${testBroker.id}, now(), now())
            RETURNING id
          )
          INSERT INTO orders (id, intent_id, client_order_id, broker_order_id, status, created_at, updated_at)
          SELECT ${orderId}, id, ${`manual-${orderId}`}, 'b-3', 'new', now(), now() FROM intent`
        expect(yield* Effect.flatten(intents.findById(owner, input.id))).toMatchObject({
          status: "pending",
          orders: [{ id: orderId, status: "new", fills: [] }]
        })
        expect(yield* staleDocuments).toEqual([])
      }))
  })
}
