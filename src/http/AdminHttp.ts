import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { ApiKeyView, BrokerView, CreatedApiKey, CreatedLogin, CreatedWebhookEndpoint, WebhookEndpointView } from "../api/AdminApi.js"
import { Api } from "../api/Api.js"
import { Operators } from "../services/accounts/Operators.js"
import { Intents } from "../services/intents/Intents.js"
import { Logins } from "../services/logins/Logins.js"
import { intentPage } from "./IntentsHttp.js"
import { Webhooks } from "../services/webhooks/Webhooks.js"

export const AdminHttpLive = HttpApiBuilder.group(Api, "admin", (handlers) =>
  Effect.gen(function*() {
    const operators = yield* Operators
    const webhooks = yield* Webhooks
    const logins = yield* Logins
    const intents = yield* Intents
    return handlers
      .handle("createUser", ({ payload }) => operators.createUser(payload))
      .handle("getUser", ({ path }) => operators.getUser(path.user_id))
      .handle("listUsers", ({ urlParams }) => Effect.map(operators.listUsers(urlParams.limit ?? 100), (items) => ({ items })))
      .handle("listUserBrokers", ({ path }) =>
        Effect.map(operators.listAllBrokers(path.user_id), (brokers) => ({
          items: brokers.map((broker) => new BrokerView(broker))
        })))
      .handle("listUserIntents", ({ path, urlParams }) =>
        Effect.flatMap(operators.getUser(path.user_id), (user) =>
          intentPage(intents, { userId: user.id, mode: urlParams.mode }, urlParams)))
      .handle("createLogin", ({ path, payload }) =>
        Effect.map(logins.createLogin(path.user_id, payload), (login) => new CreatedLogin(login)))
      .handle("createApiKey", ({ path, payload }) =>
        Effect.map(operators.createApiKey(path.user_id, payload), (key) => new CreatedApiKey(key)))
      .handle("listApiKeys", ({ path }) =>
        Effect.map(operators.listApiKeys(path.user_id), (keys) => ({ items: keys.map((key) => new ApiKeyView(key)) })))
      .handle("revokeApiKey", ({ path }) => operators.revokeApiKey(path.key_id))
      .handle("createBroker", ({ path, payload }) =>
        Effect.map(operators.createBroker(path.user_id, payload), (broker) => new BrokerView(broker)))
      .handle("replaceBrokerCredentials", ({ path, payload }) =>
        Effect.map(operators.replaceBrokerCredentials(path.broker_id, payload), (broker) => new BrokerView(broker)))
      .handle("createWebhookEndpoint", ({ path, payload }) =>
        Effect.map(
          webhooks.createEndpoint(path.user_id, payload),
          ({ endpoint, secret }) => new CreatedWebhookEndpoint({ ...endpoint, secret })
        ))
      .handle("listWebhookEndpoints", ({ path }) =>
        Effect.map(webhooks.listEndpoints(path.user_id), (endpoints) => ({
          items: endpoints.map((endpoint) => new WebhookEndpointView(endpoint))
        })))
      .handle("deleteWebhookEndpoint", ({ path }) => webhooks.deleteEndpoint(path.endpoint_id))
      .handle("listDeliveries", ({ path, urlParams }) =>
        Effect.map(webhooks.listDeliveries(path.endpoint_id, urlParams.limit ?? 100), (items) => ({ items })))
      .handle("resendDelivery", ({ path }) => webhooks.resend(path.delivery_id))
  }))
