import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { randomUUID } from "node:crypto"
import { BrokerId, IntentId, type Owner } from "../../src/domain/Ids.js"
import { CANCELED_BY_CLIENT, clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { RoutingRepository } from "../../src/services/routing/RoutingRepository.js"
import { eventId, newIntent, seedUser } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"
import { databases } from "../support/Databases.js"

const at = DateTime.unsafeMake("2026-11-24T15:00:00Z")

/** A live intent on the seeded Alpaca connection, created with its submit job. */
const liveIntent = (quantity = 10) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const { liveBroker, user } = yield* seedUser
    const owner: Owner = { userId: user.id, mode: "live" }
    const input = newIntent(owner, liveBroker.id, { quantity })
    yield* intents.create(input, { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
    return { owner, input, connectionId: liveBroker.id }
  })

const order = (id: string, status: "new" | "partially_filled" | "filled", fills: ReadonlyArray<[string, number]>) => ({
  brokerOrderId: `alpaca-${id}`,
  clientOrderId: clientOrderId(id),
  status,
  fills: fills.map(([fillId, quantity]) => ({ id: fillId, quantity, price: 100, filledAt: at }))
})

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`broker streams' records on ${name}`, (it) => {
    describe("the lease on a connection's stream", () => {
      it.effect("one holder at a time; another takes over only once the lease runs out unrenewed", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { connectionId } = yield* liveIntent()
          const lease = Duration.millis(300)
          expect(yield* routing.holdStream(connectionId, "a", lease)).toBe(true)
          expect(yield* routing.holdStream(connectionId, "b", lease)).toBe(false)
          expect(yield* routing.holdStream(connectionId, "a", lease)).toBe(true)
          yield* Effect.sleep("400 millis")
          expect(yield* routing.holdStream(connectionId, "b", lease)).toBe(true)
          expect(yield* routing.holdStream(connectionId, "a", lease)).toBe(false)
        }))

      it.effect("a release lets another take it at once; a release by a non-holder changes nothing", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { connectionId } = yield* liveIntent()
          const lease = Duration.seconds(30)
          expect(yield* routing.holdStream(connectionId, "a", lease)).toBe(true)
          yield* routing.releaseStream(connectionId, "b")
          expect(yield* routing.holdStream(connectionId, "b", lease)).toBe(false)
          yield* routing.releaseStream(connectionId, "a")
          expect(yield* routing.holdStream(connectionId, "b", lease)).toBe(true)
        }))
    })

    describe("words heard on a connection's update stream", () => {
      it.effect("are recorded only while the intent is open and routed through that connection", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const { connectionId, input, owner } = yield* liveIntent()
          const elsewhere = BrokerId.make(randomUUID())
          const filled = order(input.id, "filled", [["h-1", 10]])
          expect(yield* routing.recordHeard(elsewhere, input.id, filled)).toEqual(Option.none())
          const untouched = yield* Effect.flatten(intents.findById(owner, input.id))
          expect(untouched).toMatchObject({ status: "pending", orders: [] })

          const heard = yield* routing.recordHeard(connectionId, input.id, filled)
          expect(heard).toEqual(Option.some(expect.objectContaining({ status: "filled", filled: 10 })))
          // Final: a later word changes nothing, not even the order.
          expect(yield* routing.recordHeard(connectionId, input.id, order(input.id, "new", []))).toEqual(Option.none())
          expect(yield* routing.recordHeard(connectionId, IntentId.make(randomUUID()), filled)).toEqual(Option.none())
          const intent = yield* Effect.flatten(intents.findById(owner, input.id))
          expect(intent.orders.map((o) => [o.status, o.fills.length])).toEqual([["filled", 1]])
        }))

      it.effect("a cancel heard after the client asked for one is the client's", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const { connectionId, input, owner } = yield* liveIntent()
          yield* routing.record(input.id, order(input.id, "new", []))
          const options = { now: yield* DateTime.now, eventId: eventId() }
          expect(yield* intents.requestCancel(owner, input.id, options)).toBe("requested")
          const canceled = { ...order(input.id, "new", [["c-1", 4]]), status: "canceled" as const }
          const heard = yield* routing.recordHeard(connectionId, input.id, canceled)
          expect(heard).toEqual(Option.some(expect.objectContaining({ status: "canceled", reason: CANCELED_BY_CLIENT })))
          const intent = yield* Effect.flatten(intents.findById(owner, input.id))
          expect(intent).toMatchObject({ status: "canceled", status_reason: CANCELED_BY_CLIENT })
        }))
    })

    describe("a submission's order left open", () => {
      it.effect("ends the submission in its recording's transaction and queues what follows: a cancel asked for, else a check", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const sql = yield* SqlClient.SqlClient
          const jobsOf = (id: string) =>
            sql<{ kind: string; run_at: Date }>`SELECT kind, run_at FROM routing_jobs WHERE intent_id = ${id} ORDER BY kind`
          const checked = yield* liveIntent()
          const asked = yield* liveIntent()
          const filled = yield* liveIntent()
          const claimed = yield* routing.claim(100, Duration.seconds(30))
          const submission = (id: string) => claimed.find((job) => job.intentId === id)
          const now = yield* DateTime.now
          const syncAt = DateTime.add(now, { hours: 8 })
          // The client asks to cancel before the submission's answer is recorded.
          expect(yield* intents.requestCancel(asked.owner, asked.input.id, { now, eventId: eventId() })).toBe("requested")

          const answered = (id: IntentId, status: "new" | "partially_filled" | "filled", fills: ReadonlyArray<[string, number]>) =>
            ({ intentId: id, order: order(id, status, fills), done: submission(id), followUp: { syncAt } })
          const recorded = yield* routing.recordMany([
            answered(checked.input.id, "new", []),
            answered(asked.input.id, "partially_filled", [["a-1", 4]]),
            answered(filled.input.id, "filled", [["f-1", 10]])
          ])
          expect(recorded.map((exit) => exit._tag)).toEqual(["Success", "Success", "Success"])
          expect((yield* jobsOf(checked.input.id)).map((job) => [job.kind, job.run_at.toISOString()])).toEqual([
            ["sync", DateTime.formatIso(syncAt)]
          ])
          expect((yield* jobsOf(asked.input.id)).map((job) => job.kind)).toEqual(["cancel"])
          // Nothing follows a final intent.
          expect(yield* jobsOf(filled.input.id)).toEqual([])
          // Without a follow-up, the job ends and nothing is queued.
          const plain = yield* liveIntent()
          const [job] = (yield* routing.claim(100, Duration.seconds(30))).filter((j) => j.intentId === plain.input.id)
          yield* routing.record(plain.input.id, order(plain.input.id, "new", []), job)
          expect(yield* jobsOf(plain.input.id)).toEqual([])
        }))
    })

    describe("words about an order, in any order", () => {
      it.effect("a stale `new` after a fill changes neither the order nor the intent; a fill seen twice counts once", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const { input, owner } = yield* liveIntent()
          yield* routing.record(input.id, order(input.id, "partially_filled", [["exec-1", 4]]))
          yield* routing.record(input.id, order(input.id, "new", [["exec-1", 4]]))
          const afterStale = yield* Effect.flatten(intents.findById(owner, input.id))
          expect(afterStale.status).toBe("partially_filled")
          expect(afterStale.orders.map((o) => [o.status, o.fills.length])).toEqual([["partially_filled", 1]])

          const done = yield* routing.record(input.id, order(input.id, "filled", [["exec-2", 6]]))
          expect(done).toMatchObject({ status: "filled", filled: 10, changed: true })
          yield* routing.record(input.id, order(input.id, "new", []))
          const filled = yield* Effect.flatten(intents.findById(owner, input.id))
          expect(filled.status).toBe("filled")
          expect(filled.orders.map((o) => o.status)).toEqual(["filled"])
          // Both executions share one instant here, and fills at one instant have no defined order.
          expect(filled.orders[0]?.fills.map((f) => f.quantity).sort((a, b) => a - b)).toEqual([4, 6])
        }))

      it.effect("a final word ends the intent's waiting jobs; a job a worker holds is left to that worker", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const sql = yield* SqlClient.SqlClient
          const jobsOf = (id: string) =>
            Effect.map(sql<{ kind: string }>`SELECT kind FROM routing_jobs WHERE intent_id = ${id} ORDER BY kind`, (rows) =>
              rows.map((row) => row.kind))
          const { input } = yield* liveIntent()
          // The submission's job is held; a check at the end of the day waits.
          const [held] = (yield* routing.claim(100, Duration.seconds(30))).filter((job) => job.intentId === input.id)
          expect(held?.kind).toBe("submit")
          yield* routing.enqueue(input.id, "sync", DateTime.add(yield* DateTime.now, { hours: 8 }))
          yield* routing.record(input.id, order(input.id, "partially_filled", [["w-1", 4]]))
          expect(yield* jobsOf(input.id)).toEqual(["submit", "sync"])
          yield* routing.record(input.id, order(input.id, "filled", [["w-1", 4], ["w-2", 6]]))
          expect(yield* jobsOf(input.id)).toEqual(["submit"])
          if (held !== undefined) yield* routing.finish(held)
          expect(yield* jobsOf(input.id)).toEqual([])
          // Nothing is queued for a final intent.
          yield* routing.enqueue(input.id, "sync", yield* DateTime.now)
          expect(yield* jobsOf(input.id)).toEqual([])
        }))

      it.effect("a broker's refusal rejects the intent with the broker's reason and no order", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const { input, owner } = yield* liveIntent()
          expect(yield* routing.reject(input.id, "insufficient buying power")).toMatchObject({ status: "rejected" })
          const intent = yield* Effect.flatten(intents.findById(owner, input.id))
          expect(intent).toMatchObject({ status: "rejected", status_reason: "insufficient buying power", orders: [] })
        }))

      it.effect("the open orders of a connection, with what each has filled so far", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const partial = yield* liveIntent()
          const done = yield* liveIntent()
          const unsent = yield* liveIntent()
          yield* routing.record(partial.input.id, order(partial.input.id, "partially_filled", [["p-1", 2.5]]))
          yield* routing.record(done.input.id, order(done.input.id, "filled", [["d-1", 10]]))
          const open = yield* routing.openOrders(partial.connectionId)
          expect(open).toEqual([{
            intentId: partial.input.id,
            clientOrderId: clientOrderId(partial.input.id),
            brokerOrderId: `alpaca-${partial.input.id}`,
            filled: 2.5
          }])
          expect(yield* routing.openOrders(done.connectionId)).toEqual([])
          expect(yield* routing.openOrders(unsent.connectionId)).toEqual([])
        }))
    })
  })
}
