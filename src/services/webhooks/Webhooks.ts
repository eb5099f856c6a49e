import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { ValidationError } from "../../domain/Errors.js"
import { DeliveryId, type Mode, type Owner, type UserId, WebhookEndpointId } from "../../domain/Ids.js"
import {
  allEventTypes,
  checkEndpointUrl,
  DeliveryNotFound,
  type EventType,
  TEST_EVENT_MESSAGE,
  type WebhookEndpoint,
  WebhookEndpointDisabled,
  WebhookEndpointNotFound
} from "../../domain/Webhook.js"
import { Operators } from "../accounts/Operators.js"
import { IdGenerator } from "../IdGenerator.js"
import { requirePublic } from "./PublicAddress.js"
import { WebhookRepository } from "./WebhookRepository.js"
import * as Tracing from "../../Tracing.js"

/** How far back an endpoint's failing deliveries are counted. */
export const FAILING_WINDOW = Duration.days(7)

/**
 * The webhook use cases of the operator and of the dashboard: endpoints, their deliveries,
 * re-sending, secrets, disabling, test events. Where a `userId` is given, another user's endpoint
 * or delivery is not found, exactly like an unknown id.
 */
export class Webhooks extends Effect.Service<Webhooks>()("Webhooks", {
  effect: Effect.gen(function*() {
    const repository = yield* WebhookRepository
    const ids = yield* IdGenerator

    const requireUser = (yield* Operators).getUser

    // An endpoint's owner never changes: checking it before acting on the endpoint is not a race.
    const isOwned = (endpoint: WebhookEndpoint, userId: UserId | undefined) =>
      userId === undefined || endpoint.user_id === userId

    const requireEndpoint = (id: WebhookEndpointId, userId?: UserId) =>
      Effect.flatMap(repository.findEndpoint(id), (endpoint) =>
        Option.isSome(endpoint) && isOwned(endpoint.value, userId)
          ? Effect.succeed(endpoint.value)
          : Effect.fail(new WebhookEndpointNotFound()))

    /** Creates an endpoint; the returned `secret` (64 hex) is the only time it is ever shown. */
    const createEndpoint = Effect.fnUntraced(function*(userId: UserId, input: {
      readonly url: string
      readonly mode: Mode
      readonly events?: ReadonlyArray<EventType> | undefined
    }) {
      const user = yield* requireUser(userId)
      const url = checkEndpointUrl(input.url, input.mode)
      if (Either.isLeft(url)) return yield* new ValidationError({ detail: url.left })
      if (input.mode === "live") {
        yield* requirePublic(url.right).pipe(Effect.mapError((detail) => new ValidationError({ detail })))
      }
      const secret = yield* ids.hex(32)
      const endpoint = yield* repository.createEndpoint({
        id: WebhookEndpointId.make(yield* ids.uuid),
        user_id: user.id,
        url: input.url,
        mode: input.mode,
        events: [...new Set(input.events ?? allEventTypes)],
        secret,
        created_at: yield* DateTime.now
      })
      return { endpoint, secret }
    }, Tracing.span("Webhooks.createEndpoint"))

    /** Deletes an endpoint with its deliveries. */
    const deleteEndpoint = Effect.fnUntraced(function*(endpointId: WebhookEndpointId, userId?: UserId) {
      if (userId !== undefined) yield* requireEndpoint(endpointId, userId)
      if (!(yield* repository.deleteEndpoint(endpointId))) return yield* new WebhookEndpointNotFound()
    }, Tracing.span("Webhooks.deleteEndpoint"))

    /** An endpoint's deliveries, newest first. */
    const listDeliveries = Effect.fnUntraced(
      function*(endpointId: WebhookEndpointId, limit: number, userId?: UserId) {
        const endpoint = yield* requireEndpoint(endpointId, userId)
        return yield* repository.listDeliveries(endpoint.id, limit)
      }, Tracing.span("Webhooks.listDeliveries")
    )

    /** Makes a delivery due now with a fresh retry schedule, unless its endpoint is disabled. */
    const resend = Effect.fnUntraced(function*(deliveryId: DeliveryId, userId?: UserId) {
      const found = yield* repository.findDelivery(deliveryId)
      if (Option.isNone(found)) return yield* new DeliveryNotFound()
      const delivery = found.value
      if (userId !== undefined) {
        const endpoint = yield* repository.findEndpoint(delivery.endpoint_id)
        if (Option.isNone(endpoint) || !isOwned(endpoint.value, userId)) return yield* new DeliveryNotFound()
      }
      if (!(yield* repository.resend(delivery.id, yield* DateTime.now))) {
        return yield* new WebhookEndpointDisabled()
      }
      return Option.getOrElse(yield* repository.findDelivery(delivery.id), () => delivery)
    }, Tracing.span("Webhooks.resend"))

    /**
     * The owner's endpoints of one mode, oldest first, each with the number of its deliveries of the
     * last 7 days that are `failed`, or `pending` with at least one failed attempt.
     */
    const listEndpointsOf = Effect.fnUntraced(function*(owner: Owner) {
      const since = DateTime.subtractDuration(yield* DateTime.now, FAILING_WINDOW)
      return yield* repository.listEndpointsOf(owner, since)
    }, Tracing.span("Webhooks.listEndpointsOf"))

    /**
     * A new 64-hex signing secret, returned only here: every attempt from now on is signed with it,
     * retries of earlier deliveries included (an attempt already under way keeps the old one).
     */
    const rotateSecret = Effect.fnUntraced(function*(userId: UserId, endpointId: WebhookEndpointId) {
      const secret = yield* ids.hex(32)
      const endpoint = yield* repository.rotateSecret(userId, endpointId, secret)
      if (Option.isNone(endpoint)) return yield* new WebhookEndpointNotFound()
      return { endpoint: endpoint.value, secret }
    }, Tracing.span("Webhooks.rotateSecret"))

    /**
     * Disables an endpoint as a 410 does (nothing more is sent, its pending deliveries fail), or
     * enables it (events written from then on are delivered; failed deliveries can be re-sent).
     * Idempotent both ways: disabling again keeps the first `disabled_at`.
     */
    const setEnabled = Effect.fnUntraced(
      function*(userId: UserId, endpointId: WebhookEndpointId, enabled: boolean) {
        const at = enabled ? null : yield* DateTime.now
        const endpoint = yield* repository.setDisabled(userId, endpointId, at)
        if (Option.isNone(endpoint)) return yield* new WebhookEndpointNotFound()
        return endpoint.value
      }, Tracing.span("Webhooks.setEnabled")
    )

    /**
     * Sends a signed `webhook.test` event to this endpoint only, delivered (and retried) like any
     * other: it is in the endpoint's deliveries, never in the events API.
     */
    const sendTestEvent = Effect.fnUntraced(
      function*(userId: UserId, endpointId: WebhookEndpointId) {
        return yield* repository.createTestDelivery({
          id: yield* ids.eventId,
          delivery_id: DeliveryId.make(yield* ids.uuid),
          endpoint_id: endpointId,
          user_id: userId,
          data: { endpoint_id: endpointId, message: TEST_EVENT_MESSAGE },
          created_at: yield* DateTime.now
        })
      }, Tracing.span("Webhooks.sendTestEvent")
    )

    return {
      createEndpoint,
      listEndpoints: Effect.fnUntraced(function*(userId: UserId) {
        const user = yield* requireUser(userId)
        return yield* repository.listEndpoints(user.id)
      }, Tracing.span("Webhooks.listEndpoints")),
      deleteEndpoint,
      listDeliveries,
      resend,
      listEndpointsOf,
      rotateSecret,
      setEnabled,
      sendTestEvent
    } as const
  })
}) {}
