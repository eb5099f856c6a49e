import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { CreatedApiKey } from "../../src/api/AdminApi.js"
import { fakeAlpacaCredentials } from "../support/Harness.js"
import { admin, marketOrder, operator, signUp } from "../support/Scenario.js"
import { bodyOf, keysOf, send, WithId } from "../support/TestServer.js"
import { servers } from "./Backends.js"

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`operator API on ${name}`, (it) => {
    describe("/admin/v1", () => {
      it.effect("refuses requests without the admin token", () =>
        Effect.gen(function*() {
          for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: "test-admin-token" }]) {
            const reply = yield* send("POST", "/admin/v1/users", { json: { name: "x", tier: "free" }, headers })
            expect(reply.status).toBe(401)
            expect(reply.body).toMatchObject({ error_code: "unauthorized", detail: "Invalid admin token" })
          }
        }))

      it.effect("creates users with their tier's limits, or custom ones", () =>
        Effect.gen(function*() {
          const free = yield* admin("POST", "/users", { name: "Free", tier: "free" })
          expect(free.status).toBe(201)
          expect(free.body).toMatchObject({ name: "Free", tier: "free", requests_per_minute: 60, intents_per_month: 100 })
          const pro = yield* admin("POST", "/users", { name: "Pro", tier: "pro" })
          expect(pro.body).toMatchObject({ requests_per_minute: 300, intents_per_month: 1000 })
          const enterprise = yield* admin("POST", "/users", {
            name: "Big",
            tier: "enterprise",
            requests_per_minute: 5000,
            intents_per_month: 50000
          })
          expect(enterprise.body).toMatchObject({ requests_per_minute: 5000, intents_per_month: 50000 })
          const id = bodyOf(WithId, free).id
          expect((yield* admin("GET", `/users/${id}`)).body).toEqual(free.body)
          const missing = yield* admin("GET", "/users/00000000-0000-0000-0000-000000000000")
          expect(missing.status).toBe(404)
          expect(missing.body).toMatchObject({ error_code: "user_not_found", detail: "User not found" })
          const bad = yield* admin("POST", "/users", { name: "X", tier: "gold" })
          expect(bad.status).toBe(400)
          expect(bad.body).toMatchObject({ detail: "tier must be one of: free, pro, enterprise" })
        }))

      it.effect("lists users newest first, a user's brokers (both modes) and a user's intents per mode", () =>
        Effect.gen(function*() {
          const { alpacaId, mockId, testKey, userId } = yield* signUp()
          const newer = yield* signUp()
          const users = yield* admin("GET", "/users?limit=2")
          expect(users.status).toBe(200)
          expect(users.body).toMatchObject({ items: [{ id: newer.userId }, { id: userId }] })
          expect((yield* admin("GET", "/users?limit=0")).status).toBe(400)

          const brokers = yield* admin("GET", `/users/${userId}/brokers`)
          expect(brokers.body).toMatchObject({ items: [{ id: mockId, mode: "test" }, { id: alpacaId, mode: "live" }] })
          expect(brokers.text).not.toContain("credentials")

          const created = bodyOf(WithId, yield* send("POST", "/api/v1/intents", { key: testKey, json: marketOrder(mockId) }))
          const test = yield* admin("GET", `/users/${userId}/intents?mode=test`)
          expect(test.body).toMatchObject({ items: [{ id: created.id }], page: 1, page_size: 20, total_items: 1 })
          expect((yield* admin("GET", `/users/${userId}/intents?mode=live`)).body).toMatchObject({ items: [], total_items: 0 })
          expect((yield* admin("GET", `/users/${userId}/intents`)).status).toBe(400)
          expect((yield* admin("GET", `/users/${newer.userId}/intents?mode=test`)).body).toMatchObject({ items: [] })
          const missing = yield* admin("GET", "/users/00000000-0000-0000-0000-000000000000/brokers")
          expect(missing.status).toBe(404)
        }))

      it.effect("shows a key once, lists keys without it, and revocation takes effect at once", () =>
        Effect.gen(function*() {
          const { key, mockId, userId } = yield* signUp()
          const created = yield* admin("POST", `/users/${userId}/api-keys`, { name: "CI", mode: "test" })
          expect(created.status).toBe(201)
          const body = bodyOf(CreatedApiKey, created)
          expect(body.key).toMatch(/^sk_test_[A-Za-z0-9]{32}$/)
          expect(body.key_hint).toBe(`sk_test_…${body.key.slice(-4)}`)
          expect(created.body).toMatchObject({
            name: "CI",
            mode: "test",
            scopes: ["intents:read", "intents:write"],
            expires_at: null,
            last_used_at: null
          })

          expect((yield* send("POST", "/api/v1/intents", { key: body.key, json: marketOrder(mockId) })).status).toBe(201)
          const listed = yield* admin("GET", `/users/${userId}/api-keys`)
          expect(listed.text).not.toContain(body.key)
          expect(listed.body).toMatchObject({ items: expect.arrayContaining([expect.objectContaining({ id: body.id })]) })
          expect(listed.body).toMatchObject({
            items: expect.not.arrayContaining([expect.objectContaining({ key: expect.anything() })])
          })
          yield* Effect.sleep("100 millis")
          const { admin: operatorApi } = yield* operator
          const after = yield* operatorApi.listApiKeys({ path: { user_id: userId } })
          const used = after.items.find((k) => k.id === body.id)
          expect(used?.last_used_at).not.toBeNull()

          expect((yield* admin("DELETE", `/api-keys/${body.id}`)).status).toBe(204)
          const refused = yield* send("GET", "/api/v1/intents", { key: body.key })
          expect(refused.status).toBe(401)
          const again = yield* admin("DELETE", `/api-keys/${body.id}`)
          expect(again.status).toBe(404)
          expect(again.body).toMatchObject({ error_code: "api_key_not_found" })

          const live = yield* key("live")
          expect(live.key).toMatch(/^sk_live_[A-Za-z0-9]{32}$/)
          const past = yield* admin("POST", `/users/${userId}/api-keys`, {
            name: "old",
            mode: "test",
            expires_at: "2001-01-01T00:00:00Z"
          })
          expect(past.status).toBe(400)
          expect(past.body).toMatchObject({ detail: "expires_at must be in the future" })
        }))

      it.effect("broker connections: mock is test only, alpaca live only with credentials never returned", () =>
        Effect.gen(function*() {
          const { userId } = yield* signUp()
          const mock = yield* admin("POST", `/users/${userId}/brokers`, { name: "M", kind: "mock", mode: "test" })
          expect(mock.status).toBe(201)
          expect(keysOf(mock)).toEqual(["created_at", "environment", "id", "kind", "mode", "name", "status"])
          expect(mock.body).toMatchObject({ kind: "mock", mode: "test", environment: null, status: "active" })
          const alpaca = yield* admin("POST", `/users/${userId}/brokers`, {
            name: "A",
            kind: "alpaca",
            mode: "live",
            credentials: fakeAlpacaCredentials
          })
          expect(alpaca.status).toBe(201)
          expect(alpaca.text).not.toContain(fakeAlpacaCredentials.api_secret_key)
          const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
            [{ name: "M", kind: "mock", mode: "live" }, "kind mock is only available in test mode"],
            [{ name: "A", kind: "alpaca", mode: "test", credentials: { api_key_id: "a", api_secret_key: "b" } },
              "kind alpaca is only available in live mode"],
            [{ name: "A", kind: "alpaca", mode: "live" }, "credentials are required for kind alpaca"],
            [{ name: "M", kind: "mock", mode: "test", credentials: { api_key_id: "a", api_secret_key: "b" } },
              "credentials are not accepted for kind mock"],
            [{ name: "M", kind: "mock", mode: "test", environment: "paper" }, "environment is not accepted for kind mock"],
            [{ name: "M", kind: "ib", mode: "test" }, "kind must be one of: mock, alpaca"]
          ]
          for (const [body, detail] of cases) {
            const reply = yield* admin("POST", `/users/${userId}/brokers`, body)
            expect(reply.status).toBe(400)
            expect(reply.body).toMatchObject({ error_code: "validation_error", detail })
          }
          const unknownUser = yield* admin("POST", "/users/nope/brokers", { name: "M", kind: "mock", mode: "test" })
          expect(unknownUser.status).toBe(404)
        }))
    })
  })
}
