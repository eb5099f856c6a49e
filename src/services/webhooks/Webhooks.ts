import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { ValidationError } from "../../domain/Errors.js"
import { type DeliveryId, type Mode, type UserId, WebhookEndpointId } from "../../domain/Ids.js"
import {
  allEventTypes,
  checkEndpointUrl,
  DeliveryNotFound,
  type EventType,
  WebhookEndpointDisabled,
  WebhookEndpointNotFound
} from "../../domain/Webhook.js"
import { Operators } from "../accounts/Operators.js"
import { IdGenerator } from "../IdGenerator.js"
import { requirePublic } from "./PublicAddress.js"
import { WebhookRepository } from "./WebhookRepository.js"


/** The operator's webhook use cases: endpoints, their deliveries, re-sending. */
export class Webhooks extends Effect.Service<Webhooks>()("Webhooks", {
  effect: Effect.gen(function*() {
    const repository = yield* WebhookRepository
    const ids = yield* IdGenerator

    const requireUser = (yield* Operators).getUser

    const requireEndpoint = (id: WebhookEndpointId) =>
      Effect.filterOrFail(
        repository.findEndpoint(id),
        Option.isSome,
        () => new WebhookEndpointNotFound()
      ).pipe(Effect.map((endpoint) => endpoint.value))

    /** Creates an endpoint; the returned `secret` (64 hex) is the only time it is ever shown. */
    const createEndpoint = Effect.fn("Webhooks.createEndpoint")(function*(userId: UserId, input: {
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
    })

    const resend = Effect.fn("Webhooks.resend")(function*(deliveryId: DeliveryId) {
      const delivery = yield* Effect.filterOrFail(
        repository.findDelivery(deliveryId),
        Option.isSome,
        () => new DeliveryNotFound()
      )
      if (!(yield* repository.resend(delivery.value.id, yield* DateTime.now))) {
        return yield* new WebhookEndpointDisabled()
      }
      return Option.getOrElse(yield* repository.findDelivery(delivery.value.id), () => delivery.value)
    })

    return {
      createEndpoint,
      listEndpoints: (userId: UserId) => Effect.flatMap(requireUser(userId), (user) => repository.listEndpoints(user.id)),
      deleteEndpoint: (endpointId: WebhookEndpointId) =>
        Effect.filterOrFail(
          repository.deleteEndpoint(endpointId),
          (deleted) => deleted,
          () => new WebhookEndpointNotFound()
        ).pipe(Effect.asVoid),
      listDeliveries: (endpointId: WebhookEndpointId, limit: number) =>
        Effect.flatMap(requireEndpoint(endpointId), (endpoint) => repository.listDeliveries(endpoint.id, limit)),
      resend
    } as const
  })
}) {}
