import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import { Redis } from "ioredis"
import { decide, type RateDecision, rateWindow } from "../domain/Limits.js"
import * as SqlRateLimiter from "./SqlRateLimiter.js"
import * as Tracing from "../Tracing.js"

/** One atomic round trip: the window's count, bumped, with the key set to expire after the window. */
const INCREMENT = `local count = redis.call("INCR", KEYS[1])
if count == 1 then redis.call("EXPIREAT", KEYS[1], ARGV[1]) end
return count`

/** Counts requests per bucket (an API key) in fixed one-minute windows. */
export class RateLimiter extends Context.Tag("RateLimiter")<RateLimiter, {
  /** Counts one request and says whether it is within `limit` for the current window. */
  readonly consume: (bucket: string, limit: number) => Effect.Effect<RateDecision>
}>() {
  /** Windows kept in memory: one process only, driven by `TestClock` in tests. */
  static readonly layerInMemory = Layer.effect(
    this,
    Effect.gen(function*() {
      const windows = yield* Ref.make({
        map: new Map<string, { readonly start: number; readonly count: number }>(),
        swept: 0
      })
      return {
        consume: (bucket, limit) =>
          Effect.gen(function*() {
            const now = yield* DateTime.now
            const { start } = rateWindow(now)
            const count = yield* Ref.modify(windows, ({ map, swept }) => {
              // The first request of a new window drops the ended ones.
              const kept = start > swept ? new Map([...map].filter(([, window]) => window.start >= start)) : new Map(map)
              const current = kept.get(bucket)
              const count = current !== undefined && current.start === start ? current.count + 1 : 1
              return [count, { map: kept.set(bucket, { start, count }), swept: Math.max(swept, start) }]
            })
            return decide(limit, count, now)
          })
      }
    })
  )

  /** The count in the database, shared by every instance, taken in leases (see `SqlRateLimiter`). */
  static readonly layerSql = Layer.scoped(this, SqlRateLimiter.make)

  /** Deletes the rows of windows that ended more than a minute ago. */
  static readonly sweepSql = SqlRateLimiter.sweep

  /**
   * The count lives in Redis: one key per bucket and window, bumped with `INCR` (atomic across
   * instances) and expiring after the window. For deployments that want the count off the database.
   */
  static readonly layerRedis = (url: Redacted.Redacted<string>) =>
    Layer.scoped(
      this,
      Effect.gen(function*() {
        const redis = yield* Effect.acquireRelease(
          Effect.sync(() => new Redis(Redacted.value(url), { lazyConnect: false, maxRetriesPerRequest: 2 })),
          (client) => Effect.promise(() => client.quit().catch(() => "closed"))
        )
        return {
          consume: (bucket, limit) =>
            Effect.gen(function*() {
              const now = yield* DateTime.now
              const window = rateWindow(now)
              const key = `tir:rate:${bucket}:${window.start}`
              const count = yield* Effect.tryPromise(() => redis.eval(INCREMENT, 1, key, window.reset + 60))
              return decide(limit, Number(count), now)
            }).pipe(Effect.orDie, Tracing.span("RateLimiter.consume"))
        }
      })
    )

  /** No limit at all (the limiter-cost benchmark's baseline): every request is allowed. */
  static readonly layerUnlimited = Layer.succeed(this, {
    consume: (_bucket, limit) => Effect.map(DateTime.now, (now) => ({ ...decide(limit, 0, now), remaining: limit }))
  })
}
