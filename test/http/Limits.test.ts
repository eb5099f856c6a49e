import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Database from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"
import { awayFromMinuteEdge } from "../support/RateWindow.js"
import { marketOrder, signUp } from "../support/Scenario.js"
import * as TestServer from "../support/TestServer.js"
import { type Reply, send } from "../support/TestServer.js"
import { servers } from "./Backends.js"

const limitHeaders = (reply: Reply) => ({
  limit: reply.headers["x-ratelimit-limit"],
  remaining: reply.headers["x-ratelimit-remaining"],
  reset: reply.headers["x-ratelimit-reset"]
})

const nowSeconds = () => Math.floor(Date.now() / 1000)

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`limits on ${name}`, (it) => {
    describe("per key and minute", () => {
      it.effect("200 requests at once on a free key admit exactly 60; another user is unaffected", () =>
        Effect.gen(function*() {
          const ada = yield* signUp({ tier: "free" })
          const bob = yield* signUp({ tier: "free" })
          yield* Effect.promise(awayFromMinuteEdge)
          const replies = yield* Effect.all(
            Array.from({ length: 200 }, () => send("GET", "/api/v1/intents", { key: ada.testKey })),
            { concurrency: "unbounded" }
          )
          expect(replies.filter((r) => r.status === 200)).toHaveLength(60)
          const limited = replies.filter((r) => r.status === 429)
          expect(limited).toHaveLength(140)
          for (const reply of limited) {
            expect(reply.body).toMatchObject({ error_code: "rate_limit_exceeded", retry_after: Number(reply.headers["retry-after"]) })
            expect(limitHeaders(reply)).toMatchObject({ limit: "60", remaining: "0" })
          }
          const remaining = replies.filter((r) => r.status === 200).map((r) => Number(r.headers["x-ratelimit-remaining"]))
          expect(new Set(remaining)).toEqual(new Set(Array.from({ length: 60 }, (_, i) => i)))

          const other = yield* send("GET", "/api/v1/intents", { key: bob.testKey })
          expect(other.status).toBe(200)
          expect(limitHeaders(other)).toMatchObject({ limit: "60", remaining: "59" })
        }))

      it.effect("every authenticated answer carries the headers, errors included; the reset is the next minute", () =>
        Effect.gen(function*() {
          const user = yield* signUp({ tier: "pro" })
          const readOnly = yield* user.key("test", { scopes: ["intents:read"] })
          const order = marketOrder(user.mockId)
          yield* Effect.promise(awayFromMinuteEdge)
          const replies = [
            yield* send("POST", "/api/v1/intents", { key: user.testKey, json: order }), // 201
            yield* send("POST", "/api/v1/intents", { key: user.testKey, json: order }), // 409
            yield* send("POST", "/api/v1/intents", { key: user.testKey, json: { ...order, intent_id: "x", quantity: "ten" } }), // 400
            yield* send("POST", "/api/v1/intents", { key: user.testKey, json: { ...marketOrder(user.mockId), order_type: "limit" } }), // 422
            yield* send("GET", "/api/v1/intents/00000000-0000-4000-8000-000000000000", { key: user.testKey }), // 404
            yield* send("GET", "/api/v1/intents", { key: user.testKey }) // 200
          ]
          expect(replies.map((r) => r.status)).toEqual([201, 409, 400, 422, 404, 200])
          replies.forEach((reply, i) => {
            expect(limitHeaders(reply)).toEqual({ limit: "300", remaining: String(299 - i), reset: expect.stringMatching(/^\d+$/) })
            const reset = Number(reply.headers["x-ratelimit-reset"])
            expect(reset % 60).toBe(0)
            expect(reset - nowSeconds()).toBeGreaterThan(0)
            expect(reset - nowSeconds()).toBeLessThanOrEqual(60)
          })
          const forbidden = yield* send("POST", "/api/v1/intents", { key: readOnly.key, json: marketOrder(user.mockId) })
          expect(forbidden.status).toBe(403)
          expect(limitHeaders(forbidden)).toMatchObject({ limit: "300", remaining: "299" })
        }))
    })

    describe("monthly quota", () => {
      it.effect("twenty live creations at once against a quota of 5: exactly five 201s; test intents are free", () =>
        Effect.gen(function*() {
          const user = yield* signUp({ tier: "enterprise", requests_per_minute: 10_000, intents_per_month: 5 })
          const replies = yield* Effect.all(
            Array.from({ length: 20 }, () => send("POST", "/api/v1/intents", { key: user.liveKey, json: marketOrder(user.alpacaId) })),
            { concurrency: "unbounded" }
          )
          expect(replies.filter((r) => r.status === 201)).toHaveLength(5)
          const over = replies.filter((r) => r.status === 429)
          expect(over).toHaveLength(15)
          for (const reply of over) expect(reply.body).toMatchObject({ error_code: "quota_exceeded" })
          const listed = yield* send("GET", "/api/v1/intents?page_size=100", { key: user.liveKey })
          expect((listed.body as { total_items: number }).total_items).toBe(5)
          const tests = yield* Effect.all(
            Array.from({ length: 10 }, () => send("POST", "/api/v1/intents", { key: user.testKey, json: marketOrder(user.mockId) })),
            { concurrency: "unbounded" }
          )
          expect(tests.every((r) => r.status === 201)).toBe(true)
        }))
    })
  })
}

/** A server whose addresses may fail authentication three times a minute. */
const throttled = [
  ["PGlite", TestServer.layer(Database.migrated(Database.pglite(undefined)), { authFailuresPerMinute: 3 })],
  ["PostgreSQL", TestServer.layer(Postgres.layerFresh, { authFailuresPerMinute: 3 })]
] as const

for (const [name, server] of throttled) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`failed authentication on ${name}`, (it) => {
    it.effect("is throttled per address: past the limit even a valid key gets 429 until the window ends", () =>
      Effect.gen(function*() {
        const user = yield* signUp()
        expect((yield* send("GET", "/api/v1/intents", { key: user.testKey })).status).toBe(200)
        const guesses = []
        for (let i = 0; i < 5; i++) {
          guesses.push(yield* send("GET", "/api/v1/intents", { key: `sk_test_${"A".repeat(31)}${i}` }))
        }
        expect(guesses.map((r) => r.status)).toEqual([401, 401, 401, 429, 429])
        const refused = guesses[3]!
        expect(refused.body).toMatchObject({
          error_code: "rate_limit_exceeded",
          detail: expect.stringMatching(/^Too many failed authentication attempts\. Retry after \d+ seconds\.$/)
        })
        expect(Number(refused.headers["retry-after"])).toBe((refused.body as { retry_after: number }).retry_after)
        const valid = yield* send("GET", "/api/v1/intents", { key: user.testKey })
        expect(valid.status).toBe(429)
        // The operator API has its own token and is not affected.
        expect((yield* TestServer.send("GET", `/admin/v1/users/${user.userId}`, {
          headers: { authorization: `Bearer ${TestServer.ADMIN_TOKEN}` }
        })).status).toBe(200)
      }))
  })
}
