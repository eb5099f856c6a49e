import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { WebhookEndpoint } from "../../domain/Webhook.js"
import { WebhookRepository } from "./WebhookRepository.js"

/**
 * Endpoints in memory, for fast unit tests of the operator API above the repository. The in-memory
 * intents repository writes no events, so there are never deliveries here: delivery is tested on
 * PGlite and PostgreSQL, where events and their deliveries are written in one transaction.
 */
export const make = Effect.gen(function*() {
  const endpoints = yield* Ref.make<ReadonlyMap<string, WebhookEndpoint>>(new Map())

  return WebhookRepository.of({
    createEndpoint: ({ secret: _, ...endpoint }) =>
      Effect.as(
        Ref.update(endpoints, (map) => new Map(map).set(endpoint.id, new WebhookEndpoint({ ...endpoint, disabled_at: null }))),
        new WebhookEndpoint({ ...endpoint, disabled_at: null })
      ),
    listEndpoints: (userId) =>
      Effect.map(Ref.get(endpoints), (map) => [...map.values()].filter((endpoint) => endpoint.user_id === userId)),
    findEndpoint: (id) => Effect.map(Ref.get(endpoints), (map) => Option.fromNullable(map.get(id))),
    deleteEndpoint: (id) =>
      Ref.modify(endpoints, (map) => {
        const next = new Map(map)
        return [next.delete(id), next]
      }),
    listDeliveries: () => Effect.succeed([]),
    findDelivery: () => Effect.succeedNone,
    resend: () => Effect.succeed(false),
    claim: () => Effect.succeed([]),
    nextDue: Effect.succeedNone,
    extend: () => Effect.void,
    complete: () => Effect.void,
    release: () => Effect.void
  })
})
