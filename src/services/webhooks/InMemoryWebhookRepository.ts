import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Order from "effect/Order"
import * as Random from "effect/Random"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import { DeliveryId, type Mode, type UserId, type WebhookEndpointId } from "../../domain/Ids.js"
import {
  Delivery,
  DeliveryAttempt,
  type DeliveryStatus,
  type DeliveryType,
  type EventType,
  MAX_IN_FLIGHT_PER_ENDPOINT,
  WebhookEndpoint,
  WebhookEndpointDisabled,
  WebhookEndpointNotFound
} from "../../domain/Webhook.js"
import type { DueDelivery, WebhookRepository } from "./WebhookRepository.js"

/** An intent's state change, as the intents repository records it: `data` is the intent as GET shows it. */
export interface Event {
  readonly id: string
  readonly user_id: UserId
  readonly mode: Mode
  readonly type: EventType
  readonly data: unknown
  readonly created_at: DateTime.Utc
}

/**
 * Where events are written in memory: each becomes one pending delivery, due at once, for every
 * enabled endpoint of its user and mode that subscribes to its type (what the SQL transaction that
 * records an event does).
 */
export class Events extends Context.Tag("InMemoryWebhookRepository/Events")<Events, {
  readonly record: (event: Event) => Effect.Effect<void>
}>() {}

/** What a delivery carries: an intent's event, or a test event for its endpoint alone. */
interface Envelope {
  readonly id: string
  readonly type: DeliveryType
  readonly data: unknown
  readonly created_at: DateTime.Utc
}

interface StoredEndpoint {
  readonly endpoint: WebhookEndpoint
  readonly secret: string
}

interface StoredDelivery {
  readonly id: DeliveryId
  readonly endpointId: WebhookEndpointId
  readonly event: Envelope
  readonly status: DeliveryStatus
  readonly attempts: number
  readonly failures: number
  readonly claims: number
  readonly lastStatusCode: number | null
  readonly nextAttemptAt: DateTime.Utc | null
  readonly lockedUntil: DateTime.Utc | null
  readonly history: ReadonlyArray<DeliveryAttempt>
}

interface State {
  readonly endpoints: ReadonlyMap<string, StoredEndpoint>
  readonly deliveries: ReadonlyMap<string, StoredDelivery>
}

const byCreation = Order.combine(
  Order.mapInput(DateTime.Order, (e: WebhookEndpoint) => e.created_at),
  Order.mapInput(Order.string, (e: WebhookEndpoint) => e.id)
)

const newestFirst = Order.reverse(Order.combine(
  Order.mapInput(DateTime.Order, (d: StoredDelivery) => d.event.created_at),
  Order.mapInput(Order.string, (d: StoredDelivery) => d.id)
))

/** Due order: the claim's, the same for every endpoint. */
const earliestDue = Order.combine(
  Order.mapInput(DateTime.Order, (d: StoredDelivery) => d.nextAttemptAt ?? DateTime.unsafeMake(0)),
  Order.mapInput(Order.string, (d: StoredDelivery) => d.id)
)

const isPending = (d: StoredDelivery) => d.status === "pending"
const isFailedAttempt = (a: DeliveryAttempt) => a.status_code === null || a.status_code < 200 || a.status_code >= 300
/** `failed`, or `pending` with at least one failed attempt. */
const isFailing = (d: StoredDelivery) => d.status === "failed" || (isPending(d) && d.history.some(isFailedAttempt))
const isHeld = (d: StoredDelivery, at: DateTime.Utc) =>
  d.lockedUntil !== null && DateTime.greaterThanOrEqualTo(d.lockedUntil, at)
const isDue = (d: StoredDelivery, at: DateTime.Utc) =>
  isPending(d) && d.nextAttemptAt !== null && DateTime.lessThanOrEqualTo(d.nextAttemptAt, at) &&
  (d.lockedUntil === null || DateTime.lessThan(d.lockedUntil, at))

/** Per endpoint, its deliveries held under an unexpired lease. */
const busy = (deliveries: Iterable<StoredDelivery>, at: DateTime.Utc) => {
  const held = new Map<string, number>()
  for (const d of deliveries) {
    if (isPending(d) && isHeld(d, at)) held.set(d.endpointId, (held.get(d.endpointId) ?? 0) + 1)
  }
  return held
}

/** A version 4 UUID from `Random`, so that a seeded test is deterministic. */
const uuid = Effect.map(
  Effect.all(Array.from({ length: 16 }, () => Random.nextIntBetween(0, 256))),
  (bytes) => {
    bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40
    bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80
    const hex = bytes.map((byte) => byte.toString(16).padStart(2, "0")).join("")
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  }
)

const toDelivery = (d: StoredDelivery) =>
  new Delivery({
    id: d.id,
    endpoint_id: d.endpointId,
    event_id: d.event.id,
    type: d.event.type,
    status: d.status,
    attempts: d.attempts,
    last_status_code: d.lastStatusCode,
    next_attempt_at: d.status === "pending" ? d.nextAttemptAt : null,
    created_at: d.event.created_at,
    history: d.history
  })

/** A new pending delivery of `event` to `endpointId`, due when the event was written. */
const pending = (id: DeliveryId, endpointId: WebhookEndpointId, event: Envelope): StoredDelivery => ({
  id,
  endpointId,
  event,
  status: "pending",
  attempts: 0,
  failures: 0,
  claims: 0,
  lastStatusCode: null,
  nextAttemptAt: event.created_at,
  lockedUntil: null,
  history: []
})

/** Milliseconds, as the database keeps them. */
const truncate = (at: DateTime.Utc) => DateTime.unsafeMake(DateTime.toEpochMillis(at))

/**
 * Endpoints and deliveries in memory, held to the SQL repository by the same contract suite:
 * leases, the per-endpoint in-flight cap, retries and a 410's consequences alike.
 */
export const makeWithEvents = Effect.gen(function*() {
  const state = yield* Ref.make<State>({ endpoints: new Map(), deliveries: new Map() })

  const update = <A>(f: (deliveries: Map<string, StoredDelivery>, endpoints: Map<string, StoredEndpoint>) => A) =>
    Ref.modify(state, (s): [A, State] => {
      const deliveries = new Map(s.deliveries)
      const endpoints = new Map(s.endpoints)
      return [f(deliveries, endpoints), { deliveries, endpoints }]
    })

  const isEnabled = (endpoints: ReadonlyMap<string, StoredEndpoint>, id: string) =>
    endpoints.get(id)?.endpoint.disabled_at === null

  /** Disables an endpoint at `at` (kept if it already was) and fails its pending deliveries, as a 410 does. */
  const disable = (
    deliveries: Map<string, StoredDelivery>,
    endpoints: Map<string, StoredEndpoint>,
    stored: StoredEndpoint,
    at: DateTime.Utc
  ) => {
    const endpoint = new WebhookEndpoint({ ...stored.endpoint, disabled_at: stored.endpoint.disabled_at ?? at })
    endpoints.set(endpoint.id, { ...stored, endpoint })
    for (const d of [...deliveries.values()]) {
      if (d.endpointId === endpoint.id && isPending(d)) deliveries.set(d.id, { ...d, status: "failed", nextAttemptAt: null })
    }
    return endpoint
  }

  /** The endpoint `id` if it is `userId`'s. */
  const owned = (endpoints: ReadonlyMap<string, StoredEndpoint>, userId: UserId, id: WebhookEndpointId) =>
    Option.filter(Option.fromNullable(endpoints.get(id)), (stored) => stored.endpoint.user_id === userId)

  const events = Events.of({
    record: (event) =>
      Effect.gen(function*() {
        const { endpoints } = yield* Ref.get(state)
        const subscribed = [...endpoints.values()].filter(({ endpoint }) =>
          endpoint.user_id === event.user_id && endpoint.mode === event.mode && endpoint.disabled_at === null &&
          endpoint.events.includes(event.type)
        )
        const stored = { ...event, created_at: truncate(event.created_at) }
        const made = yield* Effect.forEach(
          subscribed,
          ({ endpoint }) => Effect.map(uuid, (id) => pending(DeliveryId.make(id), endpoint.id, stored))
        )
        yield* update((deliveries) => made.forEach((delivery) => deliveries.set(delivery.id, delivery)))
      })
  })

  const repository = identity<Context.Tag.Service<typeof WebhookRepository>>({
    createEndpoint: ({ secret, ...input }) => {
      const endpoint = new WebhookEndpoint({ ...input, created_at: truncate(input.created_at), disabled_at: null })
      return Effect.as(update((_, endpoints) => endpoints.set(endpoint.id, { endpoint, secret })), endpoint)
    },

    listEndpoints: (userId) =>
      Effect.map(Ref.get(state), (s) =>
        [...s.endpoints.values()].map(({ endpoint }) => endpoint).filter((e) => e.user_id === userId).sort(byCreation)),

    findEndpoint: (id) => Effect.map(Ref.get(state), (s) => Option.fromNullable(s.endpoints.get(id)?.endpoint)),

    listEndpointsOf: (owner, since) =>
      Effect.map(Ref.get(state), (s) => {
        const deliveries = [...s.deliveries.values()]
        return [...s.endpoints.values()]
          .map(({ endpoint }) => endpoint)
          .filter((e) => e.user_id === owner.userId && e.mode === owner.mode)
          .sort(byCreation)
          .map((endpoint) => ({
            endpoint,
            failingDeliveries: deliveries.filter((d) =>
              d.endpointId === endpoint.id && DateTime.greaterThanOrEqualTo(d.event.created_at, since) && isFailing(d)
            ).length
          }))
      }),

    rotateSecret: (userId, id, secret) =>
      update((_, endpoints) =>
        Option.map(owned(endpoints, userId, id), (stored) => {
          endpoints.set(id, { ...stored, secret })
          return stored.endpoint
        })
      ),

    setDisabled: (userId, id, at) =>
      update((deliveries, endpoints) =>
        Option.map(owned(endpoints, userId, id), (stored) => {
          if (at !== null) return disable(deliveries, endpoints, stored, truncate(at))
          const endpoint = new WebhookEndpoint({ ...stored.endpoint, disabled_at: null })
          endpoints.set(id, { ...stored, endpoint })
          return endpoint
        })
      ),

    createTestDelivery: (event) =>
      Effect.gen(function*() {
        const made = pending(event.delivery_id, event.endpoint_id, {
          id: event.id,
          type: "webhook.test",
          data: event.data,
          created_at: truncate(event.created_at)
        })
        // Checked and written in one update, as the SQL statement does under its lock.
        const outcome = yield* update((deliveries, endpoints) => {
          const stored = owned(endpoints, event.user_id, event.endpoint_id)
          if (Option.isNone(stored)) return "not_found" as const
          if (stored.value.endpoint.disabled_at !== null) return "disabled" as const
          deliveries.set(made.id, made)
          return "created" as const
        })
        if (outcome === "not_found") return yield* new WebhookEndpointNotFound()
        if (outcome === "disabled") return yield* new WebhookEndpointDisabled()
        return toDelivery(made)
      }),

    deleteEndpoint: (id) =>
      update((deliveries, endpoints) => {
        for (const d of [...deliveries.values()]) if (d.endpointId === id) deliveries.delete(d.id)
        return endpoints.delete(id)
      }),

    listDeliveries: (endpointId, limit) =>
      Effect.map(Ref.get(state), (s) =>
        [...s.deliveries.values()].filter((d) => d.endpointId === endpointId).sort(newestFirst).slice(0, limit).map(
          toDelivery
        )),

    findDelivery: (id) => Effect.map(Ref.get(state), (s) => Option.map(Option.fromNullable(s.deliveries.get(id)), toDelivery)),

    resend: (id, at) =>
      update((deliveries, endpoints) => {
        const d = deliveries.get(id)
        if (d === undefined || !isEnabled(endpoints, d.endpointId)) return false
        deliveries.set(id, { ...d, status: "pending", failures: 0, nextAttemptAt: truncate(at) })
        return true
      }),

    claim: (limit, lease) =>
      Effect.flatMap(DateTime.now, (now) => {
        const at = truncate(now)
        const until = DateTime.addDuration(at, lease)
        return update((deliveries, endpoints) => {
          const held = busy(deliveries.values(), at)
          const due = [...deliveries.values()].filter((d) => isDue(d, at)).sort(earliestDue)
          // A disabled endpoint's due deliveries fail, unsent.
          for (const d of due) {
            if (!isEnabled(endpoints, d.endpointId)) {
              deliveries.set(d.id, { ...d, status: "failed", nextAttemptAt: null })
            }
          }
          const claimed: Array<DueDelivery> = []
          for (const d of due) {
            if (claimed.length >= limit) break
            const endpoint = endpoints.get(d.endpointId)
            if (endpoint === undefined || endpoint.endpoint.disabled_at !== null) continue
            const inFlight = held.get(d.endpointId) ?? 0
            if (inFlight >= MAX_IN_FLIGHT_PER_ENDPOINT) continue
            held.set(d.endpointId, inFlight + 1)
            const claims = d.claims + 1
            deliveries.set(d.id, { ...d, claims, lockedUntil: until })
            claimed.push({
              id: d.id,
              claims,
              failures: d.failures,
              endpointId: d.endpointId,
              url: endpoint.endpoint.url,
              mode: endpoint.endpoint.mode,
              secret: Redacted.make(endpoint.secret),
              eventId: d.event.id,
              body: JSON.stringify({
                id: d.event.id,
                type: d.event.type,
                created_at: DateTime.formatIso(d.event.created_at),
                data: d.event.data
              })
            })
          }
          return claimed
        })
      }),

    nextDue: Effect.flatMap(DateTime.now, (now) =>
      Effect.map(Ref.get(state), (s) => {
        const at = truncate(now)
        const held = busy(s.deliveries.values(), at)
        const times = [...s.deliveries.values()].flatMap((d) => {
          if (!isPending(d)) return []
          if (d.lockedUntil !== null && isHeld(d, at)) return [d.lockedUntil]
          return (held.get(d.endpointId) ?? 0) < MAX_IN_FLIGHT_PER_ENDPOINT && d.nextAttemptAt !== null
            ? [d.nextAttemptAt]
            : []
        })
        return Option.map(Option.fromNullable(times[0]), (first) => times.reduce(DateTime.min, first))
      })),

    extend: (claimed, lease) =>
      Effect.flatMap(DateTime.now, (now) =>
        update((deliveries) => {
          const until = DateTime.addDuration(truncate(now), lease)
          for (const { claims, id } of claimed) {
            const d = deliveries.get(id)
            if (d !== undefined && d.claims === claims && d.lockedUntil !== null) {
              deliveries.set(id, { ...d, lockedUntil: until })
            }
          }
        })),

    complete: (delivery, result) =>
      update((deliveries, endpoints) => {
        const d = deliveries.get(delivery.id)
        if (d === undefined || d.claims !== delivery.claims || d.lockedUntil === null) return
        const at = truncate(result.at)
        const next = result.next
        // An attempt that would be retried fails instead once its endpoint is disabled.
        const enabled = isEnabled(endpoints, d.endpointId)
        deliveries.set(d.id, {
          ...d,
          attempts: d.attempts + 1,
          lastStatusCode: result.statusCode,
          status: !enabled ? "failed" : next._tag === "succeeded" ? "succeeded" : next._tag === "retry" ? "pending" : "failed",
          failures: d.failures + (next._tag === "succeeded" ? 0 : 1),
          nextAttemptAt: enabled && next._tag === "retry" ? truncate(next.at) : null,
          lockedUntil: null,
          history: [
            ...d.history,
            new DeliveryAttempt({
              attempted_at: at,
              status_code: result.statusCode,
              error: result.error,
              duration_ms: Math.round(result.durationMs)
            })
          ]
        })
        const stored = endpoints.get(d.endpointId)
        if (next._tag !== "gone" || stored === undefined || stored.endpoint.disabled_at !== null) return
        disable(deliveries, endpoints, stored, at)
      }),

    release: (delivery, at) =>
      update((deliveries) => {
        const d = deliveries.get(delivery.id)
        if (d !== undefined && d.claims === delivery.claims) {
          deliveries.set(d.id, { ...d, lockedUntil: null, nextAttemptAt: truncate(at) })
        }
      })
  })

  return { repository, events }
})

export const make = Effect.map(makeWithEvents, ({ repository }) => repository)
