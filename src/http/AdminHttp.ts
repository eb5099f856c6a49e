import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { ApiKeyView, BrokerView, CreatedApiKey } from "../api/AdminApi.js"
import { Api } from "../api/Api.js"
import { Operators } from "../services/accounts/Operators.js"

export const AdminHttpLive = HttpApiBuilder.group(Api, "admin", (handlers) =>
  Effect.gen(function*() {
    const operators = yield* Operators
    return handlers
      .handle("createUser", ({ payload }) => operators.createUser(payload))
      .handle("getUser", ({ path }) => operators.getUser(path.user_id))
      .handle("createApiKey", ({ path, payload }) =>
        Effect.map(operators.createApiKey(path.user_id, payload), (key) => new CreatedApiKey(key)))
      .handle("listApiKeys", ({ path }) =>
        Effect.map(operators.listApiKeys(path.user_id), (keys) => ({ items: keys.map((key) => new ApiKeyView(key)) })))
      .handle("revokeApiKey", ({ path }) => operators.revokeApiKey(path.key_id))
      .handle("createBroker", ({ path, payload }) =>
        Effect.map(operators.createBroker(path.user_id, payload), (broker) => new BrokerView(broker)))
  }))
