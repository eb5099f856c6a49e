import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import { BrokerId, IntentId, type Owner } from "../../src/domain/Ids.js"
import { clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { BrokerGateway, type BrokerOrder } from "../../src/services/brokers/BrokerGateway.js"
import { MockMarket } from "../../src/services/brokers/mock/MockMarket.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { type Job, RoutingRepository } from "../../src/services/routing/RoutingRepository.js"
import * as SqlRoutingRepository from "../../src/services/routing/SqlRoutingRepository.js"
import * as JobEnds from "../../src/services/routing/SqlJobEnds.js"
import * as Recording from "../../src/services/routing/SqlRecording.js"
import { IdGenerator } from "../../src/services/IdGenerator.js"
import * as Outbox from "../../src/sql/Outbox.js"
import { batchesOf } from "../support/Batches.js"
import { eventId, marketSpec, newIntent, seedUser, uuid } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"
import { besideOthers, heldOpen } from "../support/Transactions.js"
import { databases } from "../support/Databases.js"

/** Intents of one user on its live connection, each created with its submit job. */
const liveIntents = (count: number) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const { liveBroker, user } = yield* seedUser
    const owner: Owner = { userId: user.id, mode: "live" }
    const inputs = Array.from({ length: count }, () => newIntent(owner, liveBroker.id))
    const now = yield* DateTime.now
    yield* Effect.forEach(inputs, (input) => intents.create(input, { now, quota: undefined, eventId: eventId() }))
    return { owner, inputs, liveBroker }
  })

/** Claims the submission jobs of `inputs` (and perhaps other tests' jobs, left out). */
const claimed = (inputs: ReadonlyArray<{ readonly id: IntentId }>) =>
  Effect.gen(function*() {
    const routing = yield* RoutingRepository
    const ids = new Set<string>(inputs.map(({ id }) => id))
    const jobs = (yield* routing.claim(1000, Duration.seconds(30))).filter((job) => ids.has(job.intentId))
    expect(jobs).toHaveLength(inputs.length)
    return jobs
  })

/** One live intent, created with its submit job. */
const oneIntent = Effect.gen(function*() {
  const { inputs: [input], liveBroker, owner } = yield* liveIntents(1)
  if (input === undefined) return yield* Effect.dieMessage("no intent")
  return { input, liveBroker, owner }
})

/** One live intent with its submission job claimed. */
const oneClaimed = Effect.gen(function*() {
  const { input, liveBroker, owner } = yield* oneIntent
  const [job] = yield* claimed([input])
  if (job === undefined) return yield* Effect.dieMessage("no job")
  return { input, job, liveBroker, owner }
})

/** The intent, checked to have ended filled with one order, filled by two fills of 4 and 6. */
const filledBy4And6 = (owner: Owner, id: IntentId) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const intent = yield* Effect.flatten(intents.findById(owner, id))
    expect(intent).toMatchObject({ status: "filled", orders: [{ status: "filled" }] })
    expect(intent.orders[0]?.fills.map((f) => f.quantity).sort((a, b) => a - b)).toEqual([4, 6])
    return intent
  })

/** The order the broker holds for an intent, still open. */
const restingOrder = (id: string) => ({ brokerOrderId: `alpaca-${id}`, clientOrderId: clientOrderId(id), status: "new" as const, fills: [] })

const filledOrder = (id: string, fills: ReadonlyArray<readonly [string, number]>, status: "partially_filled" | "filled" = "filled") => ({
  brokerOrderId: `alpaca-${id}`,
  clientOrderId: clientOrderId(id),
  status,
  fills: fills.map(([fillId, quantity]) => ({ id: fillId, quantity, price: 100, filledAt: DateTime.unsafeMake("2026-11-24T15:00:00Z") }))
})

/**
 * The recording, with `meanwhile` run once between its first read of intents (without locks) and
 * its write: another writer changing an intent after the read, at the one moment it matters.
 */
const recordingWithWriteBetween = (meanwhile: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const transitions = Outbox.make(sql, (yield* IdGenerator).eventId)
    const pending = yield* Ref.make(true)
    const readStates: typeof transitions.readStates = (intentIds) =>
      Effect.tap(transitions.readStates(intentIds), () =>
        Effect.flatMap(Ref.getAndSet(pending, false), (first) => first ? meanwhile : Effect.void))
    return yield* Recording.make({ ...transitions, readStates }, JobEnds.make(sql))
  })

/** A recording of its own, counting its reads of intents without locks and its locking reads. */
const countedRecording = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const transitions = Outbox.make(sql, (yield* IdGenerator).eventId)
  const counts = { reads: 0, locks: 0 }
  const readStates: typeof transitions.readStates = (intentIds) =>
    Effect.tap(transitions.readStates(intentIds), () => Effect.sync(() => intentIds.length > 0 && counts.reads++))
  const lockStates: typeof transitions.lockStates = (intentIds) =>
    Effect.tap(transitions.lockStates(intentIds), () => Effect.sync(() => intentIds.length > 0 && counts.locks++))
  const recording = yield* Recording.make({ ...transitions, readStates, lockStates }, JobEnds.make(sql))
  return { recording, counts }
})

/** A submission's answer: the order open at the broker, nothing filled; its job ends with it. */
const answerWord = (id: IntentId, job: Job) => ({ intentId: id, order: restingOrder(id), done: job, followUp: { syncAt: undefined } })

/** The fill of the whole intent (4 then 6) as heard on the stream of `via`. */
const fillWord = (id: IntentId, via: BrokerId) => ({ intentId: id, order: filledOrder(id, [["a", 4], ["b", 6]]), via })

/** The intent filled by 4 and 6, with one event for the fill and no job left. */
const filledOnce = (owner: Owner, id: IntentId) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* filledBy4And6(owner, id)
    expect(yield* eventTypes(id)).toEqual([{ type: "intent.created" }, { type: "intent.filled" }])
    expect(yield* sql`SELECT 1 FROM routing_jobs WHERE intent_id = ${id}`).toEqual([])
  })

/**
 * Runs `effect` while building an intent's document whole (`intent_document`, its orders and fills
 * looked up) fails, then puts the function back as it was.
 */
const refusingWholeDocuments = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.acquireUseRelease(
      Effect.gen(function*() {
        const [saved] = yield* sql<{ readonly definition: string }>`
          SELECT pg_get_functiondef('intent_document(intents)'::regprocedure) AS definition`
        if (saved === undefined) return yield* Effect.dieMessage("no intent_document")
        yield* sql.unsafe(`
          CREATE OR REPLACE FUNCTION intent_document(i intents) RETURNS json
          LANGUAGE plpgsql STABLE AS $$ BEGIN RAISE EXCEPTION 'a document built whole'; END $$`)
        return saved.definition
      }),
      () => effect,
      (definition) => Effect.orDie(sql.unsafe(definition))
    ))

/** The types of an intent's events, in order. */
const eventTypes = (id: IntentId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ type: string }>`SELECT type FROM events WHERE intent_id = ${id} ORDER BY seq`)

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`routing in batches on ${name}`, (it) => {
    describe("recording the broker's word about many intents at once", () => {
      it.effect("each intent gets its own order, fill, transition and event, and each worker's job ends", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const sql = yield* SqlClient.SqlClient
          const { inputs, owner } = yield* liveIntents(30)
          const ids = new Set<string>(inputs.map(({ id }) => id))
          const jobs = (yield* routing.claim(1000, Duration.seconds(30))).filter((job) => ids.has(job.intentId))
          expect(jobs).toHaveLength(30)
          const { batches, calls, result: transitions } = yield* batchesOf("routing_record", Effect.forEach(
            jobs,
            (job) => routing.record(job.intentId, filledOrder(job.intentId, [[`x-${job.intentId}`, 10]]), job),
            { concurrency: "unbounded" }
          ))
          // They shared transactions.
          expect(calls).toBe(30)
          expect(batches).toBeLessThan(30)
          expect(transitions.map((t) => [t.status, t.filled, t.changed])).toEqual(jobs.map(() => ["filled", 10, true]))
          for (const input of inputs) {
            const intent = yield* Effect.flatten(intents.findById(owner, input.id))
            expect(intent).toMatchObject({ status: "filled", orders: [{ status: "filled", fills: [{ quantity: 10, price: 100 }] }] })
          }
          const events = yield* sql<{ type: string; count: number }>`
            SELECT type, count(*)::int AS count FROM events WHERE intent_id IN ${sql.in([...ids])} GROUP BY type ORDER BY type`
          expect(events).toEqual([{ type: "intent.created", count: 30 }, { type: "intent.filled", count: 30 }])
          expect(yield* sql`SELECT 1 FROM routing_jobs WHERE intent_id IN ${sql.in([...ids])}`).toEqual([])
        }))

      it.effect("two words about one intent arriving together: the second is recorded on what the first left", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { input, owner } = yield* oneIntent
          const [partial, filled] = yield* Effect.all([
            routing.record(input.id, filledOrder(input.id, [["a", 4]], "partially_filled")),
            routing.record(input.id, filledOrder(input.id, [["a", 4], ["b", 6]]))
          ], { concurrency: "unbounded" })
          expect(partial).toMatchObject({ status: "partially_filled", filled: 4, changed: true })
          expect(filled).toMatchObject({ status: "filled", filled: 10, changed: true, fills: [{ id: "b", quantity: 6 }] })
          yield* filledBy4And6(owner, input.id)
        }))

      it.effect("a recording that cannot be made fails alone: the others arriving with it are recorded", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const { inputs, owner } = yield* liveIntents(5)
          const missing = IntentId.make(uuid())
          const exits = yield* Effect.forEach(
            [missing, ...inputs.map(({ id }) => id)],
            (id) => Effect.exit(routing.record(id, filledOrder(id, [[`y-${id}`, 10]]))),
            { concurrency: "unbounded" }
          )
          expect(exits.map(Exit.isSuccess)).toEqual([false, true, true, true, true, true])
          for (const input of inputs) {
            expect((yield* Effect.flatten(intents.findById(owner, input.id))).status).toBe("filled")
          }
        }))
    })

    describe("a submission's answer about an intent still as its claim read it", () => {
      it.effect("is recorded in one statement without locks: order, fills, status and an event that shows them; the job ends", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const sql = yield* SqlClient.SqlClient
          const { inputs, owner } = yield* liveIntents(5)
          const jobs = yield* claimed(inputs)
          const { calls, result: exits } = yield* batchesOf("routing_record_unlocked", routing.recordMany(
            jobs.map((job) => ({ intentId: job.intentId, order: filledOrder(job.intentId, [["a", 4], ["b", 6]]), done: job }))
          ))
          expect(calls).toBe(5)
          expect(exits.map((exit) => Exit.map(exit, (t) => [t.status, t.filled, t.changed]))).toEqual(
            jobs.map(() => Exit.succeed(["filled", 10, true]))
          )
          for (const input of inputs) {
            const intent = yield* filledBy4And6(owner, input.id)
            // The event carries the intent as a GET shows it now: its order and fills included.
            const [event] = yield* sql<{ data: unknown }>`
              SELECT data FROM events WHERE intent_id = ${input.id} AND type = 'intent.filled'`
            expect(event?.data).toEqual(JSON.parse(JSON.stringify(intent)))
          }
          const ids = inputs.map(({ id }) => id)
          expect(yield* sql`SELECT 1 FROM routing_jobs WHERE intent_id IN ${sql.in(ids)}`).toEqual([])
          expect(yield* sql<{ status: string; n: number }>`
            SELECT status, sum(n)::int AS n FROM intent_counts WHERE user_id = ${owner.userId} GROUP BY status HAVING sum(n) <> 0`)
            .toEqual([{ status: "filled", n: 5 }])
        }))

      it.effect("writes each document around the order and fills it wrote, looking none up: the document built whole", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const sql = yield* SqlClient.SqlClient
          const { inputs } = yield* liveIntents(3)
          const jobs = yield* claimed(inputs)
          const [resting, ...filled] = jobs
          if (resting === undefined) return yield* Effect.dieMessage("no job")
          const exits = yield* refusingWholeDocuments(routing.recordMany([
            { intentId: resting.intentId, order: restingOrder(resting.intentId), done: resting, followUp: { syncAt: undefined } },
            ...filled.map((job) => ({ intentId: job.intentId, order: filledOrder(job.intentId, [["b", 6], ["a", 4]]), done: job }))
          ]))
          expect(exits.map((exit) => Exit.map(exit, (t) => t.status))).toEqual([
            Exit.succeed("pending"),
            ...filled.map(() => Exit.succeed("filled"))
          ])
          const ids = inputs.map(({ id }) => id)
          expect(yield* sql`
            SELECT id FROM intents
            WHERE id IN ${sql.in(ids)} AND document::text IS DISTINCT FROM intent_document(intents)::text`).toEqual([])
          const events = yield* sql<{ data: unknown; document: unknown }>`
            SELECT e.data, i.document FROM events e JOIN intents i ON i.id = e.intent_id
            WHERE e.intent_id IN ${sql.in(ids)} AND e.type = 'intent.filled'`
          expect(events).toHaveLength(2)
          for (const { data, document } of events) expect(data).toEqual(document)
        }))

      it.effect("an order left open changes no status and sends no event; the work that follows it is queued", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const sql = yield* SqlClient.SqlClient
          const { input, job, owner } = yield* oneClaimed
          const syncAt = DateTime.unsafeMake("2030-01-02T21:00:00Z")
          const { calls, result: transition } = yield* batchesOf("routing_record_unlocked",
            routing.record(input.id, restingOrder(input.id), job, { syncAt }))
          expect(calls).toBe(1)
          expect(transition).toMatchObject({ status: "pending", changed: false })
          const intent = yield* Effect.flatten(intents.findById(owner, input.id))
          expect(intent).toMatchObject({ status: "pending", orders: [{ status: "new", fills: [] }] })
          expect(yield* sql<{ type: string }>`SELECT type FROM events WHERE intent_id = ${input.id}`).toEqual([{ type: "intent.created" }])
          const jobs = yield* sql<{ kind: string; run_at: Date; locked_until: Date | null }>`
            SELECT kind, run_at, locked_until FROM routing_jobs WHERE intent_id = ${input.id}`
          expect(jobs).toEqual([{ kind: "sync", run_at: DateTime.toDate(syncAt), locked_until: null }])
        }))

      it.effect("a cancel asked for since the claim: recorded under the lock, and the cancel is queued to follow", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const sql = yield* SqlClient.SqlClient
          const { input, job } = yield* oneClaimed
          yield* sql`UPDATE intents SET cancel_requested_at = now() WHERE id = ${input.id}`
          const unlocked = yield* batchesOf("routing_record_unlocked",
            routing.record(input.id, restingOrder(input.id), job, { syncAt: undefined }))
          expect(unlocked.calls).toBe(0)
          expect(yield* sql<{ kind: string }>`SELECT kind FROM routing_jobs WHERE intent_id = ${input.id}`).toEqual([{ kind: "cancel" }])
          expect(yield* sql<{ status: string }>`SELECT status FROM orders WHERE intent_id = ${input.id}`).toEqual([{ status: "new" }])
        }))

      it.effect("an order recorded since the claim (heard on the stream first, by another instance): recorded under the lock, no fill counted twice", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const other = yield* SqlRoutingRepository.make
          const { input, job, liveBroker, owner } = yield* oneClaimed
          yield* other.recordHeard(liveBroker.id, input.id, filledOrder(input.id, [["a", 4]], "partially_filled"))
          const { calls, result: transition } = yield* batchesOf("routing_record_unlocked",
            routing.record(input.id, filledOrder(input.id, [["a", 4], ["b", 6]]), job, { syncAt: undefined }))
          expect(calls).toBe(0)
          expect(transition).toMatchObject({ status: "filled", filled: 10, fills: [{ id: "b", quantity: 6 }] })
          yield* filledBy4And6(owner, input.id)
        }).pipe(Effect.scoped))
    })

    describe("any other word, read first with its row's version", () => {
      it.effect("a word heard on a stream is recorded without locks; a word about an intent final or routed elsewhere is left out", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { input, liveBroker, owner } = yield* oneIntent
          const heard = (order: BrokerOrder, via = liveBroker.id) =>
            batchesOf("routing_record_unlocked", routing.recordHeard(via, input.id, order))
          const partial = yield* heard(filledOrder(input.id, [["a", 4]], "partially_filled"))
          expect(partial.calls).toBe(1)
          expect(partial.result).toEqual(Option.some(expect.objectContaining({ status: "partially_filled", filled: 4, changed: true })))
          const filled = yield* heard(filledOrder(input.id, [["a", 4], ["b", 6]]))
          expect(filled.calls).toBe(1)
          expect(filled.result).toEqual(Option.some(expect.objectContaining({ status: "filled", filled: 10, fills: [expect.objectContaining({ id: "b" })] })))
          const late = yield* heard({ ...restingOrder(input.id), status: "canceled" })
          expect(late).toMatchObject({ calls: 0, result: Option.none() })
          const elsewhere = yield* heard(filledOrder(input.id, [["c", 1]]), BrokerId.make(uuid()))
          expect(elsewhere).toMatchObject({ calls: 0, result: Option.none() })
          yield* filledBy4And6(owner, input.id)
        }))

      it.effect("an intent written between the read and the write: the word is decided again under the lock, on what that write left", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { input, liveBroker, owner } = yield* oneIntent
          // Another instance records the partial fill after this recording read the intent as pending.
          const recording = yield* recordingWithWriteBetween(Effect.asVoid(
            routing.recordHeard(liveBroker.id, input.id, filledOrder(input.id, [["a", 4]], "partially_filled"))
          ))
          const [exit] = yield* recording.recordHeardMany([
            { intentId: input.id, order: filledOrder(input.id, [["a", 4], ["b", 6]]), via: liveBroker.id }
          ])
          // Decided on the read, fill a would have counted twice; on the intent as it is, only b is new.
          expect(exit).toEqual(Exit.succeed(Option.some(expect.objectContaining({
            status: "filled",
            filled: 10,
            changed: true,
            fills: [expect.objectContaining({ id: "b", quantity: 6 })]
          }))))
          yield* filledBy4And6(owner, input.id)
        }).pipe(Effect.scoped))

      it.effect("an intent made final between the read and the write: the word heard is left out, the final status stays", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const sql = yield* SqlClient.SqlClient
          const { input, liveBroker, owner } = yield* oneIntent
          const recording = yield* recordingWithWriteBetween(Effect.asVoid(
            routing.recordHeard(liveBroker.id, input.id, { ...restingOrder(input.id), status: "canceled" })
          ))
          const [exit] = yield* recording.recordHeardMany([
            { intentId: input.id, order: filledOrder(input.id, [["a", 10]]), via: liveBroker.id }
          ])
          expect(exit).toEqual(Exit.succeed(Option.none()))
          expect(yield* Effect.flatten(intents.findById(owner, input.id))).toMatchObject({
            status: "canceled",
            orders: [{ status: "canceled", fills: [] }]
          })
          expect(yield* sql<{ type: string }>`SELECT type FROM events WHERE intent_id = ${input.id} ORDER BY seq`).toEqual([
            { type: "intent.created" },
            { type: "intent.canceled" }
          ])
        }).pipe(Effect.scoped))

      it.effect("words about one intent arriving together are all written without locks, each on what the one before left, one transition a statement", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const intents = yield* IntentRepository
          const sql = yield* SqlClient.SqlClient
          const { input, job, liveBroker, owner } = yield* oneClaimed
          const { batches, calls, result: exits } = yield* batchesOf("routing_record_unlocked", routing.recordMany([
            { intentId: input.id, order: restingOrder(input.id), done: job, followUp: { syncAt: undefined } },
            { intentId: input.id, order: filledOrder(input.id, [["a", 4]], "partially_filled") },
            { intentId: input.id, order: filledOrder(input.id, [["a", 4], ["b", 6]]) }
          ]))
          // The resting order changes no status: it is written with the partial fill that follows it.
          expect({ batches, calls }).toEqual({ batches: 2, calls: 2 })
          expect(exits.map((exit) => Exit.map(exit, ({ changed, filled, status }) => [status, filled, changed]))).toEqual([
            Exit.succeed(["pending", 0, false]),
            Exit.succeed(["partially_filled", 4, true]),
            Exit.succeed(["filled", 10, true])
          ])
          yield* filledBy4And6(owner, input.id)
          expect(yield* sql<{ type: string }>`SELECT type FROM events WHERE intent_id = ${input.id} ORDER BY seq`).toEqual([
            { type: "intent.created" },
            { type: "intent.partially_filled" },
            { type: "intent.filled" }
          ])
          expect(yield* sql`SELECT 1 FROM routing_jobs WHERE intent_id = ${input.id}`).toEqual([])
          yield* routing.recordHeard(liveBroker.id, input.id, filledOrder(input.id, [["a", 4], ["b", 6]]))
          expect((yield* Effect.flatten(intents.findById(owner, input.id))).orders[0]?.fills).toHaveLength(2)
        }))

      it.effect("a submission's answer and the fill heard on the stream a moment later are written in one statement", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { input, job, liveBroker, owner } = yield* oneClaimed
          const { batches, calls, result } = yield* batchesOf(
            "routing_record_unlocked",
            Effect.all([
              routing.record(input.id, restingOrder(input.id), job, { syncAt: undefined }),
              routing.recordHeard(liveBroker.id, input.id, filledOrder(input.id, [["a", 4], ["b", 6]]))
            ], { concurrency: "unbounded" })
          )
          expect({ batches, calls }).toEqual({ batches: 1, calls: 1 })
          // Each word is answered with its own transition.
          const [answered, heard] = result
          expect(answered).toMatchObject({ status: "pending", changed: false, filled: 0 })
          expect(heard).toEqual(Option.some(expect.objectContaining({ status: "filled", changed: true, filled: 10 })))
          yield* filledOnce(owner, input.id)
          const intents = yield* IntentRepository
          expect((yield* Effect.flatten(intents.findById(owner, input.id))).orders)
            .toEqual([expect.objectContaining({ broker_order_id: `alpaca-${input.id}`, status: "filled" })])
        }))

      it.effect("a word about another order of the intent is not folded into the write before it", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const sql = yield* SqlClient.SqlClient
          const { input, job } = yield* oneClaimed
          const other = { ...restingOrder(input.id), brokerOrderId: "other", clientOrderId: `${clientOrderId(input.id)}-b` }
          const { batches, result } = yield* batchesOf("routing_record_unlocked", routing.recordMany([
            { intentId: input.id, order: restingOrder(input.id), done: job, followUp: { syncAt: undefined } },
            { intentId: input.id, order: other }
          ]))
          expect(batches).toBe(2)
          expect(result.every(Exit.isSuccess)).toBe(true)
          expect(yield* sql<{ client_order_id: string }>`SELECT client_order_id FROM orders WHERE intent_id = ${input.id} ORDER BY client_order_id`)
            .toEqual([{ client_order_id: clientOrderId(input.id) }, { client_order_id: other.clientOrderId }])
        }))

      it.effect("two instances hearing words about the same intents at once: each decided on what the other left, a final status never undone", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const other = yield* SqlRoutingRepository.make
          const sql = yield* SqlClient.SqlClient
          const { inputs, liveBroker, owner } = yield* liveIntents(40)
          const hear = (
            instance: Context.Tag.Service<typeof RoutingRepository>,
            order: (id: string) => BrokerOrder
          ) => Effect.forEach(inputs, (input) => instance.recordHeard(liveBroker.id, input.id, order(input.id)), { concurrency: "unbounded" })
          // Each instance reads the intents, then writes them: mostly before the other has written.
          yield* Effect.all([
            hear(routing, (id) => filledOrder(id, [["a", 4], ["b", 6]])),
            hear(other, (id) => filledOrder(id, [["a", 4]], "partially_filled"))
          ], { concurrency: "unbounded" })
          for (const input of inputs) {
            yield* filledBy4And6(owner, input.id)
          }
          const [filled] = yield* sql<{ count: number }>`
            SELECT count(*)::int AS count FROM events WHERE intent_id IN ${sql.in(inputs.map(({ id }) => id))} AND type = 'intent.filled'`
          expect(filled?.count).toBe(inputs.length)
        }).pipe(Effect.scoped))
    })

    describe("an intent as the last batch wrote it, kept for the next", () => {
      it.effect("the fill heard after its submission's answer was written is written with no read and no lock", () =>
        Effect.gen(function*() {
          const { counts, recording } = yield* countedRecording
          const { input, job, liveBroker, owner } = yield* oneClaimed
          const [answered] = yield* recording.recordHeardMany([answerWord(input.id, job)])
          const [heard] = yield* recording.recordHeardMany([fillWord(input.id, liveBroker.id)])
          expect(answered).toEqual(Exit.succeed(Option.some(expect.objectContaining({ status: "pending", changed: false }))))
          expect(heard).toEqual(Exit.succeed(Option.some(expect.objectContaining({ status: "filled", changed: true, filled: 10 }))))
          expect(counts).toEqual({ reads: 0, locks: 0 })
          yield* filledOnce(owner, input.id)
        }).pipe(Effect.scoped))

      it.effect("the submission's answer that comes after its fill was heard ends its job with no lock, the fill kept", () =>
        Effect.gen(function*() {
          const { counts, recording } = yield* countedRecording
          const { input, job, liveBroker, owner } = yield* oneClaimed
          const [heard] = yield* recording.recordHeardMany([fillWord(input.id, liveBroker.id)])
          const [answered] = yield* recording.recordHeardMany([answerWord(input.id, job)])
          expect(heard).toEqual(Exit.succeed(Option.some(expect.objectContaining({ status: "filled", changed: true }))))
          expect(answered).toEqual(Exit.succeed(Option.some(expect.objectContaining({ status: "filled", changed: false }))))
          // The fill was read first (its intent was known to no batch); the answer needed neither.
          expect(counts).toEqual({ reads: 1, locks: 0 })
          yield* filledOnce(owner, input.id)
        }).pipe(Effect.scoped))

      it.effect("an intent another writer changed after it was kept is recorded on what that writer left", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { counts, recording } = yield* countedRecording
          const { input, job, liveBroker, owner } = yield* oneClaimed
          yield* recording.recordHeardMany([answerWord(input.id, job)])
          // Another instance records the partial fill after this one kept the intent as pending.
          yield* routing.recordHeard(liveBroker.id, input.id, filledOrder(input.id, [["a", 4]], "partially_filled"))
          const [heard] = yield* recording.recordHeardMany([fillWord(input.id, liveBroker.id)])
          // Decided on the kept intent, fill a would have counted twice; on the intent as it is, only b is new.
          expect(heard).toEqual(Exit.succeed(Option.some(expect.objectContaining({
            status: "filled",
            filled: 10,
            fills: [expect.objectContaining({ id: "b", quantity: 6 })]
          }))))
          expect(counts.locks).toBe(1)
          yield* filledBy4And6(owner, input.id)
          expect(yield* eventTypes(input.id)).toEqual([
            { type: "intent.created" },
            { type: "intent.partially_filled" },
            { type: "intent.filled" }
          ])
        }).pipe(Effect.scoped))
    })

    describe("the mock broker, given many orders at once", () => {
      it.effect("each is decided at its own user's price; an unreachable symbol fails alone; an order given twice is placed once", () =>
        Effect.gen(function*() {
          const broker = yield* BrokerGateway
          const market = yield* MockMarket
          const sql = yield* SqlClient.SqlClient
          const ada = yield* seedUser
          const bob = yield* seedUser
          yield* market.setPrice(ada.user.id, { symbol: "AAPL", price: 90 })
          yield* market.setPrice(bob.user.id, { symbol: "AAPL", price: 120 })
          const connection = (broker: typeof ada.testBroker) => ({ id: broker.id, kind: "mock" as const })
          const twice = `tir_${uuid()}`
          const submissions = [
            [connection(ada.testBroker), `tir_${uuid()}`, marketSpec],
            [connection(bob.testBroker), `tir_${uuid()}`, marketSpec],
            [connection(ada.testBroker), `tir_${uuid()}`, { ...marketSpec, symbol: "FAIL" }],
            [connection(bob.testBroker), `tir_${uuid()}`, { ...marketSpec, symbol: "MSFT" }],
            [connection(ada.testBroker), twice, marketSpec],
            [connection(ada.testBroker), twice, marketSpec]
          ] as const
          const { batches, calls, result: exits } = yield* batchesOf("mock_submit", Effect.forEach(
            submissions,
            ([conn, id, spec]) => Effect.exit(broker.submit(conn, { clientOrderId: id, spec })),
            { concurrency: "unbounded" }
          ))
          expect(calls).toBe(6)
          expect(batches).toBeLessThan(6)
          const outcomes = exits.map(Exit.match({
            onSuccess: (order) => order.fills.map((f) => f.price),
            onFailure: (cause) => Option.match(Cause.failureOption(cause), { onNone: () => "defect", onSome: (e) => e._tag })
          }))
          expect(outcomes).toEqual([[90], [120], "BrokerUnavailable", [100], [90], [90]])
          const placed = yield* sql<{ submissions: number }>`
            SELECT submissions FROM mock_broker_orders WHERE client_order_id = ${twice}`
          expect(placed).toEqual([{ submissions: 1 }])
        }))

      it.effect("an order submitted again is answered as the book holds it, beside orders placed now, and only counted", () =>
        Effect.gen(function*() {
          const broker = yield* BrokerGateway
          const market = yield* MockMarket
          const sql = yield* SqlClient.SqlClient
          const { testBroker, user } = yield* seedUser
          const connection = { id: testBroker.id, kind: "mock" as const }
          const again = `tir_${uuid()}`
          yield* market.setPrice(user.id, { symbol: "AAPL", price: 90 })
          const first = yield* broker.submit(connection, { clientOrderId: again, spec: marketSpec })
          // Submitted again at another price, with two new orders, each placed at the new one.
          yield* market.setPrice(user.id, { symbol: "AAPL", price: 110 })
          const fresh = [`tir_${uuid()}`, `tir_${uuid()}`]
          const answers = yield* broker.submitMany([again, ...fresh].map((clientOrderId) => ({ connection, clientOrderId, spec: marketSpec })))
          const orders = answers.map(Exit.match({ onSuccess: (order) => order, onFailure: (cause) => Cause.pretty(cause) }))
          expect(orders[0]).toEqual(first)
          expect(orders.map((order) => typeof order === "string" ? order : [order.clientOrderId, order.fills.map((f) => f.price)]))
            .toEqual([[again, [90]], [fresh[0], [110]], [fresh[1], [110]]])
          const placed = yield* sql<{ client_order_id: string; submissions: number }>`
            SELECT client_order_id, submissions FROM mock_broker_orders
            WHERE client_order_id IN (${again}, ${fresh[0] ?? ""}, ${fresh[1] ?? ""}) ORDER BY submissions DESC, client_order_id`
          expect(placed.map((row) => row.submissions)).toEqual([2, 1, 1])
          // An order placed now is answered as the book then holds it.
          for (const [i, id] of fresh.entries()) {
            const looked = yield* broker.lookup(connection, { clientOrderId: id })
            expect(Option.getOrThrow(looked)).toEqual(orders[i + 1])
          }
        }))

      it.effect("an order is decided at the price the broker last read only while that price holds: a price moved elsewhere is read again", () =>
        Effect.gen(function*() {
          const broker = yield* BrokerGateway
          const sql = yield* SqlClient.SqlClient
          const { testBroker, user } = yield* seedUser
          const connection = { id: testBroker.id, kind: "mock" as const }
          const fillPrice = Effect.map(
            Effect.suspend(() => broker.submit(connection, { clientOrderId: `tir_${uuid()}`, spec: marketSpec })),
            (order) => order.fills.map((fill) => fill.price)
          )
          expect(yield* fillPrice).toEqual([100])
          expect(yield* fillPrice).toEqual([100])
          // Set by another instance: this broker's last read does not know it.
          yield* sql`INSERT INTO mock_prices (user_id, symbol, price, updated_at) VALUES (${user.id}, ${marketSpec.symbol}, 90, now())`
          expect(yield* fillPrice).toEqual([90])
          yield* sql`UPDATE mock_prices SET price = 95 WHERE user_id = ${user.id}`
          expect(yield* fillPrice).toEqual([95])
        }))
    })
  })
}

besideOthers(
  "recording on PostgreSQL, with the intent held by another transaction",
  (it) => {
    it.effect("the statement without locks skips it; the answer is recorded under the lock once that transaction ends", () =>
      Effect.gen(function*() {
        const routing = yield* RoutingRepository
        const sql = yield* SqlClient.SqlClient
        const { input, job } = yield* oneClaimed
        const release = yield* heldOpen(sql`SELECT 1 FROM intents WHERE id = ${input.id} FOR UPDATE`)
        const recording = yield* Effect.fork(batchesOf(
          "routing_record_unlocked",
          routing.record(input.id, filledOrder(input.id, [["a", 10]]), job, { syncAt: undefined })
        ))
        // The recording waits for the lock: the statement without locks has passed the intent by.
        yield* sql<{ waiting: number }>`
          SELECT count(*)::int AS waiting FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`.pipe(
          Effect.filterOrFail(([row]) => row?.waiting === 1, () => "not waiting yet"),
          Effect.retry(Schedule.spaced("10 millis")),
          Effect.timeout("10 seconds")
        )
        expect(Option.isNone(yield* Fiber.poll(recording))).toBe(true)
        yield* release
        const { calls, result } = yield* Fiber.join(recording)
        expect(calls).toBe(0)
        expect(result).toMatchObject({ status: "filled", filled: 10, changed: true })
      }))
  }
)
