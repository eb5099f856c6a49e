import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as TestClock from "effect/TestClock"
import * as Crypto from "node:crypto"
import { RateLimiter } from "../../src/services/RateLimiter.js"
import * as Database from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** Every shared store, and the in-memory one, held to the same rules. */
const stores = [
  ["in memory", RateLimiter.layerInMemory],
  ["PGlite", RateLimiter.layerSql.pipe(Layer.provide(Database.migrated(Database.pglite(undefined))))],
  ["PostgreSQL", RateLimiter.layerSql.pipe(Layer.provide(Postgres.layerFresh))],
  ["Redis", RateLimiter.layerRedis(Redacted.make(REDIS_URL))]
] as const

const bucket = () => `test:${Crypto.randomBytes(8).toString("hex")}`

/** A time in the present (Redis expires keys by the wall clock), 10 s into a minute. */
const minuteStart = Math.floor(Date.now() / 60_000) * 60
const t0 = (minuteStart + 10) * 1000

for (const [name, store] of stores) {
  layer(store, { timeout: 60_000 })(`rate limiter: ${name}`, (it) => {
    it.effect("counts down to the limit, refuses past it, and resets at the time it announced", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        const key = bucket()
        yield* TestClock.setTime(t0)
        const decisions = []
        for (let i = 0; i < 4; i++) decisions.push(yield* limiter.consume(key, 3))
        expect(decisions.map((d) => [d.allowed, d.limit, d.remaining])).toEqual([
          [true, 3, 2],
          [true, 3, 1],
          [true, 3, 0],
          [false, 3, 0]
        ])
        const reset = decisions[3]?.reset ?? 0
        expect(reset).toBe(minuteStart + 60)
        expect(decisions[3]?.retryAfter).toBe(50)

        yield* TestClock.setTime(reset * 1000 - 1)
        expect((yield* limiter.consume(key, 3)).allowed).toBe(false)
        yield* TestClock.setTime(reset * 1000)
        const fresh = yield* limiter.consume(key, 3)
        expect([fresh.allowed, fresh.remaining, fresh.reset]).toEqual([true, 2, reset + 60])
        // Other buckets are counted apart.
        expect((yield* limiter.consume(bucket(), 3)).remaining).toBe(2)
      }))

    it.effect("200 requests at once against a limit of 60 admit exactly 60", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        const key = bucket()
        yield* TestClock.setTime(t0)
        const decisions = yield* Effect.all(Array.from({ length: 200 }, () => limiter.consume(key, 60)), {
          concurrency: "unbounded"
        })
        expect(decisions.filter((d) => d.allowed)).toHaveLength(60)
        expect(new Set(decisions.filter((d) => d.allowed).map((d) => d.remaining)).size).toBe(60)
      }))
  })
}
