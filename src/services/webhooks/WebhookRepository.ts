import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import type { DeliveryId, Mode, Owner, UserId, WebhookEndpointId } from "../../domain/Ids.js"
import type {
  Delivery,
  EventType,
  TestEventData,
  WebhookEndpoint,
  WebhookEndpointDisabled,
  WebhookEndpointNotFound
} from "../../domain/Webhook.js"
import * as InMemoryWebhookRepository from "./InMemoryWebhookRepository.js"
import * as SqlWebhookRepository from "./SqlWebhookRepository.js"

export interface NewEndpoint {
  readonly id: WebhookEndpointId
  readonly user_id: UserId
  readonly url: string
  readonly mode: Mode
  readonly events: ReadonlyArray<EventType>
  readonly secret: string
  readonly created_at: DateTime.Utc
}

/** An endpoint with the number of its recent deliveries that are failing. */
export interface EndpointHealth {
  readonly endpoint: WebhookEndpoint
  /** Deliveries created since the given time that are `failed`, or `pending` with at least one failed attempt. */
  readonly failingDeliveries: number
}

/** A `webhook.test` event for one endpoint of `user_id`, and the id of its one delivery. */
export interface NewTestEvent {
  readonly id: string
  readonly delivery_id: DeliveryId
  readonly endpoint_id: WebhookEndpointId
  readonly user_id: UserId
  readonly data: TestEventData
  readonly created_at: DateTime.Utc
}

/** A claimed delivery with everything needed to send it; `claims` fences a worker that lost its lease. */
export interface DueDelivery {
  readonly id: DeliveryId
  readonly claims: number
  /** Failed attempts since the delivery was created or re-sent: the step of the retry schedule. */
  readonly failures: number
  readonly endpointId: WebhookEndpointId
  readonly url: string
  readonly mode: Mode
  readonly secret: Redacted.Redacted<string>
  readonly eventId: string
  /** The envelope `{id, type, created_at, data}`, exactly the bytes to sign and send. */
  readonly body: string
}

/** What one POST achieved, and what follows from it. */
export interface AttemptResult {
  readonly at: DateTime.Utc
  readonly statusCode: number | null
  readonly error: string | null
  readonly durationMs: number
  /** `retry`: due again at `at`; `gone`: the endpoint answered 410 and is disabled with its pending deliveries. */
  readonly next:
    | { readonly _tag: "succeeded" }
    | { readonly _tag: "retry"; readonly at: DateTime.Utc }
    | { readonly _tag: "failed" }
    | { readonly _tag: "gone" }
}

/** Webhook endpoints and the deliveries of events to them. */
export class WebhookRepository extends Context.Tag("WebhookRepository")<WebhookRepository, {
  readonly createEndpoint: (endpoint: NewEndpoint) => Effect.Effect<WebhookEndpoint>
  readonly listEndpoints: (userId: UserId) => Effect.Effect<ReadonlyArray<WebhookEndpoint>>
  readonly findEndpoint: (id: WebhookEndpointId) => Effect.Effect<Option.Option<WebhookEndpoint>>
  /** A user's endpoints of one mode, oldest first, each with its deliveries created since `since` that are failing. */
  readonly listEndpointsOf: (owner: Owner, since: DateTime.Utc) => Effect.Effect<ReadonlyArray<EndpointHealth>>
  /** Replaces the secret of `userId`'s endpoint: every claim from then on signs with it. None if not theirs. */
  readonly rotateSecret: (
    userId: UserId,
    id: WebhookEndpointId,
    secret: string
  ) => Effect.Effect<Option.Option<WebhookEndpoint>>
  /**
   * Disables `userId`'s endpoint at `at` (kept if already disabled), failing its pending deliveries as a
   * 410 does, or enables it (`at` null): events written from then on are delivered. None if not theirs.
   */
  readonly setDisabled: (
    userId: UserId,
    id: WebhookEndpointId,
    at: DateTime.Utc | null
  ) => Effect.Effect<Option.Option<WebhookEndpoint>>
  /** Writes a test event and its one delivery, due now, to `userId`'s enabled endpoint. */
  readonly createTestDelivery: (
    event: NewTestEvent
  ) => Effect.Effect<Delivery, WebhookEndpointNotFound | WebhookEndpointDisabled>
  /** Deletes an endpoint and its deliveries; false when there is no such endpoint. */
  readonly deleteEndpoint: (id: WebhookEndpointId) => Effect.Effect<boolean>
  /** An endpoint's deliveries, newest first, each with its attempts. */
  readonly listDeliveries: (endpointId: WebhookEndpointId, limit: number) => Effect.Effect<ReadonlyArray<Delivery>>
  readonly findDelivery: (id: DeliveryId) => Effect.Effect<Option.Option<Delivery>>
  /** Makes a delivery due now with a fresh retry schedule, unless its endpoint is disabled. */
  readonly resend: (id: DeliveryId, at: DateTime.Utc) => Effect.Effect<boolean>
  /**
   * Claims up to `limit` due deliveries for `lease`, skipping those another worker holds, and no more
   * of one endpoint than its free in-flight slots (counted across workers). A disabled endpoint's
   * deliveries are never claimed: one still pending fails.
   */
  readonly claim: (limit: number, lease: Duration.Duration) => Effect.Effect<ReadonlyArray<DueDelivery>>
  /** When the earliest delivery not held by a live worker is due. */
  readonly nextDue: Effect.Effect<Option.Option<DateTime.Utc>>
  readonly extend: (deliveries: ReadonlyArray<DueDelivery>, lease: Duration.Duration) => Effect.Effect<void>
  /** Records an attempt and its consequence; nothing if the claim was lost meanwhile. */
  readonly complete: (delivery: DueDelivery, result: AttemptResult) => Effect.Effect<void>
  /** Hands a claimed delivery back, due at `at`, without counting an attempt (shutdown). */
  readonly release: (delivery: DueDelivery, at: DateTime.Utc) => Effect.Effect<void>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** On the `SqlClient` in context. */
  static readonly layerSql = Layer.scoped(this, SqlWebhookRepository.make)
  /** In memory: no database at all. */
  static readonly layerInMemory = Layer.effect(this, InMemoryWebhookRepository.make)
  /** In memory, with the {@link InMemoryWebhookRepository.Events} that feed it deliveries (one store). */
  static readonly layerInMemoryWithEvents = Layer.effectContext(
    Effect.map(InMemoryWebhookRepository.makeWithEvents, ({ events, repository }) =>
      Context.make(this, repository).pipe(Context.add(InMemoryWebhookRepository.Events, events)))
  )
}
