import * as Effect from "effect/Effect"
import { ADMIN_TOKEN, send } from "./TestServer.js"

export const admin = (method: "GET" | "POST" | "DELETE", path: string, json?: unknown) =>
  send(method, `/admin/v1${path}`, { json, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })

const created = <A>(reply: { readonly status: number; readonly body: unknown }) => {
  if (reply.status !== 201) throw new Error(`expected 201, got ${reply.status}: ${JSON.stringify(reply.body)}`)
  return reply.body as A
}

/**
 * A user set up through the operator API as the dashboard would: a test key, a live key, a mock
 * connection and an Alpaca connection.
 */
export const signUp = (user: { readonly tier?: string; readonly requests_per_minute?: number; readonly intents_per_month?: number } = {}) =>
  Effect.gen(function*() {
    const { id } = created<{ id: string }>(yield* admin("POST", "/users", { name: "Ada", tier: "free", ...user }))
    const key = (mode: "test" | "live", extra: Record<string, unknown> = {}) =>
      Effect.map(
        admin("POST", `/users/${id}/api-keys`, { name: `${mode} key`, mode, ...extra }),
        (reply) => created<{ id: string; key: string }>(reply)
      )
    const testKey = yield* key("test")
    const liveKey = yield* key("live")
    const mock = created<{ id: string }>(
      yield* admin("POST", `/users/${id}/brokers`, { name: "Mock", kind: "mock", mode: "test" })
    )
    const alpaca = created<{ id: string }>(
      yield* admin("POST", `/users/${id}/brokers`, {
        name: "Alpaca",
        kind: "alpaca",
        mode: "live",
        credentials: { api_key_id: "AKID", api_secret_key: "very-secret" }
      })
    )
    return { userId: id, testKey: testKey.key, liveKey: liveKey.key, mockId: mock.id, alpacaId: alpaca.id, key }
  })

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
