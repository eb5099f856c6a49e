import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BrokerId, Owner } from "../../src/domain/Ids.js"
import type { IntentStatus } from "../../src/domain/Intent.js"
import { clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { RoutingRepository } from "../../src/services/routing/RoutingRepository.js"
import * as CountFolding from "../../src/workers/CountFolding.js"
import { eventId, newIntent, seedUser, uuid } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"
import { databases } from "../support/Databases.js"

/** The counts kept by the triggers and the intents counted one by one, per user, mode and status. */
const bothCounts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const kept = yield* sql`
    SELECT user_id, mode, status, sum(n)::int AS n FROM intent_counts
    GROUP BY user_id, mode, status HAVING sum(n) <> 0 ORDER BY user_id, mode, status`
  const counted = yield* sql`
    SELECT user_id, mode, status, count(*)::int AS n FROM intents
    GROUP BY user_id, mode, status ORDER BY user_id, mode, status`
  return { kept, counted }
})

const created = (owner: Owner, brokerId: BrokerId, count: number) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const now = yield* DateTime.now
    return yield* Effect.forEach(
      Array.from({ length: count }, () => newIntent(owner, brokerId)),
      (input) => Effect.as(intents.create(input, { now, quota: undefined, eventId: eventId() }), input),
      { concurrency: "unbounded" }
    )
  })

const word = (intentId: string, status: "partially_filled" | "filled", quantity: number) => ({
  brokerOrderId: `broker-${intentId}`,
  clientOrderId: clientOrderId(intentId),
  status,
  fills: [{ id: `fill-${intentId}`, quantity, price: 100, filledAt: DateTime.unsafeMake("2026-11-24T15:00:00Z") }]
})

/** A server process id no connection has (above the kernel's largest). */
const ENDED = 2_000_000_000

/** Moves 2 of the user's pending test intents' count to rows as a connection that has ended would have left them. */
const leftByEndedConnection = (userId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      UPDATE intent_counts SET n = n - 2
      WHERE (user_id, mode, status, backend) = (
        SELECT user_id, mode, status, backend FROM intent_counts
        WHERE user_id = ${userId} AND mode = 'test' AND status = 'pending' LIMIT 1)`
    yield* sql`INSERT INTO intent_counts (user_id, mode, status, backend, n) VALUES (${userId}, 'test', 'pending', ${ENDED}, 2)`
  })

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`intent counts on ${name}`, (it) => {
    it.effect("a page's total_items is exact per owner and status through creations, fills and cancels", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const routing = yield* RoutingRepository
        const ada = yield* seedUser
        const bob = yield* seedUser
        const adaTest: Owner = { userId: ada.user.id, mode: "test" }
        const [f1, f2, p1, c1] = yield* created(adaTest, ada.testBroker.id, 6)
        if (f1 === undefined || f2 === undefined || p1 === undefined || c1 === undefined) return yield* Effect.dieMessage("none")
        yield* created({ userId: ada.user.id, mode: "live" }, ada.liveBroker.id, 3)
        yield* created({ userId: bob.user.id, mode: "test" }, bob.testBroker.id, 2)
        yield* routing.record(f1.id, word(f1.id, "filled", 10))
        yield* routing.record(f2.id, word(f2.id, "filled", 10))
        yield* routing.record(p1.id, word(p1.id, "partially_filled", 4))
        yield* intents.requestCancel(adaTest, c1.id, { now: yield* DateTime.now, eventId: eventId() })

        const total = (owner: Owner, filter: { readonly status?: IntentStatus; readonly symbol?: string } = {}) =>
          Effect.map(intents.listJson(owner, { page: 1, pageSize: 1, ...filter }), (page) => page.total)
        expect(yield* total(adaTest)).toBe(6)
        expect(yield* total(adaTest, { status: "filled" })).toBe(2)
        expect(yield* total(adaTest, { status: "partially_filled" })).toBe(1)
        expect(yield* total(adaTest, { status: "canceled" })).toBe(1)
        expect(yield* total(adaTest, { status: "pending" })).toBe(2)
        expect(yield* total(adaTest, { status: "rejected" })).toBe(0)
        expect(yield* total(adaTest, { symbol: "AAPL" })).toBe(6)
        expect(yield* total({ userId: ada.user.id, mode: "live" })).toBe(3)
        expect(yield* total({ userId: bob.user.id, mode: "test" })).toBe(2)
        const { counted, kept } = yield* bothCounts
        expect(kept).toEqual(counted)
      }))

    it.effect("creations and transitions running at once on many connections are all counted", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const routing = yield* RoutingRepository
        const ada = yield* seedUser
        const owner: Owner = { userId: ada.user.id, mode: "test" }
        const inputs = yield* created(owner, ada.testBroker.id, 60)
        yield* Effect.forEach(inputs.slice(0, 30), (input) => routing.record(input.id, word(input.id, "filled", 10)), {
          concurrency: "unbounded"
        })
        const page = yield* intents.listJson(owner, { page: 1, pageSize: 1, status: "filled" })
        expect(page.total).toBe(30)
        const { counted, kept } = yield* bothCounts
        expect(kept).toEqual(counted)
      }))

    it.effect("intents inserted and deleted by plain statements are counted too", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const sql = yield* SqlClient.SqlClient
        const ada = yield* seedUser
        const owner: Owner = { userId: ada.user.id, mode: "test" }
        const ids = [uuid(), uuid(), uuid()]
        for (const [n, id] of ids.entries()) {
          yield* sql`
            INSERT INTO intents (id, user_id, mode, intent_id, symbol, side, quantity, order_type, time_in_force,
              extended_hours, broker_id, status, created_at, updated_at)
            VALUES (${id}, ${ada.user.id}, 'test', ${`plain-${n}`}, 'AAPL', 'buy', 1, 'market', 'day', false,
              ${ada.testBroker.id}, 'pending', now(), now())`
        }
        expect((yield* intents.listJson(owner, { page: 1, pageSize: 1 })).total).toBe(3)
        yield* sql`DELETE FROM intents WHERE id IN ${sql.in(ids.slice(0, 2))}`
        expect((yield* intents.listJson(owner, { page: 1, pageSize: 1 })).total).toBe(1)
        const { counted, kept } = yield* bothCounts
        expect(kept).toEqual(counted)
      }))

    it.effect("folding the rows of connections that have ended keeps every total", () =>
      Effect.gen(function*() {
        const intents = yield* IntentRepository
        const sql = yield* SqlClient.SqlClient
        const ada = yield* seedUser
        const owner: Owner = { userId: ada.user.id, mode: "test" }
        yield* created(owner, ada.testBroker.id, 5)
        yield* leftByEndedConnection(ada.user.id)
        expect(yield* intents.foldCounts).toBeGreaterThanOrEqual(1)
        expect(yield* sql`SELECT 1 FROM intent_counts WHERE backend = ${ENDED}`).toEqual([])
        expect((yield* intents.listJson(owner, { page: 1, pageSize: 1 })).total).toBe(5)
        const { counted, kept } = yield* bothCounts
        expect(kept).toEqual(counted)
      }))

    it.scoped("every instance folds on its own at start", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const ada = yield* seedUser
        yield* created({ userId: ada.user.id, mode: "test" }, ada.testBroker.id, 3)
        yield* leftByEndedConnection(ada.user.id)
        yield* Layer.build(CountFolding.layer())
        const ended = sql`SELECT 1 FROM intent_counts WHERE backend = ${ENDED}`
        let left = yield* ended
        for (let i = 0; i < 100 && left.length > 0; i++) {
          yield* Effect.sleep("20 millis")
          left = yield* ended
        }
        expect(left).toEqual([])
        const { counted, kept } = yield* bothCounts
        expect(kept).toEqual(counted)
      }))
  })
}
