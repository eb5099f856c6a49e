import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Crypto from "node:crypto"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { ApiKeyCache } from "../../src/services/accounts/ApiKeyCache.js"
import * as SqlAccountRepository from "../../src/services/accounts/SqlAccountRepository.js"
import { RateLimiter } from "../../src/services/RateLimiter.js"
import * as Services from "../../src/Services.js"
import * as Database from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"
import { awayFromMinuteEdge } from "../support/RateWindow.js"
import { admin, marketOrder, signUp } from "../support/Scenario.js"
import * as TestServer from "../support/TestServer.js"
import { bodyOf, type Reply, RetryBody, send, WithId } from "../support/TestServer.js"
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
          expect(listed.body).toMatchObject({ total_items: 5 })
          const tests = yield* Effect.all(
            Array.from({ length: 10 }, () => send("POST", "/api/v1/intents", { key: user.testKey, json: marketOrder(user.mockId) })),
            { concurrency: "unbounded" }
          )
          expect(tests.every((r) => r.status === 201)).toBe(true)
        }))
    })
  })
}

/** Key lookups in the database and limiter counts, made by a server since it started. */
interface Counts {
  lookups: number
  limited: number
}

/**
 * A server whose addresses may fail authentication three times a minute, its repository's key
 * lookups and its limiter's counts counted.
 */
const throttled = <E, R>(database: Layer.Layer<SqlClient.SqlClient | Database.Notifications, E, R>) => {
  const counts: Counts = { lookups: 0, limited: 0 }
  const options = { ...TestServer.options, authFailuresPerMinute: 3 }
  const accounts = Layer.effect(
    AccountRepository,
    Effect.map(SqlAccountRepository.make, (repository) =>
      AccountRepository.of({
        ...repository,
        findApiKeyByHash: (hash) => Effect.zipRight(Effect.sync(() => counts.lookups++), repository.findApiKeyByHash(hash))
      }))
  )
  const limiter = Layer.effect(
    RateLimiter,
    Effect.map(RateLimiter, (limiter) =>
      RateLimiter.of({ consume: (bucket, limit) => Effect.zipRight(Effect.sync(() => counts.limited++), limiter.consume(bucket, limit)) }))
  ).pipe(Layer.provide(RateLimiter.layerSql))
  const server = TestServer.withFakeAlpacas((alpaca) => {
    const ports = Layer.merge(Services.ports({ ...options, alpaca }), Layer.merge(accounts, limiter))
    return TestServer.serve(Services.withPorts(ports).pipe(Layer.provideMerge(database)), options)
  })
  return [counts, server] as const
}

const throttledServers = [
  ["PGlite", throttled(Database.migrated(Database.pglite(undefined)))],
  ["PostgreSQL", throttled(Postgres.layerFresh)]
] as const

/** Until the instance refuses unknown keys from memory (it has loaded them and hears their changes). */
const keysInMemory = Effect.gen(function*() {
  const cache = yield* ApiKeyCache
  const deadline = Date.now() + 10_000
  while (!(yield* cache.answersFromMemory)) {
    if (Date.now() > deadline) return yield* Effect.die(new Error("the API keys were not loaded"))
    yield* Effect.sleep("20 millis")
  }
})

const unknownKey = () => `sk_test_${Crypto.randomBytes(24).toString("base64url").replace(/[-_]/g, "A").slice(0, 32)}`

const expectTooManyFailures = (reply: Reply) => {
  expect(reply.status).toBe(429)
  expect(reply.body).toMatchObject({
    error_code: "rate_limit_exceeded",
    detail: expect.stringMatching(/^Too many failed authentication attempts\. Retry after \d+ seconds\.$/)
  })
  expect(Number(reply.headers["retry-after"])).toBeGreaterThan(0)
  expect(Number(reply.headers["retry-after"])).toBe(bodyOf(RetryBody, reply).retry_after)
}

for (const [name, [counts, server]] of throttledServers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`failed authentication on ${name}`, (it) => {
    it.effect("item 7: a valid key is never refused because of other clients' failures from its address", () =>
      Effect.gen(function*() {
        const user = yield* signUp()
        const revoked = yield* user.key("test")
        expect((yield* admin("DELETE", `/api-keys/${revoked.id}`)).status).toBe(204)
        yield* Effect.promise(awayFromMinuteEdge)
        const guesses = [
          yield* send("GET", "/api/v1/intents", { key: unknownKey() }),
          yield* send("GET", "/api/v1/intents", { key: "not-a-key" }),
          yield* send("GET", "/api/v1/intents", { key: revoked.key }),
          yield* send("GET", "/api/v1/intents", {}),
          yield* send("GET", "/api/v1/intents", { key: unknownKey() })
        ]
        expect(guesses.map((r) => r.status)).toEqual([401, 401, 401, 429, 429])
        guesses.slice(3).forEach(expectTooManyFailures)
        // The same address, a valid key: served, counted against its own limit only.
        const valid = yield* send("GET", "/api/v1/intents", { key: user.testKey })
        expect(valid.status).toBe(200)
        expect(limitHeaders(valid)).toMatchObject({ limit: "60", remaining: "59" })
        expectTooManyFailures(yield* send("GET", "/api/v1/intents", { key: unknownKey() }))
        expect((yield* send("POST", "/api/v1/intents", { key: user.testKey, json: marketOrder(user.mockId) })).status).toBe(201)
      }))

    it.effect("item 7: a flood of bad keys costs no database query per key", () =>
      Effect.gen(function*() {
        const user = yield* signUp()
        const revoked = yield* user.key("test")
        expect((yield* admin("DELETE", `/api-keys/${revoked.id}`)).status).toBe(204)
        yield* keysInMemory
        const before = { ...counts }
        const flood = yield* Effect.all(
          Array.from({ length: 100 }, (_, i) => send("GET", "/api/v1/intents", { key: i % 10 === 0 ? revoked.key : unknownKey() })),
          { concurrency: 10 }
        )
        expect(flood.every((r) => r.status === 401 || r.status === 429)).toBe(true)
        expect(counts).toEqual(before)
        // A valid key still is looked up once and counted against its limit.
        expect((yield* send("GET", "/api/v1/intents", { key: user.testKey })).status).toBe(200)
        expect(counts.limited).toBe(before.limited + 1)
        expect(counts.lookups).toBeLessThanOrEqual(before.lookups + 1)
      }))

    it.effect("item 7: wrong admin tokens are throttled per address with 429 and Retry-After; the right token still passes", () =>
      Effect.gen(function*() {
        yield* Effect.promise(awayFromMinuteEdge)
        const wrong = (token: string | undefined) =>
          send("GET", "/admin/v1/users/00000000-0000-4000-8000-000000000000", {
            headers: token === undefined ? {} : { authorization: `Bearer ${token}` }
          })
        const guesses = [yield* wrong("guess-1"), yield* wrong(undefined), yield* wrong("guess-2"), yield* wrong("guess-3"), yield* wrong("guess-4")]
        expect(guesses.map((r) => r.status)).toEqual([401, 401, 401, 429, 429])
        for (const reply of guesses.slice(3)) {
          expectTooManyFailures(reply)
          expect(reply.body).toMatchObject({ request_id: expect.stringMatching(/^req_/) })
        }
        const created = yield* admin("POST", "/users", { name: "Grace", tier: "pro" })
        expect(created.status).toBe(201)
        const user = bodyOf(WithId, created)
        expect((yield* admin("GET", `/users/${user.id}`)).status).toBe(200)
        expectTooManyFailures(yield* wrong("guess-5"))
      }))
  })
}
