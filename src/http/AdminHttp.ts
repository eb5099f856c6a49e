import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ApiKeyView, BrokerView, CreatedApiKey, CreatedWebhookEndpoint, WebhookEndpointView } from "../api/AdminApi.js"
import { Api } from "../api/Api.js"
import { ApiKeyNotFound, UserNotFound } from "../domain/Account.js"
import { ApiKeyId, DeliveryId, UserId, WebhookEndpointId } from "../domain/Ids.js"
import { DeliveryNotFound, WebhookEndpointNotFound } from "../domain/Webhook.js"
import { Operators } from "../services/accounts/Operators.js"
import { Webhooks } from "../services/webhooks/Webhooks.js"

/** A path id of the brand's shape, or the resource's not-found error: a malformed id is as unknown as an absent one. */
const pathId = <A, E>(schema: Schema.Schema<A, string>, notFound: () => E) => (id: string): Effect.Effect<A, E> =>
  Effect.mapError(Schema.decode(schema)(id), notFound)
const userId = pathId(UserId, () => new UserNotFound())
const apiKeyId = pathId(ApiKeyId, () => new ApiKeyNotFound())
const endpointId = pathId(WebhookEndpointId, () => new WebhookEndpointNotFound())
const deliveryId = pathId(DeliveryId, () => new DeliveryNotFound())

export const AdminHttpLive = HttpApiBuilder.group(Api, "admin", (handlers) =>
  Effect.gen(function*() {
    const operators = yield* Operators
    const webhooks = yield* Webhooks
    return handlers
      .handle("createUser", ({ payload }) => operators.createUser(payload))
      .handle("getUser", ({ path }) => Effect.flatMap(userId(path.user_id), operators.getUser))
      .handle("createApiKey", ({ path, payload }) =>
        Effect.map(Effect.flatMap(userId(path.user_id), (id) => operators.createApiKey(id, payload)), (key) => new CreatedApiKey(key)))
      .handle("listApiKeys", ({ path }) =>
        Effect.map(Effect.flatMap(userId(path.user_id), operators.listApiKeys), (keys) => ({ items: keys.map((key) => new ApiKeyView(key)) })))
      .handle("revokeApiKey", ({ path }) => Effect.flatMap(apiKeyId(path.key_id), operators.revokeApiKey))
      .handle("createBroker", ({ path, payload }) =>
        Effect.map(Effect.flatMap(userId(path.user_id), (id) => operators.createBroker(id, payload)), (broker) => new BrokerView(broker)))
      .handle("createWebhookEndpoint", ({ path, payload }) =>
        Effect.map(
          Effect.flatMap(userId(path.user_id), (id) => webhooks.createEndpoint(id, payload)),
          ({ endpoint, secret }) => new CreatedWebhookEndpoint({ ...endpoint, secret })
        ))
      .handle("listWebhookEndpoints", ({ path }) =>
        Effect.map(Effect.flatMap(userId(path.user_id), webhooks.listEndpoints), (endpoints) => ({
          items: endpoints.map((endpoint) => new WebhookEndpointView(endpoint))
        })))
      .handle("deleteWebhookEndpoint", ({ path }) => Effect.flatMap(endpointId(path.endpoint_id), webhooks.deleteEndpoint))
      .handle("listDeliveries", ({ path, urlParams }) =>
        Effect.map(Effect.flatMap(endpointId(path.endpoint_id), (id) => webhooks.listDeliveries(id, urlParams.limit ?? 100)), (items) => ({ items })))
      .handle("resendDelivery", ({ path }) => Effect.flatMap(deliveryId(path.delivery_id), webhooks.resend))
  }))
