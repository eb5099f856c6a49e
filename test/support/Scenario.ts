import * as Effect from "effect/Effect"
import type { CreateApiKeyPayload, CreateWebhookEndpointPayload } from "../../src/api/AdminApi.js"
import type { UserId, WebhookEndpointId } from "../../src/domain/Ids.js"
import type { CreateIntentPayload } from "../../src/domain/Intent.js"
import type { Delivery } from "../../src/domain/Webhook.js"
import * as Harness from "./Harness.js"
import { ADMIN_TOKEN, client, send } from "./TestServer.js"

/** A raw operator request, for assertions on the wire (statuses, error bodies, malformed input). */
export const admin = (method: "GET" | "POST" | "PUT" | "DELETE", path: string, json?: unknown) =>
  send(method, `/admin/v1${path}`, { json, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })

/** The typed operator client on the test server. */
export const operator = client(ADMIN_TOKEN)

/**
 * A user set up through the typed operator client as the dashboard would: a test key, a live key,
 * a mock connection and an Alpaca connection (paper, with the fake Alpaca's default key pair: the
 * test server's `FakeAlpacas` accept it).
 */
export const signUp = (user: Parameters<typeof Harness.signUp>[1] = {}) =>
  Effect.gen(function*() {
    const { admin } = yield* operator
    const { brokerId, key: testKey, userId } = yield* Harness.signUp(yield* operator, user)
    const key = (mode: "test" | "live", extra: Partial<Omit<typeof CreateApiKeyPayload.Type, "name" | "mode">> = {}) =>
      admin.createApiKey({ path: { user_id: userId }, payload: { name: `${mode} key`, mode, ...extra } })
    const liveKey = yield* key("live")
    const alpaca = yield* admin.createBroker({
      path: { user_id: userId },
      payload: {
        name: "Alpaca",
        kind: "alpaca",
        mode: "live",
        credentials: Harness.fakeAlpacaCredentials
      }
    })
    return { userId, testKey, liveKey: liveKey.key, mockId: brokerId, alpacaId: alpaca.id, key }
  }).pipe(Effect.orDie)

/** A valid market order body for `brokerId`. */
export const marketOrder = (brokerId: string, overrides: Record<string, unknown> = {}) => ({
  intent_id: `ext-${Math.random().toString(36).slice(2)}`,
  symbol: "aapl",
  side: "buy",
  quantity: 10,
  order_type: "market",
  broker_id: brokerId,
  ...overrides
})

/** A valid market order for `brokerId`, typed: what the typed client sends. */
export const order = (brokerId: string, overrides: Partial<CreateIntentPayload> = {}): CreateIntentPayload => ({
  intent_id: `ext-${Math.random().toString(36).slice(2)}`,
  symbol: "AAPL",
  side: "buy",
  quantity: 10,
  order_type: "market",
  broker_id: brokerId,
  ...overrides
})

/** Creates an intent through the typed client: the `TradeIntent`, or the endpoint's typed error. */
export const create = (key: string, payload: CreateIntentPayload) =>
  Effect.flatMap(client(key), ({ intents }) => intents.createIntent({ payload }))

/** Subscribes `userId` to `url` through the typed operator client (test mode unless `extra` says otherwise). */
export const subscribe = (userId: UserId, url: string, extra: Partial<typeof CreateWebhookEndpointPayload.Type> = {}) =>
  Effect.flatMap(operator, ({ admin }) =>
    admin.createWebhookEndpoint({ path: { user_id: userId }, payload: { url, mode: "test", ...extra } }))

/** An endpoint's deliveries, newest first. */
export const deliveries = (endpointId: WebhookEndpointId) =>
  Effect.flatMap(operator, ({ admin }) =>
    admin.listDeliveries({ path: { endpoint_id: endpointId }, urlParams: { limit: 100 } })).pipe(
      Effect.map(({ items }) => items)
    )

/** The endpoint's deliveries once `done` holds for them (delivery runs in the background), for at most 15 s. */
export const deliveriesWhen = (endpointId: WebhookEndpointId, done: (items: ReadonlyArray<Delivery>) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 750; i++) {
      const items = yield* deliveries(endpointId)
      if (done(items)) return items
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage("deliveries did not settle")
  })
