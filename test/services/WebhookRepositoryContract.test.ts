import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { DeliveryId, type Mode, UserId, WebhookEndpointId } from "../../src/domain/Ids.js"
import { TradeIntent } from "../../src/domain/Intent.js"
import { allEventTypes, type EventType, MAX_IN_FLIGHT_PER_ENDPOINT, TEST_EVENT_MESSAGE } from "../../src/domain/Webhook.js"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import * as InMemoryWebhookRepository from "../../src/services/webhooks/InMemoryWebhookRepository.js"
import { type AttemptResult, type DueDelivery, WebhookRepository } from "../../src/services/webhooks/WebhookRepository.js"
import * as Database from "../../src/sql/Database.js"
import { eventId, newIntent, seedUser, uuid } from "../support/Fixtures.js"
import { batchesOf } from "../support/Batches.js"
import * as Postgres from "../support/Postgres.js"
import { heldOpen } from "../support/Transactions.js"

/**
 * Creates an intent of a seeded user, which records its `intent.created` event and so one delivery
 * per subscribed endpoint: in SQL the intent repository's transaction writes them; in memory the
 * event is handed to the webhook repository's store as that transaction would.
 */
class Emit extends Context.Tag("Emit")<Emit, {
  readonly created: (user: Seeded, mode: Mode) => Effect.Effect<{ readonly eventId: string; readonly intent: TradeIntent }>
}>() {}

type Seeded = Effect.Effect.Success<typeof seedUser>

const create = (user: Seeded, mode: Mode) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const id = eventId()
    const broker = mode === "test" ? user.testBroker : user.liveBroker
    const intent = yield* intents.create(newIntent({ userId: user.user.id, mode }, broker.id), {
      now: yield* DateTime.now,
      quota: undefined,
      eventId: id
    }).pipe(Effect.orDie)
    return { eventId: id, intent }
  })

const emitSql = Layer.effect(
  Emit,
  Effect.map(IntentRepository, (intents) => ({
    created: (user: Seeded, mode: Mode) => create(user, mode).pipe(Effect.provideService(IntentRepository, intents))
  }))
)

const emitInMemory = Layer.effect(
  Emit,
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const events = yield* InMemoryWebhookRepository.Events
    return {
      created: (user: Seeded, mode: Mode) =>
        create(user, mode).pipe(
          Effect.tap(({ eventId, intent }) =>
            events.record({
              id: eventId,
              user_id: user.user.id,
              mode,
              type: "intent.created",
              data: Schema.encodeSync(TradeIntent)(intent),
              created_at: intent.created_at
            })
          ),
          Effect.provideService(IntentRepository, intents)
        )
    }
  })
)

const sqlRepositories = Layer.mergeAll(IntentRepository.layerSql(), AccountRepository.layerSql, WebhookRepository.layerSql)

/** The database backends, with their `SqlClient` for the tests only a database can set up. */
const sqlBackends = [
  ["PGlite", emitSql.pipe(Layer.provideMerge(sqlRepositories), Layer.provideMerge(Database.migrated(Database.pglite(undefined))))],
  ["PostgreSQL", emitSql.pipe(Layer.provideMerge(sqlRepositories), Layer.provideMerge(Postgres.layerFresh))]
] as const

/** Every backend, as the contract uses it: the repositories and `Emit`. */
const backends: ReadonlyArray<
  readonly [string, Layer.Layer<Emit | IntentRepository | AccountRepository | WebhookRepository, unknown>]
> = [
  [
    "in-memory",
    emitInMemory.pipe(Layer.provideMerge(Layer.mergeAll(
      IntentRepository.layerInMemory,
      AccountRepository.layerInMemory,
      WebhookRepository.layerInMemoryWithEvents
    )))
  ],
  ...sqlBackends
]

const lease = Duration.seconds(30)

/** A seeded user with one endpoint per mode subscribed to `events`; deleted (with their deliveries) afterwards. */
const withEndpoints = <A, E, R>(
  use: (fixture: {
    readonly user: Seeded
    readonly test: WebhookEndpointId
    readonly live: WebhookEndpointId
  }) => Effect.Effect<A, E, R>,
  events: ReadonlyArray<EventType> = allEventTypes
) =>
  Effect.gen(function*() {
    const webhooks = yield* WebhookRepository
    const user = yield* seedUser
    const endpoint = (mode: Mode) =>
      Effect.map(DateTime.now, (now) => ({
        id: WebhookEndpointId.make(uuid()),
        user_id: user.user.id,
        url: `https://example.com/${mode}`,
        mode,
        events,
        secret: "s".repeat(64),
        created_at: now
      })).pipe(Effect.flatMap(webhooks.createEndpoint))
    const test = yield* endpoint("test")
    const live = yield* endpoint("live")
    return yield* use({ user, test: test.id, live: live.id }).pipe(
      Effect.ensuring(Effect.all([webhooks.deleteEndpoint(test.id), webhooks.deleteEndpoint(live.id)]))
    )
  })

const attempt = (at: DateTime.Utc, next: AttemptResult["next"], statusCode: number | null = 500): AttemptResult => ({
  at,
  statusCode,
  error: statusCode === null ? "connection refused" : null,
  durationMs: 12.4,
  next
})

const claimAll = Effect.flatMap(WebhookRepository, (webhooks) => webhooks.claim(100, lease))

/** The only item, or the one at `index`, failing the test when there is none. */
const one = <A>(items: ReadonlyArray<A>, index?: number): A => {
  if (index === undefined) expect(items).toHaveLength(1)
  const item = items[index ?? 0]
  if (item === undefined) throw new Error(`expected an item at ${index ?? 0}, got ${items.length}`)
  return item
}

const ids = (deliveries: ReadonlyArray<DueDelivery>) => deliveries.map((d) => d.id).sort()

/** A `webhook.test` event for `endpointId`, as the use case writes it, at the current time. */
const testEvent = (userId: UserId, endpointId: WebhookEndpointId) =>
  Effect.map(DateTime.now, (now) => ({
    id: eventId(),
    delivery_id: DeliveryId.make(uuid()),
    endpoint_id: endpointId,
    user_id: userId,
    data: { endpoint_id: endpointId, message: TEST_EVENT_MESSAGE },
    created_at: now
  }))

for (const [name, backend] of backends) {
  layer(backend, { timeout: 60_000 })(`webhook repository contract: ${name}`, (it) => {
    describe("endpoints", () => {
      it.effect("creates, finds, lists in creation order per user, deletes once", () =>
        Effect.gen(function*() {
          const webhooks = yield* WebhookRepository
          const { user } = yield* seedUser
          const input = (url: string) =>
            Effect.map(DateTime.now, (now) => ({
              id: WebhookEndpointId.make(uuid()),
              user_id: user.id,
              url,
              mode: "test" as const,
              events: ["intent.filled" as const],
              secret: "f".repeat(64),
              created_at: now
            }))
          const first = yield* webhooks.createEndpoint(yield* input("https://example.com/a"))
          expect(first).toMatchObject({ url: "https://example.com/a", events: ["intent.filled"], disabled_at: null })
          yield* TestClock.adjust("1 second")
          const second = yield* webhooks.createEndpoint(yield* input("https://example.com/b"))
          expect(Option.getOrThrow(yield* webhooks.findEndpoint(first.id))).toEqual(first)
          expect(yield* webhooks.listEndpoints(user.id)).toEqual([first, second])
          expect(yield* webhooks.listEndpoints(UserId.make(uuid()))).toEqual([])
          expect(yield* webhooks.deleteEndpoint(first.id)).toBe(true)
          expect(yield* webhooks.deleteEndpoint(first.id)).toBe(false)
          expect(Option.isNone(yield* webhooks.findEndpoint(first.id))).toBe(true)
          expect(yield* webhooks.listEndpoints(user.id)).toEqual([second])
          yield* webhooks.deleteEndpoint(second.id)
        }))
    })

    describe("deliveries", () => {
      it.effect("an event makes one pending delivery for each enabled endpoint of its user and mode subscribing to it", () =>
        withEndpoints(({ live, test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const emit = yield* Emit
            const { eventId } = yield* emit.created(user, "test")
            const delivery = one(yield* webhooks.listDeliveries(test, 10))
            expect(delivery).toMatchObject({
              endpoint_id: test,
              event_id: eventId,
              type: "intent.created",
              status: "pending",
              attempts: 0,
              last_status_code: null,
              next_attempt_at: yield* DateTime.now,
              created_at: yield* DateTime.now,
              history: []
            })
            expect(yield* webhooks.listDeliveries(live, 10)).toEqual([])
            expect(Option.getOrThrow(yield* webhooks.findDelivery(delivery.id))).toEqual(delivery)
          })))

      it.effect("an endpoint not subscribed to the type gets nothing", () =>
        withEndpoints(({ test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            yield* (yield* Emit).created(user, "test")
            expect(yield* webhooks.listDeliveries(test, 10)).toEqual([])
            expect(yield* claimAll).toEqual([])
          }), ["intent.filled"]))

      it.effect("lists newest first, up to the limit", () =>
        withEndpoints(({ test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const emitted = []
            for (let i = 0; i < 3; i++) {
              yield* TestClock.adjust("1 second")
              emitted.push((yield* (yield* Emit).created(user, "test")).eventId)
            }
            const listed = yield* webhooks.listDeliveries(test, 2)
            expect(listed.map((d) => d.event_id)).toEqual(emitted.reverse().slice(0, 2))
            yield* claimAll
          })))

      it.effect("claims a due delivery under a lease with everything to send it, once until the lease ends", () =>
        withEndpoints(({ test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const { eventId, intent } = yield* (yield* Emit).created(user, "test")
            const now = yield* DateTime.now
            expect(yield* webhooks.nextDue).toEqual(Option.some(now))
            const claimed = one(yield* claimAll)
            expect(claimed).toMatchObject({
              claims: 1,
              failures: 0,
              endpointId: test,
              url: "https://example.com/test",
              mode: "test",
              eventId
            })
            expect(Redacted.value(claimed.secret)).toBe("s".repeat(64))
            expect(JSON.parse(claimed.body)).toEqual({
              id: eventId,
              type: "intent.created",
              created_at: DateTime.formatIso(now),
              data: JSON.parse(JSON.stringify(Schema.encodeSync(TradeIntent)(intent)))
            })
            expect(yield* claimAll).toEqual([])
            expect(yield* webhooks.nextDue).toEqual(Option.some(DateTime.addDuration(now, lease)))

            // The lease runs out: claimed again, and the first claim is fenced off.
            yield* TestClock.adjust(Duration.sum(lease, Duration.seconds(1)))
            const again = one(yield* claimAll)
            expect(again).toMatchObject({ id: claimed.id, claims: 2 })
            yield* webhooks.complete(claimed, attempt(yield* DateTime.now, { _tag: "succeeded" }, 200))
            expect(Option.getOrThrow(yield* webhooks.findDelivery(claimed.id))).toMatchObject({
              status: "pending",
              attempts: 0
            })
            yield* webhooks.complete(again, attempt(yield* DateTime.now, { _tag: "succeeded" }, 204))
            expect(Option.getOrThrow(yield* webhooks.findDelivery(claimed.id))).toMatchObject({
              status: "succeeded",
              attempts: 1,
              last_status_code: 204,
              next_attempt_at: null
            })
            expect(yield* webhooks.nextDue).toEqual(Option.none())
          })))

      it.effect("records attempts: a retry is due again when told, with its failures counted; a failure is final", () =>
        withEndpoints(({ user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            yield* (yield* Emit).created(user, "test")
            const first = one(yield* claimAll)
            const at = yield* DateTime.now
            const retryAt = DateTime.addDuration(at, Duration.minutes(1))
            yield* webhooks.complete(first, attempt(at, { _tag: "retry", at: retryAt }, 503))
            const pending = Option.getOrThrow(yield* webhooks.findDelivery(first.id))
            expect(pending).toMatchObject({ status: "pending", attempts: 1, last_status_code: 503, next_attempt_at: retryAt })
            expect(pending.history.map((a) => ({ ...a }))).toEqual([
              { attempted_at: at, status_code: 503, error: null, duration_ms: 12 }
            ])
            expect(yield* claimAll).toEqual([])
            expect(yield* webhooks.nextDue).toEqual(Option.some(retryAt))

            yield* TestClock.adjust(Duration.minutes(1))
            const second = one(yield* claimAll)
            expect(second).toMatchObject({ id: first.id, failures: 1, claims: 2 })
            const later = yield* DateTime.now
            yield* webhooks.complete(second, attempt(later, { _tag: "failed" }, null))
            const failed = Option.getOrThrow(yield* webhooks.findDelivery(first.id))
            expect(failed).toMatchObject({ status: "failed", attempts: 2, last_status_code: null, next_attempt_at: null })
            expect(failed.history[1]).toMatchObject({ attempted_at: later, status_code: null, error: "connection refused" })
            expect(yield* webhooks.nextDue).toEqual(Option.none())

            // A re-sent delivery is due at once with a fresh retry schedule.
            expect(yield* webhooks.resend(first.id, later)).toBe(true)
            expect(Option.getOrThrow(yield* webhooks.findDelivery(first.id))).toMatchObject({
              status: "pending",
              attempts: 2,
              next_attempt_at: later
            })
            const resent = one(yield* claimAll)
            expect(resent).toMatchObject({ id: first.id, failures: 0 })
            yield* webhooks.complete(resent, attempt(later, { _tag: "succeeded" }, 200))
          })))

      it.effect(`holds at most ${MAX_IN_FLIGHT_PER_ENDPOINT} deliveries of one endpoint in flight, others unaffected`, () =>
        withEndpoints(({ live, test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const emit = yield* Emit
            for (let i = 0; i < MAX_IN_FLIGHT_PER_ENDPOINT + 2; i++) yield* emit.created(user, "test")
            yield* emit.created(user, "live")
            const claimed = yield* claimAll
            expect(claimed.filter((d) => d.endpointId === test)).toHaveLength(MAX_IN_FLIGHT_PER_ENDPOINT)
            expect(claimed.filter((d) => d.endpointId === live)).toHaveLength(1)
            expect(yield* claimAll).toEqual([])
            // Every slot busy: nothing is due before a lease ends.
            const now = yield* DateTime.now
            expect(yield* webhooks.nextDue).toEqual(Option.some(DateTime.addDuration(now, lease)))

            const done = one(claimed.filter((d) => d.endpointId === test), 0)
            yield* webhooks.complete(done, attempt(now, { _tag: "succeeded" }, 200))
            const next = yield* claimAll
            expect(next.map((d) => d.endpointId)).toEqual([test])
            expect(ids(next)).not.toContain(done.id)
            expect(yield* webhooks.claim(1, lease)).toEqual([])
          })))

      it.effect("claims no more than the limit, earliest first", () =>
        withEndpoints(({ user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const emit = yield* Emit
            const first = yield* emit.created(user, "test")
            yield* TestClock.adjust("1 second")
            yield* emit.created(user, "test")
            const claimed = one(yield* webhooks.claim(1, lease))
            expect(claimed.eventId).toBe(first.eventId)
            expect(yield* claimAll).toHaveLength(1)
          })))

      it.effect("extends only current claims' leases; a release hands a delivery back without an attempt", () =>
        withEndpoints(({ user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            yield* (yield* Emit).created(user, "test")
            const claimed = one(yield* claimAll)
            yield* TestClock.adjust(Duration.seconds(20))
            yield* webhooks.extend([claimed], lease)
            yield* TestClock.adjust(Duration.seconds(20))
            expect(yield* claimAll).toEqual([])
            expect(yield* webhooks.nextDue).toEqual(
              Option.some(DateTime.addDuration(yield* DateTime.now, Duration.seconds(10)))
            )

            const at = DateTime.addDuration(yield* DateTime.now, Duration.seconds(5))
            yield* webhooks.release(claimed, at)
            expect(Option.getOrThrow(yield* webhooks.findDelivery(claimed.id))).toMatchObject({
              status: "pending",
              attempts: 0,
              next_attempt_at: at
            })
            expect(yield* webhooks.nextDue).toEqual(Option.some(at))
            expect(yield* claimAll).toEqual([])
            yield* TestClock.adjust(Duration.seconds(5))
            const again = one(yield* claimAll)
            expect(again).toMatchObject({ id: claimed.id, claims: 2 })
            // The old claim can neither extend nor complete.
            yield* webhooks.extend([claimed], Duration.hours(1))
            yield* webhooks.complete(claimed, attempt(yield* DateTime.now, { _tag: "succeeded" }, 200))
            expect(Option.getOrThrow(yield* webhooks.findDelivery(claimed.id)).status).toBe("pending")
            expect(yield* webhooks.nextDue).toEqual(Option.some(DateTime.addDuration(yield* DateTime.now, lease)))
          })))

      it.effect("a 410 disables the endpoint, fails its pending deliveries and those in flight; no resend", () =>
        withEndpoints(({ live, test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const emit = yield* Emit
            for (let i = 0; i < MAX_IN_FLIGHT_PER_ENDPOINT + 1; i++) yield* emit.created(user, "test")
            yield* emit.created(user, "live")
            const claimed = (yield* claimAll).filter((d) => d.endpointId === test)
            const gone = one(claimed, 0)
            const inFlight = one(claimed, 1)
            const at = yield* DateTime.now
            yield* webhooks.complete(gone, attempt(at, { _tag: "gone" }, 410))
            expect(Option.getOrThrow(yield* webhooks.findEndpoint(test)).disabled_at).toEqual(at)
            expect(Option.getOrThrow(yield* webhooks.findEndpoint(live)).disabled_at).toBeNull()
            const deliveries = yield* webhooks.listDeliveries(test, 100)
            expect(deliveries.map((d) => d.status)).toEqual(Array(MAX_IN_FLIGHT_PER_ENDPOINT + 1).fill("failed"))
            expect(deliveries.find((d) => d.id === gone.id)).toMatchObject({ attempts: 1, last_status_code: 410 })

            // One in flight meanwhile: a retry becomes a failure.
            const retryAt = DateTime.addDuration(at, Duration.minutes(1))
            yield* webhooks.complete(inFlight, attempt(at, { _tag: "retry", at: retryAt }, 503))
            expect(Option.getOrThrow(yield* webhooks.findDelivery(inFlight.id))).toMatchObject({
              status: "failed",
              attempts: 1,
              next_attempt_at: null
            })
            expect(yield* webhooks.resend(gone.id, at)).toBe(false)
            // A new event reaches only the enabled endpoint.
            yield* emit.created(user, "test")
            expect(yield* webhooks.listDeliveries(test, 100)).toHaveLength(MAX_IN_FLIGHT_PER_ENDPOINT + 1)
            expect(yield* claimAll).toEqual([])
          })))

      it.effect("deleting an endpoint deletes its deliveries", () =>
        withEndpoints(({ test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            yield* (yield* Emit).created(user, "test")
            const delivery = one(yield* webhooks.listDeliveries(test, 10))
            const claimed = one(yield* claimAll)
            yield* webhooks.complete(claimed, attempt(yield* DateTime.now, { _tag: "failed" }, 500))
            expect(yield* webhooks.deleteEndpoint(test)).toBe(true)
            expect(Option.isNone(yield* webhooks.findDelivery(delivery.id))).toBe(true)
            expect(yield* webhooks.listDeliveries(test, 10)).toEqual([])
            expect(yield* webhooks.resend(delivery.id, yield* DateTime.now)).toBe(false)
          })))
    })

    describe("owner operations", () => {
      it.effect("lists an owner's endpoints of one mode, oldest first, counting the window's failed and failing deliveries", () =>
        withEndpoints(({ live, test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const emit = yield* Emit
            const week = Duration.days(7)
            // A delivery that failed before the window: not counted.
            yield* emit.created(user, "test")
            yield* webhooks.complete(one(yield* claimAll), attempt(yield* DateTime.now, { _tag: "failed" }, 500))
            yield* TestClock.adjust(Duration.days(8))
            for (let i = 0; i < 5; i++) yield* emit.created(user, "test")
            const [succeeded, retried, failed, refused, untouched] = yield* claimAll
            const now = yield* DateTime.now
            const later = DateTime.addDuration(now, Duration.minutes(1))
            if (succeeded === undefined || retried === undefined || failed === undefined || refused === undefined) {
              throw new Error("expected five claimed deliveries")
            }
            yield* webhooks.complete(succeeded, attempt(now, { _tag: "succeeded" }, 200))
            yield* webhooks.complete(retried, attempt(now, { _tag: "retry", at: later }, 503))
            yield* webhooks.complete(failed, attempt(now, { _tag: "failed" }, null))
            // Failed, then re-sent: pending again, with a failed attempt.
            yield* webhooks.complete(refused, attempt(now, { _tag: "failed" }, 500))
            expect(yield* webhooks.resend(refused.id, now)).toBe(true)
            expect(untouched).toBeDefined()

            yield* TestClock.adjust("1 second")
            const newer = yield* webhooks.createEndpoint({
              id: WebhookEndpointId.make(uuid()),
              user_id: user.user.id,
              url: "https://example.com/newer",
              mode: "test",
              events: ["intent.filled"],
              secret: "n".repeat(64),
              created_at: yield* DateTime.now
            })
            const since = DateTime.subtractDuration(yield* DateTime.now, week)
            const listed = yield* webhooks.listEndpointsOf({ userId: user.user.id, mode: "test" }, since)
            expect(listed.map(({ endpoint, failingDeliveries }) => [endpoint.id, failingDeliveries])).toEqual([
              [test, 3],
              [newer.id, 0]
            ])
            expect(listed[0]?.endpoint).toEqual(Option.getOrThrow(yield* webhooks.findEndpoint(test)))
            // The whole history counts when the window reaches back far enough.
            const all = yield* webhooks.listEndpointsOf({ userId: user.user.id, mode: "test" }, DateTime.unsafeMake(0))
            expect(all.map(({ failingDeliveries }) => failingDeliveries)).toEqual([4, 0])
            expect(yield* webhooks.listEndpointsOf({ userId: user.user.id, mode: "live" }, since)).toEqual([
              { endpoint: Option.getOrThrow(yield* webhooks.findEndpoint(live)), failingDeliveries: 0 }
            ])
            expect(yield* webhooks.listEndpointsOf({ userId: UserId.make(uuid()), mode: "test" }, since)).toEqual([])
            yield* webhooks.deleteEndpoint(newer.id)
          })))

      it.effect("a rotated secret signs every later claim, retries of earlier deliveries included; only the owner's", () =>
        withEndpoints(({ test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            yield* (yield* Emit).created(user, "test")
            const first = one(yield* claimAll)
            expect(Redacted.value(first.secret)).toBe("s".repeat(64))
            const now = yield* DateTime.now
            yield* webhooks.complete(first, attempt(now, { _tag: "retry", at: DateTime.addDuration(now, Duration.minutes(1)) }, 503))

            const other = yield* seedUser
            expect(yield* webhooks.rotateSecret(other.user.id, test, "b".repeat(64))).toEqual(Option.none())
            expect(yield* webhooks.rotateSecret(user.user.id, WebhookEndpointId.make(uuid()), "b".repeat(64))).toEqual(
              Option.none()
            )
            const rotated = yield* webhooks.rotateSecret(user.user.id, test, "a".repeat(64))
            expect(rotated).toEqual(yield* webhooks.findEndpoint(test))
            expect(Option.getOrThrow(rotated)).not.toHaveProperty("secret")

            yield* TestClock.adjust(Duration.minutes(1))
            const retry = one(yield* claimAll)
            expect(retry).toMatchObject({ id: first.id, failures: 1 })
            expect(Redacted.value(retry.secret)).toBe("a".repeat(64))
          })))

      it.effect("disabling fails pending and in-flight deliveries and writes no new ones; enabling delivers new events; idempotent, owner only", () =>
        withEndpoints(({ live, test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const emit = yield* Emit
            yield* emit.created(user, "test")
            const inFlight = one(yield* claimAll)
            yield* emit.created(user, "test")
            const [queued] = yield* webhooks.listDeliveries(test, 1)
            const at = yield* DateTime.now

            const other = yield* seedUser
            expect(yield* webhooks.setDisabled(other.user.id, test, at)).toEqual(Option.none())
            expect(yield* webhooks.setDisabled(user.user.id, WebhookEndpointId.make(uuid()), at)).toEqual(Option.none())
            expect(Option.getOrThrow(yield* webhooks.findEndpoint(test)).disabled_at).toBeNull()

            const disabled = Option.getOrThrow(yield* webhooks.setDisabled(user.user.id, test, at))
            expect(disabled.disabled_at).toEqual(at)
            expect(disabled).toEqual(Option.getOrThrow(yield* webhooks.findEndpoint(test)))
            expect(Option.getOrThrow(yield* webhooks.findEndpoint(live)).disabled_at).toBeNull()
            expect(Option.getOrThrow(yield* webhooks.findDelivery(queued?.id ?? DeliveryId.make(uuid())))).toMatchObject({
              status: "failed",
              attempts: 0,
              next_attempt_at: null
            })
            // The attempt in flight meanwhile: a retry becomes a failure.
            yield* webhooks.complete(inFlight, attempt(at, { _tag: "retry", at: DateTime.addDuration(at, Duration.minutes(1)) }, 503))
            expect(Option.getOrThrow(yield* webhooks.findDelivery(inFlight.id))).toMatchObject({ status: "failed", attempts: 1 })
            expect(yield* webhooks.resend(inFlight.id, at)).toBe(false)
            yield* emit.created(user, "test")
            expect(yield* webhooks.listDeliveries(test, 100)).toHaveLength(2)
            expect(yield* claimAll).toEqual([])

            // Disabling again keeps the first time.
            yield* TestClock.adjust("1 second")
            expect(Option.getOrThrow(yield* webhooks.setDisabled(user.user.id, test, yield* DateTime.now)).disabled_at).toEqual(at)

            expect(yield* webhooks.setDisabled(other.user.id, test, null)).toEqual(Option.none())
            expect(Option.getOrThrow(yield* webhooks.findEndpoint(test)).disabled_at).toEqual(at)
            const enabled = Option.getOrThrow(yield* webhooks.setDisabled(user.user.id, test, null))
            expect(enabled.disabled_at).toBeNull()
            expect(Option.getOrThrow(yield* webhooks.setDisabled(user.user.id, test, null)).disabled_at).toBeNull()
            // What failed meanwhile stays failed; new events are delivered again, and a resend is allowed.
            expect((yield* webhooks.listDeliveries(test, 100)).map((d) => d.status)).toEqual(["failed", "failed"])
            const { eventId: newEvent } = yield* emit.created(user, "test")
            const claimed = one(yield* claimAll)
            expect(claimed).toMatchObject({ endpointId: test, eventId: newEvent })
            expect(yield* webhooks.resend(inFlight.id, yield* DateTime.now)).toBe(true)
          })))

      it.effect("a test event is one delivery to its endpoint, sent as its envelope; another user's endpoint is not found, a disabled one refused", () =>
        withEndpoints(({ live, test, user }) =>
          Effect.gen(function*() {
            const webhooks = yield* WebhookRepository
            const now = yield* DateTime.now
            const event = yield* testEvent(user.user.id, test)
            const delivery = yield* webhooks.createTestDelivery(event)
            expect(delivery).toMatchObject({
              id: event.delivery_id,
              endpoint_id: test,
              event_id: event.id,
              type: "webhook.test",
              status: "pending",
              attempts: 0,
              last_status_code: null,
              next_attempt_at: now,
              created_at: now,
              history: []
            })
            expect(yield* webhooks.listDeliveries(test, 10)).toEqual([delivery])
            expect(yield* webhooks.findDelivery(delivery.id)).toEqual(Option.some(delivery))
            expect(yield* webhooks.listDeliveries(live, 10)).toEqual([])
            expect(yield* webhooks.nextDue).toEqual(Option.some(now))

            const claimed = one(yield* claimAll)
            expect(claimed).toMatchObject({ id: delivery.id, endpointId: test, eventId: event.id })
            expect(Redacted.value(claimed.secret)).toBe("s".repeat(64))
            const body: unknown = JSON.parse(claimed.body)
            expect(body).toEqual({
              id: event.id,
              type: "webhook.test",
              created_at: DateTime.formatIso(now),
              data: { endpoint_id: test, message: TEST_EVENT_MESSAGE }
            })
            expect(Object.keys(body ?? {})).toEqual(["id", "type", "created_at", "data"])
            yield* webhooks.complete(claimed, attempt(now, { _tag: "failed" }, 500))
            expect(yield* webhooks.resend(delivery.id, now)).toBe(true)
            expect(one(yield* claimAll).eventId).toBe(event.id)

            const other = yield* seedUser
            const refused = (userId: UserId, endpointId: WebhookEndpointId) =>
              Effect.flatMap(testEvent(userId, endpointId), (e) => Effect.flip(webhooks.createTestDelivery(e)))
            expect((yield* refused(other.user.id, test))._tag).toBe("WebhookEndpointNotFound")
            expect((yield* refused(user.user.id, WebhookEndpointId.make(uuid())))._tag).toBe("WebhookEndpointNotFound")
            yield* webhooks.setDisabled(user.user.id, live, now)
            expect((yield* refused(user.user.id, live))._tag).toBe("WebhookEndpointDisabled")
            expect(yield* webhooks.listDeliveries(live, 10)).toEqual([])
            expect(yield* webhooks.listDeliveries(test, 10)).toHaveLength(1)

            // Deleted with its endpoint.
            expect(yield* webhooks.deleteEndpoint(test)).toBe(true)
            expect(yield* webhooks.findDelivery(delivery.id)).toEqual(Option.none())
          })))
    })
  })
}

// Only the database can hold a pending delivery of a disabled endpoint: one written by an event's
// transaction while the endpoint was being disabled (in memory, disabling is atomic). It is set up
// here by disabling the endpoint's row directly, as that race leaves it.
for (const [name, backend] of sqlBackends) {
  layer(backend, { timeout: 60_000 })(`webhook claims and answers on ${name}`, (it) => {
    it.effect("a disabled endpoint's pending deliveries fail unsent, at most the claim's limit at a time; others are claimed", () =>
      withEndpoints(({ live, test, user }) =>
        Effect.gen(function*() {
          const webhooks = yield* WebhookRepository
          const emit = yield* Emit
          const sql = yield* SqlClient.SqlClient
          for (let i = 0; i < 3; i++) yield* emit.created(user, "test")
          yield* emit.created(user, "live")
          yield* sql`UPDATE webhook_endpoints SET disabled_at = now() WHERE id = ${test}`
          const statuses = Effect.map(webhooks.listDeliveries(test, 10), (deliveries) => deliveries.map((d) => d.status).sort())

          expect(yield* webhooks.claim(2, lease)).toMatchObject([{ endpointId: live }])
          expect(yield* statuses).toEqual(["failed", "failed", "pending"])
          // The one left is due, so that the worker comes back to fail it.
          const [left] = (yield* webhooks.listDeliveries(test, 10)).filter((d) => d.status === "pending")
          expect(yield* webhooks.nextDue).toEqual(Option.fromNullable(left?.next_attempt_at))
          expect(yield* claimAll).toEqual([])
          expect(yield* statuses).toEqual(["failed", "failed", "failed"])
          const failed = yield* webhooks.listDeliveries(test, 10)
          expect(failed.every((d) => d.attempts === 0 && d.next_attempt_at === null)).toBe(true)
        })))

    // Answers recorded together are the database's: in memory each is written at once.
    it.effect("answers recorded at once share one statement, each with its own outcome; a lost claim's is left out", () =>
      withEndpoints(({ user }) =>
        Effect.gen(function*() {
          const webhooks = yield* WebhookRepository
          const emit = yield* Emit
          for (let i = 0; i < 4; i++) yield* emit.created(user, "test")
          const claimed = yield* claimAll
          const [succeeded, retried, failed, lost] = [one(claimed, 0), one(claimed, 1), one(claimed, 2), one(claimed, 3)]
          const now = yield* DateTime.now
          const later = DateTime.addDuration(now, Duration.minutes(1))
          // Handed back and claimed again: the first claim of it is lost.
          yield* webhooks.release(lost, now)
          const again = one(yield* claimAll)
          expect(again.id).toBe(lost.id)

          const { batches, calls } = yield* batchesOf(
            "webhook_complete",
            Effect.all([
              webhooks.complete(succeeded, attempt(now, { _tag: "succeeded" }, 200)),
              webhooks.complete(retried, attempt(now, { _tag: "retry", at: later }, 503)),
              webhooks.complete(failed, attempt(now, { _tag: "failed" }, null)),
              webhooks.complete(lost, attempt(now, { _tag: "succeeded" }, 204))
            ], { concurrency: "unbounded" })
          )
          expect({ batches, calls }).toEqual({ batches: 1, calls: 4 })
          const found = (id: DeliveryId) => Effect.map(webhooks.findDelivery(id), Option.getOrThrow)
          /** A delivery after its one attempt, answered `code` (or not at all). */
          const afterOne = (status: string, code: number | null, next: DateTime.Utc | null, error: string | null) => ({
            status,
            attempts: 1,
            last_status_code: code,
            next_attempt_at: next,
            history: [{ attempted_at: now, status_code: code, error, duration_ms: 12 }]
          })
          expect(yield* found(succeeded.id)).toMatchObject(afterOne("succeeded", 200, null, null))
          expect(yield* found(retried.id)).toMatchObject(afterOne("pending", 503, later, null))
          expect(yield* found(failed.id)).toMatchObject(afterOne("failed", null, null, "connection refused"))
          expect(yield* found(lost.id)).toMatchObject({ status: "pending", attempts: 0, history: [] })

          // The claim that holds it now records its answer.
          yield* webhooks.complete(again, attempt(now, { _tag: "succeeded" }, 204))
          expect(yield* found(lost.id)).toMatchObject({ status: "succeeded", attempts: 1, last_status_code: 204 })
        })))
  })
}

// A transaction held open beside the repository's statements: PostgreSQL alone runs two at once.
layer(sqlBackends[1][1], { timeout: 60_000 })("webhook leases beside other transactions on PostgreSQL", (it) => {
  it.effect("a lease renewal skips a delivery whose row another transaction holds, and renews the others at once", () =>
    withEndpoints(({ user }) =>
      Effect.gen(function*() {
        const webhooks = yield* WebhookRepository
        const emit = yield* Emit
        const sql = yield* SqlClient.SqlClient
        for (let i = 0; i < 2; i++) yield* emit.created(user, "test")
        const claimed = yield* claimAll
        const [held, free] = [one(claimed, 0), one(claimed, 1)]
        const leases = sql<{ id: string; locked_until: Date }>`
          SELECT id, locked_until FROM webhook_deliveries WHERE id IN (${held.id}, ${free.id})`.pipe(
          Effect.map((rows) => new Map(rows.map((row) => [row.id, row.locked_until.getTime()])))
        )
        const before = yield* leases
        yield* TestClock.adjust(Duration.seconds(10))
        // The row is held as a recording of its answer holds it while it commits.
        const release = yield* heldOpen(sql`SELECT 1 FROM webhook_deliveries WHERE id = ${held.id} FOR UPDATE`)
        const waited = TestServices.provideLive(Effect.sleep("5 seconds")).pipe(
          Effect.zipRight(Effect.dieMessage("the renewal waited for the held row"))
        )
        yield* Effect.raceFirst(webhooks.extend([held, free], lease), waited).pipe(Effect.ensuring(release))
        const after = yield* leases
        expect(after.get(held.id)).toBe(before.get(held.id))
        expect(after.get(free.id)).toBe((before.get(free.id) ?? 0) + 10_000)
      })))
})
