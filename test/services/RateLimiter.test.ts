import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as TestClock from "effect/TestClock"
import * as Crypto from "node:crypto"
import { leaseSize, rateWindow } from "../../src/domain/Limits.js"
import { RateLimiter } from "../../src/services/RateLimiter.js"
import * as SqlRateLimiter from "../../src/services/SqlRateLimiter.js"
import * as Database from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** Every shared store, and the in-memory one, held to the same rules. */
const stores = [
  ["in memory", RateLimiter.layerInMemory],
  ["PGlite", RateLimiter.layerSql.pipe(Layer.provideMerge(Database.migrated(Database.pglite(undefined))))],
  ["PostgreSQL", RateLimiter.layerSql.pipe(Layer.provideMerge(Postgres.layerFresh))],
  ["Redis", RateLimiter.layerRedis(Redacted.make(REDIS_URL))]
] as const

const bucket = () => `test:${Crypto.randomBytes(8).toString("hex")}`

/** A time in the present (Redis expires keys by the wall clock), 10 s into a minute. */
const minuteStart = Math.floor(Date.now() / 60_000) * 60
const t0 = (minuteStart + 10) * 1000

/** The database the store runs on. */
const database = Effect.flatMap(
  Effect.serviceOption(SqlClient.SqlClient),
  Option.match({ onNone: () => Effect.dieMessage("no database"), onSome: Effect.succeed })
)

/** A bucket's shared count, as every instance's leases left it. */
const countOf = (sql: SqlClient.SqlClient, key: string) =>
  sql<{ count: number }>`SELECT count FROM rate_limits WHERE bucket = ${key}`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? 0)),
    Effect.orDie
  )

/** `count` requests of the window at `now` counted by other instances. */
const countedElsewhere = (sql: SqlClient.SqlClient, key: string, now: number, count: number) =>
  sql`INSERT INTO rate_limits (bucket, window_start, count)
      VALUES (${key}, ${new Date(rateWindow(DateTime.unsafeMake(now)).start * 1000)}, ${count})`.pipe(Effect.orDie)

/** Work done off the requests' path: waits (real time, up to 5 s) for `read` to give `expected`. */
const eventually = <A>(read: Effect.Effect<A>, expected: A) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 5_000
    while (JSON.stringify(yield* read) !== JSON.stringify(expected) && Date.now() < deadline) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
    }
    expect(yield* read).toEqual(expected)
  })

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

    if (name === "PGlite" || name === "PostgreSQL") {
      it.effect("item 11: the rows of windows that ended more than a minute ago are swept", () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter
          const sql = yield* database
          const [old, recent, current] = [bucket(), bucket(), bucket()]
          // Later than the other tests went: the limiter has swept up to there already.
          const t1 = t0 + 600_000
          const left = sql<{ bucket: string }>`SELECT bucket FROM rate_limits WHERE bucket IN (${old}, ${recent}, ${current})`.pipe(
            Effect.map((rows) => rows.map((row) => row.bucket).sort()),
            Effect.orDie
          )
          yield* TestClock.setTime(t1 - 180_000)
          yield* limiter.consume(old, 5)
          // The first request of a later window sweeps: the old window ended 70 s before it.
          yield* TestClock.setTime(t1 - 60_000)
          yield* limiter.consume(recent, 5)
          yield* eventually(left, [recent])
          // The recent window ended 10 s ago: it stays.
          yield* TestClock.setTime(t1)
          yield* limiter.consume(current, 5)
          yield* eventually(left, [recent, current].sort())
          // A minute on it goes; a swept bucket starts from a fresh row.
          yield* TestClock.setTime(t1 + 60_000)
          expect((yield* limiter.consume(old, 5)).remaining).toBe(4)
          yield* eventually(left, [old, current].sort())
          // The sweep alone, as every instance runs it: nothing more to delete at this time.
          yield* RateLimiter.sweepSql.pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
          expect(yield* left).toEqual([old, current].sort())
        }))

      it.effect("a lease granted in part admits every request it was granted: the last one of the limit is admitted, not refused", () =>
        Effect.gen(function*() {
          const sql = yield* database
          const limiter = yield* SqlRateLimiter.make.pipe(Effect.provideService(SqlClient.SqlClient, sql))
          const now = t0 + 1_500_000
          yield* TestClock.setTime(now)
          const key = bucket()
          const limit = 100
          // Other instances have counted 99 of the window; this one asks for a lease of 2, as it
          // has seen no count yet: 1 is left, so it is granted 1, and admits it, the 100th.
          yield* countedElsewhere(sql, key, now, 99)
          expect(leaseSize(limit, 0)).toBe(2)
          const last = yield* limiter.consume(key, limit)
          expect([last.allowed, last.remaining]).toEqual([true, 0])
          expect((yield* limiter.consume(key, limit)).allowed).toBe(false)
        }).pipe(Effect.scoped))

      it.effect("half of a lease used, the next is taken ahead, before any request needs it", () =>
        Effect.gen(function*() {
          const sql = yield* database
          const limiter = yield* SqlRateLimiter.make.pipe(Effect.provideService(SqlClient.SqlClient, sql))
          yield* TestClock.setTime(t0 + 1_600_000)
          const [busy, small] = [bucket(), bucket()]
          const limit = 5_000
          const size = leaseSize(limit, 0)
          // Half of the first lease used: the second is taken beside the requests.
          const decisions = []
          for (let i = 0; i < size / 2; i++) decisions.push(yield* limiter.consume(busy, limit))
          yield* eventually(countOf(sql, busy), size * 2)
          // The requests' counts stay exact on one instance, through both leases.
          for (let i = size / 2; i < size * 3 / 2 - 1; i++) decisions.push(yield* limiter.consume(busy, limit))
          expect(decisions.map((d) => d.remaining)).toEqual(Array.from({ length: decisions.length }, (_, i) => limit - 1 - i))
          // A small limit is leased one request at a time, and nothing is taken ahead: exact.
          expect(leaseSize(60, 0)).toBe(1)
          expect((yield* limiter.consume(small, 60)).remaining).toBe(59)
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
          expect(yield* countOf(sql, small)).toBe(1)
        }).pipe(Effect.scoped))

      it.effect("a busy key is counted in leases: one row bump per lease, never past the limit across instances", () =>
        Effect.gen(function*() {
          const sql = yield* database
          const shared = countOf(sql, "lease:" + name)
          // Two instances on one database, each with its own leases.
          const [a, b] = yield* Effect.all([SqlRateLimiter.make, SqlRateLimiter.make]).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          yield* TestClock.setTime(t0 + 1_200_000)
          const limit = 5_000
          // 249 requests on one instance: a lease of 100 (2% of the limit) is asked for 3 times,
          // the third ahead of the requests that use it (the fourth would be asked for by the 250th).
          const first = []
          for (let i = 0; i < 249; i++) first.push(yield* a.consume("lease:" + name, limit))
          expect(first.every((d) => d.allowed)).toBe(true)
          expect(first.map((d) => d.remaining)).toEqual(Array.from({ length: 249 }, (_, i) => limit - 1 - i))
          expect(yield* shared).toBe(leaseSize(limit, 0) * 3)
          // Then 6,000 more at once over both instances. Never past the limit: what the instance
          // whose share of the burst ran out first holds unused is lost to the other instance for
          // the window (at most a lease and a half: the half left of one, and the next taken
          // ahead), but stays usable where it is.
          const burst = yield* Effect.all(
            Array.from({ length: 6_000 }, (_, i) => (i % 2 === 0 ? a : b).consume("lease:" + name, limit)),
            { concurrency: "unbounded" }
          )
          const admitted = burst.filter((d) => d.allowed).length
          expect(admitted).toBeLessThanOrEqual(limit - 249)
          expect(admitted).toBeGreaterThanOrEqual(limit - 249 - leaseSize(limit, 0) * 3 / 2)
          expect(burst.filter((d) => !d.allowed).every((d) => d.remaining === 0 && d.retryAfter > 0)).toBe(true)
          // Each instance admits what its leases leave, until it finds the limit reached (an instance
          // whose last lease was granted whole needs one more upsert for that, which may grant it the
          // last few). All told, exactly the limit was admitted.
          const rest = (limiter: typeof a) =>
            Effect.iterate({ admitted: 0, refused: false }, {
              while: ({ admitted, refused }) => !refused && admitted <= limit,
              body: ({ admitted }) =>
                Effect.map(limiter.consume("lease:" + name, limit), (d) =>
                  d.allowed ? { admitted: admitted + 1, refused: false } : { admitted, refused: true })
            }).pipe(Effect.map(({ admitted }) => admitted))
          const leftOver = (yield* rest(a)) + (yield* rest(b))
          expect(249 + admitted + leftOver).toBe(limit)
          // From then on, refusals cost no round trip: the shared count stays where the leases left it.
          const settled = yield* shared
          for (let i = 0; i < 10; i++) {
            expect((yield* a.consume("lease:" + name, limit)).allowed).toBe(false)
            expect((yield* b.consume("lease:" + name, limit)).allowed).toBe(false)
          }
          expect(yield* shared).toBe(settled)
        }).pipe(Effect.scoped))
    }
  })
}
