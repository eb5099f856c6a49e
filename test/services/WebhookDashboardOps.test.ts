import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { DeliveryId, type UserId, WebhookEndpointId } from "../../src/domain/Ids.js"
import { CreateIntentPayload } from "../../src/domain/Intent.js"
import { type Delivery, TEST_EVENT_MESSAGE } from "../../src/domain/Webhook.js"
import { Operators } from "../../src/services/accounts/Operators.js"
import { Events } from "../../src/services/events/Events.js"
import { Intents } from "../../src/services/intents/Intents.js"
import { Webhooks } from "../../src/services/webhooks/Webhooks.js"
import * as Services from "../../src/Services.js"
import { WEBHOOK_CHANNEL } from "../../src/sql/Channels.js"
import * as Database from "../../src/sql/Database.js"
import * as WebhookWorker from "../../src/workers/WebhookWorker.js"
import { uuid } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"
import { isGenuine, type Received, receiver, type Responder, until } from "../support/Receiver.js"

/**
 * The webhook use cases below HTTP with the real delivery worker, on each database. A failed attempt
 * is retried an hour later, so that a delivery stays pending until a test makes its retry due.
 */
const service = <E, R>(database: Layer.Layer<SqlClient.SqlClient | Database.Notifications, E, R>) =>
  WebhookWorker.layer({ retryDelays: [Duration.hours(1)], timeout: Duration.seconds(5), pollInterval: Duration.hours(1) })
    .pipe(
      Layer.provideMerge(Services.withPorts(Services.ports({ credentialsKey: Option.none() }))),
      Layer.provideMerge(database),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )

const backends = [
  ["PGlite", service(Database.migrated(Database.pglite(undefined)))],
  ["PostgreSQL", service(Postgres.layerFresh)]
] as const

/** A received webhook's body, as the signature covers it. */
const Envelope = Schema.parseJson(Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  created_at: Schema.String,
  data: Schema.Unknown
}))
const envelope = (body: string) => Schema.decodeUnknownSync(Envelope)(body)

/** A user with a mock broker connection, and an endpoint of theirs at a fresh local receiver. */
const userWithEndpoint = (responder?: Responder) =>
  Effect.gen(function*() {
    const operators = yield* Operators
    const user = yield* operators.createUser({ name: "Ada", tier: "free" })
    const broker = yield* operators.createBroker(user.id, { name: "mock", kind: "mock", mode: "test" })
    const { endpoint, hooks, secret } = yield* endpointOf(user.id, responder)
    return { userId: user.id, brokerId: broker.id, endpoint, hooks, secret }
  }).pipe(Effect.orDie)

/** A test-mode endpoint of `userId` at a fresh local receiver. */
const endpointOf = (userId: UserId, responder?: Responder) =>
  Effect.gen(function*() {
    const hooks = yield* receiver(responder)
    const { endpoint, secret } = yield* (yield* Webhooks).createEndpoint(userId, { url: hooks.url, mode: "test" })
    return { endpoint, hooks, secret }
  }).pipe(Effect.orDie)

/** Creates a market intent, which writes its `intent.created` event; returns the intent's id. */
const createIntent = (userId: UserId, brokerId: string) =>
  Effect.flatMap(Intents, (intents) =>
    intents.create(
      { userId, mode: "test", intentsPerMonth: 100 },
      Schema.decodeUnknownSync(CreateIntentPayload)({
        intent_id: `ext-${uuid()}`,
        symbol: "AAPL",
        side: "buy",
        quantity: 1,
        order_type: "market",
        broker_id: brokerId
      })
    )).pipe(Effect.map((intent) => intent.id), Effect.orDie)

/** The endpoint's deliveries (as its owner sees them) once `done` holds for them: delivery runs in the background. */
const deliveriesWhen = (
  userId: UserId,
  endpointId: WebhookEndpointId,
  done: (items: ReadonlyArray<Delivery>) => boolean
) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    for (let i = 0; i < 750; i++) {
      const items = yield* webhooks.listDeliveries(endpointId, 100, userId).pipe(Effect.orDie)
      if (done(items)) return items
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage("deliveries did not settle")
  })

/** The delivery's retry falls due now, as when its hour has passed, and the workers are told. */
const retryNow = (deliveryId: DeliveryId) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE webhook_deliveries SET next_attempt_at = ${new Date()} WHERE id = ${deliveryId} AND status = 'pending'`
    yield* sql`SELECT pg_notify(${WEBHOOK_CHANNEL}, 'due')`
  }).pipe(Effect.orDie)

const only = <A>(items: ReadonlyArray<A>): A => {
  expect(items).toHaveLength(1)
  const [item] = items
  if (item === undefined) throw new Error("expected one item")
  return item
}

const receivedIds = (hooks: { readonly received: ReadonlyArray<Received> }) => hooks.received.map((r) => envelope(r.body).id)

for (const [name, backend] of backends) {
  layer(backend, { timeout: 60_000, excludeTestServices: true })(`dashboard webhook operations on ${name}`, (it) => {
    describe("ownership", () => {
      it.scoped("another user's endpoint or delivery is not found, like an unknown id, by every operation, and stays as it was", () =>
        Effect.gen(function*() {
          const webhooks = yield* Webhooks
          const ada = yield* userWithEndpoint()
          const bob = (yield* userWithEndpoint()).userId
          const endpointId = ada.endpoint.id
          yield* createIntent(ada.userId, ada.brokerId)
          const delivery = only(yield* deliveriesWhen(ada.userId, endpointId, (items) => items[0]?.status === "succeeded"))

          for (const id of [endpointId, WebhookEndpointId.make(uuid())]) {
            const refusals: ReadonlyArray<Effect.Effect<unknown, { readonly _tag: string }>> = [
              webhooks.deleteEndpoint(id, bob),
              webhooks.listDeliveries(id, 10, bob),
              webhooks.rotateSecret(bob, id),
              webhooks.setEnabled(bob, id, false),
              webhooks.setEnabled(bob, id, true),
              webhooks.sendTestEvent(bob, id)
            ]
            for (const refusal of refusals) expect((yield* Effect.flip(refusal))._tag).toBe("WebhookEndpointNotFound")
          }
          for (const id of [delivery.id, DeliveryId.make(uuid())]) {
            expect((yield* Effect.flip(webhooks.resend(id, bob)))._tag).toBe("DeliveryNotFound")
          }
          expect((yield* webhooks.listEndpointsOf({ userId: bob, mode: "test" })).map(({ endpoint }) => endpoint.id))
            .not.toContain(endpointId)

          // Nothing changed: still enabled, the one delivery neither re-sent nor joined by a test event,
          // and the next event signed with the secret it had.
          const [listed] = yield* webhooks.listEndpointsOf({ userId: ada.userId, mode: "test" })
          expect(listed).toEqual({ endpoint: ada.endpoint, failingDeliveries: 0 })
          expect(yield* webhooks.listDeliveries(endpointId, 10, ada.userId)).toEqual([delivery])
          expect(ada.hooks.received).toHaveLength(1)
          yield* createIntent(ada.userId, ada.brokerId)
          yield* until(() => ada.hooks.received.length >= 2)
          expect(ada.hooks.received.every((request) => isGenuine(request, ada.secret))).toBe(true)

          // The owner reaches all of it; the operator (no user) too.
          expect(yield* webhooks.listDeliveries(endpointId, 10)).toHaveLength(2)
          const resent = yield* webhooks.resend(delivery.id, ada.userId)
          expect(resent).toMatchObject({ id: delivery.id, status: "pending" })
          yield* until(() => ada.hooks.received.length >= 3)
          expect(receivedIds(ada.hooks)[2]).toBe(delivery.event_id)
          yield* webhooks.deleteEndpoint(endpointId, ada.userId)
          expect((yield* Effect.flip(webhooks.listDeliveries(endpointId, 10, ada.userId)))._tag).toBe("WebhookEndpointNotFound")
          expect((yield* Effect.flip(webhooks.deleteEndpoint(endpointId, ada.userId)))._tag).toBe("WebhookEndpointNotFound")
        }))
    })

    describe("secrets", () => {
      it.scoped("after a rotation, the retry of a delivery made before it is signed with the new secret", () =>
        Effect.gen(function*() {
          const webhooks = yield* Webhooks
          const ada = yield* userWithEndpoint((_, n) => (n === 1 ? 503 : 200))
          yield* createIntent(ada.userId, ada.brokerId)
          const failed = only(
            yield* deliveriesWhen(ada.userId, ada.endpoint.id, ([d]) => d?.status === "pending" && d.attempts === 1)
          )
          const [first] = ada.hooks.received
          expect(first !== undefined && isGenuine(first, ada.secret)).toBe(true)

          const rotated = yield* webhooks.rotateSecret(ada.userId, ada.endpoint.id)
          expect(rotated.secret).toMatch(/^[0-9a-f]{64}$/)
          expect(rotated.secret).not.toBe(ada.secret)
          expect(rotated.endpoint).toEqual(ada.endpoint)

          yield* retryNow(failed.id)
          const [done] = yield* deliveriesWhen(ada.userId, ada.endpoint.id, ([d]) => d?.status === "succeeded")
          expect(done?.history.map((a) => a.status_code)).toEqual([503, 200])
          const retry = ada.hooks.received[1]
          if (retry === undefined) throw new Error("expected the retry")
          expect(envelope(retry.body).id).toBe(failed.event_id)
          expect(isGenuine(retry, rotated.secret)).toBe(true)
          expect(isGenuine(retry, ada.secret)).toBe(false)
        }))
    })

    describe("disabling", () => {
      it.scoped("a disabled endpoint gets nothing and its pending delivery fails; enabled, it gets new events again", () =>
        Effect.gen(function*() {
          const webhooks = yield* Webhooks
          const ada = yield* userWithEndpoint(() => 503)
          // Another endpoint of the same user: it shows when an event has been handed out.
          const witness = yield* endpointOf(ada.userId)
          yield* createIntent(ada.userId, ada.brokerId)
          const pending = only(
            yield* deliveriesWhen(ada.userId, ada.endpoint.id, ([d]) => d?.status === "pending" && d.attempts === 1)
          )

          const disabled = yield* webhooks.setEnabled(ada.userId, ada.endpoint.id, false)
          expect(disabled.disabled_at).not.toBeNull()
          expect(yield* webhooks.setEnabled(ada.userId, ada.endpoint.id, false)).toEqual(disabled)
          expect(yield* webhooks.listDeliveries(ada.endpoint.id, 10, ada.userId)).toEqual([
            expect.objectContaining({ id: pending.id, status: "failed", attempts: 1, next_attempt_at: null })
          ])
          const refused = yield* Effect.flip(webhooks.resend(pending.id, ada.userId))
          expect(refused._tag).toBe("WebhookEndpointDisabled")
          expect(refused.detail).toContain("enable it")
          expect((yield* Effect.flip(webhooks.sendTestEvent(ada.userId, ada.endpoint.id)))._tag).toBe("WebhookEndpointDisabled")
          const listed = yield* webhooks.listEndpointsOf({ userId: ada.userId, mode: "test" })
          expect(listed).toHaveLength(2)
          expect(listed).toEqual(expect.arrayContaining([
            { endpoint: disabled, failingDeliveries: 1 },
            { endpoint: witness.endpoint, failingDeliveries: 0 }
          ]))

          // An event while disabled reaches the witness, and is never made a delivery to this endpoint.
          ada.hooks.respond(() => 200)
          yield* createIntent(ada.userId, ada.brokerId)
          yield* until(() => witness.hooks.received.length >= 2)
          const whileDisabled = receivedIds(witness.hooks)[1]
          expect((yield* webhooks.listDeliveries(ada.endpoint.id, 10, ada.userId)).map((d) => d.event_id)).toEqual([
            pending.event_id
          ])
          expect(receivedIds(ada.hooks)).not.toContain(whileDisabled)

          const enabled = yield* webhooks.setEnabled(ada.userId, ada.endpoint.id, true)
          expect(enabled.disabled_at).toBeNull()
          expect(yield* webhooks.setEnabled(ada.userId, ada.endpoint.id, true)).toEqual(enabled)
          const [stillFailed] = yield* webhooks.listDeliveries(ada.endpoint.id, 10, ada.userId)
          expect(stillFailed).toMatchObject({ id: pending.id, status: "failed" })

          yield* createIntent(ada.userId, ada.brokerId)
          yield* until(() => witness.hooks.received.length >= 3)
          const afterEnabling = receivedIds(witness.hooks)[2]
          yield* until(() => receivedIds(ada.hooks).includes(afterEnabling ?? ""))
          // What failed meanwhile can be re-sent.
          yield* webhooks.resend(pending.id, ada.userId)
          const settled = yield* deliveriesWhen(ada.userId, ada.endpoint.id, (items) =>
            items.length === 2 && items.every((d) => d.status === "succeeded"))
          expect(settled.map((d) => d.event_id).sort()).toEqual([pending.event_id, afterEnabling].sort())
          expect(receivedIds(ada.hooks)).not.toContain(whileDisabled)
          expect(ada.hooks.received.every((request) => isGenuine(request, ada.secret))).toBe(true)
        }))
    })

    describe("test events", () => {
      it.scoped("a test event reaches its endpoint only, signed, as webhook.test, and is not in the events feed", () =>
        Effect.gen(function*() {
          const webhooks = yield* Webhooks
          const events = yield* Events
          const ada = yield* userWithEndpoint()
          const sibling = yield* endpointOf(ada.userId)
          const bob = yield* userWithEndpoint()
          const intentId = yield* createIntent(ada.userId, ada.brokerId)
          yield* until(() => ada.hooks.received.length >= 1 && sibling.hooks.received.length >= 1)

          const before = yield* DateTime.now
          const delivery = yield* webhooks.sendTestEvent(ada.userId, ada.endpoint.id)
          expect(delivery).toMatchObject({
            endpoint_id: ada.endpoint.id,
            type: "webhook.test",
            status: "pending",
            attempts: 0,
            history: []
          })
          expect(delivery.event_id).toMatch(/^evt_[0-9a-f]{32}$/)
          expect(DateTime.greaterThanOrEqualTo(delivery.created_at, before)).toBe(true)

          yield* until(() => ada.hooks.received.length >= 2)
          const request = ada.hooks.received[1]
          if (request === undefined) throw new Error("expected the test event")
          expect(isGenuine(request, ada.secret)).toBe(true)
          expect(request.headers["sr-event-id"]).toBe(delivery.event_id)
          const body: unknown = JSON.parse(request.body)
          expect(body).toEqual({
            id: delivery.event_id,
            type: "webhook.test",
            created_at: DateTime.formatIso(delivery.created_at),
            data: { endpoint_id: ada.endpoint.id, message: TEST_EVENT_MESSAGE }
          })
          expect(Object.keys(body ?? {})).toEqual(["id", "type", "created_at", "data"])
          const listed = yield* deliveriesWhen(ada.userId, ada.endpoint.id, (items) =>
            items.some((d) => d.id === delivery.id && d.status === "succeeded"))
          expect(listed.map((d) => d.type).sort()).toEqual(["intent.created", "webhook.test"])

          // No other endpoint has it, of this user or another.
          expect((yield* webhooks.listDeliveries(sibling.endpoint.id, 10, ada.userId)).map((d) => d.type)).toEqual([
            "intent.created"
          ])
          expect(yield* webhooks.listDeliveries(bob.endpoint.id, 10, bob.userId)).toEqual([])
          expect(receivedIds(sibling.hooks)).not.toContain(delivery.event_id)
          expect(bob.hooks.received).toEqual([])

          // Nor does the events feed, whose only event is the intent's. The feed shows an event once
          // every transaction older than it has ended, on the whole server: other test files'
          // transactions may hold it back a moment.
          const owner = { userId: ada.userId, mode: "test" as const }
          const page = yield* events.page(owner, { limit: 100 }).pipe(
            Effect.repeat(Schedule.spaced("50 millis").pipe(
              Schedule.upTo("10 seconds"),
              Schedule.whileInput((shown: Effect.Effect.Success<ReturnType<typeof events.page>>) => shown.items.length === 0),
              Schedule.passthrough
            ))
          )
          const feed = page.items.map((item) => envelope(item.json))
          expect(feed.map((event) => event.type)).toEqual(["intent.created"])
          expect(feed.map((event) => event.id)).not.toContain(delivery.event_id)
          expect(feed[0]?.data).toMatchObject({ id: intentId })
          expect((yield* Effect.flip(events.get(owner, delivery.event_id)))._tag).toBe("EventNotFound")

          // Re-sent like any delivery: the same event again.
          yield* webhooks.resend(delivery.id, ada.userId)
          yield* until(() => ada.hooks.received.length >= 3)
          const again = ada.hooks.received[2]
          expect(again !== undefined && isGenuine(again, ada.secret)).toBe(true)
          expect(receivedIds(ada.hooks)[2]).toBe(delivery.event_id)
        }))

      it.scoped("a test event after a rotation is signed with the new secret", () =>
        Effect.gen(function*() {
          const webhooks = yield* Webhooks
          const ada = yield* userWithEndpoint()
          const { secret } = yield* webhooks.rotateSecret(ada.userId, ada.endpoint.id)
          const delivery = yield* webhooks.sendTestEvent(ada.userId, ada.endpoint.id)
          yield* until(() => ada.hooks.received.length >= 1)
          const request = only(ada.hooks.received)
          expect(envelope(request.body).id).toBe(delivery.event_id)
          expect(isGenuine(request, secret)).toBe(true)
          expect(isGenuine(request, ada.secret)).toBe(false)
        }))
    })
  })
}
