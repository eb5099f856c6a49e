import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type { Owner } from "../../src/domain/Ids.js"
import type { NewIntent } from "../../src/domain/Intent.js"
import { clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { RoutingHandoff } from "../../src/services/routing/RoutingHandoff.js"
import { type Job, RoutingRepository } from "../../src/services/routing/RoutingRepository.js"
import * as RoutingWorker from "../../src/workers/RoutingWorker.js"
import { eventId, marketSpec, newIntent, seedUser } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"
import { besideOthers, heldOpen } from "../support/Transactions.js"
import { databases } from "../support/Databases.js"

const JobRow = Schema.Struct({ claims: Schema.Int, claimed: Schema.Boolean, lease_ms: Schema.NullOr(Schema.Number) })

/** The submission job of an intent as the database holds it: its claims and its lease. */
const jobRow = (intentId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql`
      SELECT claims, locked_until IS NOT NULL AS claimed,
             (extract(epoch FROM locked_until - created_at) * 1000)::float8 AS lease_ms
      FROM routing_jobs WHERE intent_id = ${intentId} AND kind = 'submit'`
    return yield* Schema.decodeUnknown(Schema.Array(JobRow))(rows)
  })

/** A test-mode creation on the mock broker, as `Intents.create` makes it (the broker's kind given). */
const createMock = (input: NewIntent) =>
  Effect.flatMap(IntentRepository, (intents) =>
    Effect.flatMap(DateTime.now, (now) => intents.create(input, { now, quota: undefined, eventId: eventId(), brokerKind: "mock" })))

/** A taker of handed jobs for the scope, as a routing worker is: what it received, in order. */
const taking = (lease: Duration.DurationInput) =>
  Effect.gen(function*() {
    const handoff = yield* RoutingHandoff
    const received: Array<Job> = []
    yield* handoff.take(Duration.decode(lease), (jobs) => received.push(...jobs))
    return received
  })

/** Two mock intents of a new user, created while this instance takes their submissions for 30 s: the jobs it received. */
const twoHanded = Effect.gen(function*() {
  const received = yield* taking("30 seconds")
  const { testBroker, user } = yield* seedUser
  const owner: Owner = { userId: user.id, mode: "test" }
  const first = newIntent(owner, testBroker.id)
  const second = newIntent(owner, testBroker.id)
  yield* createMock(first)
  yield* createMock(second)
  expect(received.map((job) => job.intentId).sort()).toEqual([first.id, second.id].sort())
  return { received, first, second }
})

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`submissions handed at creation on ${name}`, (it) => {
    describe("while a routing worker of this instance takes them", () => {
      it.scoped("a creation claims its submission for the worker's lease and hands it over with its context", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const received = yield* taking("30 seconds")
          const { testBroker, user } = yield* seedUser
          const owner: Owner = { userId: user.id, mode: "test" }
          const input = newIntent(owner, testBroker.id, { symbol: "MSFT", order_type: "limit", limit_price: 99.5 })
          yield* createMock(input)

          expect(received).toEqual([{
            intentId: input.id,
            kind: "submit",
            claims: 1,
            version: 0,
            context: Option.some({
              intentId: input.id,
              userId: user.id,
              mode: "test",
              status: "pending",
              spec: { ...marketSpec, symbol: "MSFT", order_type: "limit", limit_price: 99.5 },
              connection: { id: testBroker.id, kind: "mock" },
              clientOrderId: clientOrderId(input.id),
              hasOrder: false,
              cancelRequested: false,
              filled: 0
            })
          }])
          const [row] = yield* jobRow(input.id)
          expect(row).toMatchObject({ claims: 1, claimed: true })
          expect(row?.lease_ms).toBeGreaterThan(29_000)
          // Another worker's claim skips it: it is held under the lease.
          const others = yield* routing.claim(1000, Duration.seconds(30))
          expect(others.map((job) => job.intentId)).not.toContain(input.id)
        }))

      it.scoped("creations batched together are each handed once; a duplicate intent_id hands nothing", () =>
        Effect.gen(function*() {
          const received = yield* taking("30 seconds")
          const { testBroker, user } = yield* seedUser
          const owner: Owner = { userId: user.id, mode: "test" }
          const inputs = Array.from({ length: 20 }, () => newIntent(owner, testBroker.id))
          const create = (input: NewIntent) => Effect.either(createMock(input))
          yield* Effect.forEach(inputs, create, { concurrency: "unbounded" })
          const duplicate = yield* create({ ...newIntent(owner, testBroker.id), intent_id: inputs[0]!.intent_id })
          expect(duplicate._tag).toBe("Left")
          expect(received.map((job) => job.intentId).sort()).toEqual(inputs.map((input) => input.id).sort())
        }))

      it.scoped("a creation counted against a quota is handed once its transaction commits, and not when refused", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const received = yield* taking("30 seconds")
          const { liveBroker, user } = yield* seedUser
          const owner: Owner = { userId: user.id, mode: "live" }
          const now = yield* DateTime.now
          const quota = { limit: 1, period: "2026-11-01", retryAfter: 60 }
          const first = newIntent(owner, liveBroker.id)
          yield* intents.create(first, { now, quota, eventId: eventId(), brokerKind: "alpaca" })
          const refused = yield* Effect.flip(
            intents.create(newIntent(owner, liveBroker.id), { now, quota, eventId: eventId(), brokerKind: "alpaca" })
          )
          expect(refused._tag).toBe("QuotaExceeded")
          expect(received.map((job) => [job.intentId, Option.map(job.context, (c) => c.connection.kind)])).toEqual([
            [first.id, Option.some("alpaca")]
          ])
        }))

      it.scoped("a handed submission whose lease runs out unfinished is claimed again, as one that may have reached the broker", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const received = yield* taking("50 millis")
          const { testBroker, user } = yield* seedUser
          const input = newIntent({ userId: user.id, mode: "test" }, testBroker.id)
          yield* createMock(input)
          expect(received).toHaveLength(1)
          yield* Effect.sleep("200 millis")
          const again = (yield* routing.claim(1000, Duration.seconds(30))).filter((job) => job.intentId === input.id)
          expect(again.map((job) => job.claims)).toEqual([2])
        }))

      it.scoped("renewing leases extends the claimed jobs' leases; a job claimed again since is left to its new holder", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const sql = yield* SqlClient.SqlClient
          const { first: kept, received, second: taken } = yield* twoHanded
          // Another worker's claim of one of them since (its lease run out): a later claim number.
          yield* sql`UPDATE routing_jobs SET claims = claims + 1 WHERE intent_id = ${taken.id}`
          yield* routing.extend(received, Duration.hours(1))
          const [keptJob] = yield* jobRow(kept.id)
          const [takenJob] = yield* jobRow(taken.id)
          expect(keptJob?.lease_ms).toBeGreaterThan(Duration.toMillis(Duration.minutes(59)))
          expect(takenJob?.lease_ms).toBeLessThan(Duration.toMillis(Duration.minutes(1)))
        }))
    })

    describe("through the routing worker", () => {
      it.effect("handed submissions are routed; those not started when the worker stops are handed back unclaimed", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { testBroker, user } = yield* seedUser
          const owner: Owner = { userId: user.id, mode: "test" }
          const inputs = Array.from({ length: 30 }, () => newIntent(owner, testBroker.id, { symbol: "HOLD" }))
          const sql = yield* SqlClient.SqlClient
          const ordered = Effect.map(
            sql`SELECT count(*)::int AS n FROM orders WHERE intent_id IN ${sql.in(inputs.map((input) => input.id))}`,
            (rows) => Number(rows[0]?.["n"] ?? 0)
          )
          const worker = RoutingWorker.layer({ retryDelays: [Duration.millis(10)], concurrency: 1, pollInterval: "1 hour", lease: "30 seconds" })
          yield* Effect.scoped(Effect.gen(function*() {
            yield* Layer.build(worker)
            yield* Effect.forEach(
              inputs,
              createMock,
              { concurrency: "unbounded" }
            )
            // The worker runs one job at a time: stopped once the first is routed, it has not started them all.
            yield* ordered.pipe(Effect.repeat({ until: (n) => n > 0, schedule: Schedule.spaced("5 millis") }))
          }))
          // Every submission was routed, or handed back unclaimed for any instance to take (none
          // waits out a lease). Which, depends on timing: the job loop's own test holds one back.
          const left = (yield* Effect.forEach(inputs, (input) => jobRow(input.id))).flat()
          expect(left.length).toBeLessThan(inputs.length)
          expect(left.every((row) => row.claims === 1 && !row.claimed)).toBe(true)
          const routed = yield* Effect.forEach(inputs, (input) => intents.findById(owner, input.id))
          expect(routed.filter((intent) => Option.getOrThrow(intent).orders.length > 0)).toHaveLength(inputs.length - left.length)
        }))
    })

    describe("routed together", () => {
      it.effect("submissions created together are placed together, each with its own outcome and exactly one order at the broker", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const sql = yield* SqlClient.SqlClient
          const { testBroker, user } = yield* seedUser
          const owner: Owner = { userId: user.id, mode: "test" }
          // What each symbol's order comes to at the mock broker, through each path of a handed batch:
          // filled or rejected at once (recorded together), resting (followed up alone), unreachable
          // (retried alone on the schedule, then failed, with nothing placed).
          const outcomes = [
            ["AAPL", "filled"],
            ["REJECT", "rejected"],
            ["HOLD", "pending"],
            ["PARTIAL", "partially_filled"],
            ["FAIL", "failed"]
          ] as const
          const cases = Array.from({ length: 25 }, (_, i) => {
            const [symbol, status] = outcomes[i % outcomes.length] ?? outcomes[0]
            return { input: newIntent(owner, testBroker.id, { symbol }), symbol, status }
          })
          const inputs = cases.map(({ input }) => input)
          const routedAll = Effect.forEach(cases, ({ input, status, symbol }) =>
            Effect.map(intents.findById(owner, input.id), (found) => {
              const intent = Option.getOrThrow(found)
              return intent.status === status && (symbol === "FAIL" || intent.orders.length > 0)
            })).pipe(Effect.map((done) => done.every(Boolean)))
          const worker = RoutingWorker.layer({ retryDelays: [Duration.millis(10)], pollInterval: "1 hour", lease: "30 seconds" })
          yield* Effect.scoped(Effect.gen(function*() {
            yield* Layer.build(worker)
            yield* Effect.forEach(inputs, createMock, { concurrency: "unbounded" })
            yield* routedAll.pipe(
              Effect.repeat({ until: (done) => done, schedule: Schedule.spaced("10 millis") }),
              Effect.timeout("20 seconds")
            )
          }))
          const placed = yield* sql`
            SELECT client_order_id, submissions FROM mock_broker_orders
            WHERE client_order_id IN ${sql.in(inputs.map((input) => clientOrderId(input.id)))}`
          expect(placed).toHaveLength(inputs.length - inputs.filter((input) => input.symbol === "FAIL").length)
          expect(placed.every((row) => Number(row["submissions"]) === 1)).toBe(true)
          for (const input of inputs) {
            const intent = Option.getOrThrow(yield* intents.findById(owner, input.id))
            expect(intent.orders).toHaveLength(input.symbol === "FAIL" ? 0 : 1)
          }
          // Only the resting orders' jobs are left: each watched until the end of its day.
          const jobs = yield* sql`SELECT kind FROM routing_jobs WHERE intent_id IN ${sql.in(inputs.map((input) => input.id))}`
          expect(jobs.map((row) => row["kind"])).toEqual(inputs.filter((input) => input.symbol === "HOLD" || input.symbol === "PARTIAL").map(() => "sync"))
        }))
    })

    describe("while no worker of this instance takes them", () => {
      it.effect("a creation leaves its submission unclaimed, for any instance's claim", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const { testBroker, user } = yield* seedUser
          const input = newIntent({ userId: user.id, mode: "test" }, testBroker.id)
          yield* createMock(input)
          expect(yield* jobRow(input.id)).toEqual([{ claims: 0, claimed: false, lease_ms: null }])
          const claimed = (yield* routing.claim(1000, Duration.seconds(30))).filter((job) => job.intentId === input.id)
          expect(claimed.map((job) => job.claims)).toEqual([1])
        }))

      it.scoped("a worker that stopped taking them gets nothing more", () =>
        Effect.gen(function*() {
          const received = yield* Effect.scoped(taking("30 seconds"))
          const { testBroker, user } = yield* seedUser
          const input = newIntent({ userId: user.id, mode: "test" }, testBroker.id)
          yield* createMock(input)
          expect(received).toEqual([])
          expect(yield* jobRow(input.id)).toEqual([{ claims: 0, claimed: false, lease_ms: null }])
        }))
    })
  })
}

// A row held by another transaction while leases are renewed: only PostgreSQL runs transactions side by side.
besideOthers(
  "routing leases on PostgreSQL, beside a transaction in flight",
  (it) => {
    it.scoped("renewing leases skips a job whose row another transaction holds and renews the others, without waiting", () =>
      Effect.gen(function*() {
        const routing = yield* RoutingRepository
        const sql = yield* SqlClient.SqlClient
        const { first: held, received, second: free } = yield* twoHanded
        // Another transaction holds one job's row (as a recording ending it does) until released.
        const release = yield* heldOpen(sql`SELECT 1 FROM routing_jobs WHERE intent_id = ${held.id} FOR UPDATE`)
        // Waiting for the held row would outlast the timeout: the holder lets go only afterwards.
        yield* routing.extend(received, Duration.hours(1)).pipe(Effect.timeoutFail({
          duration: "10 seconds",
          onTimeout: () => new Error("renewing the leases waited for the held row")
        }))
        yield* release
        const [freeJob] = yield* jobRow(free.id)
        const [heldJob] = yield* jobRow(held.id)
        expect(freeJob?.lease_ms).toBeGreaterThan(Duration.toMillis(Duration.minutes(59)))
        expect(heldJob?.claimed).toBe(true)
        expect(heldJob?.lease_ms).toBeLessThan(Duration.toMillis(Duration.minutes(1)))
      }))
  }
)
