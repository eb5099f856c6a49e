import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import { Redis } from "ioredis"
import * as Schema from "effect/Schema"
import { decide, type RateDecision, rateWindow } from "../domain/Limits.js"
import * as Batched from "../sql/Batched.js"

interface Counted {
  readonly bucket: string
  /** The start of the window the request falls in, in Unix seconds. */
  readonly windowStart: number
}

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

  /**
   * The count lives in the database, one row per bucket, bumped by an atomic upsert: every instance
   * on the database shares it. Requests that arrive together are counted in one statement (one
   * round trip for the lot): each bucket's row is bumped by its number of requests and each
   * request gets its own place in the new count, so the limit stays exact.
   */
  static readonly layerSql = Layer.scoped(
    this,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const bump = SqlSchema.findAll({
        Request: Schema.Array(Schema.Struct({ bucket: Schema.String, window_start: Schema.DateFromSelf, count: Schema.Int })),
        Result: Schema.Struct({ bucket: Schema.String, count: Schema.Int }),
        execute: (rows) =>
          sql`INSERT INTO rate_limits ${sql.insert(rows)}
              ON CONFLICT (bucket) DO UPDATE SET
                count = CASE WHEN rate_limits.window_start >= EXCLUDED.window_start
                             THEN rate_limits.count + EXCLUDED.count ELSE EXCLUDED.count END,
                window_start = GREATEST(rate_limits.window_start, EXCLUDED.window_start)
              RETURNING bucket, count`
      })

      const countBatch = (batch: ReadonlyArray<Counted>) =>
        Effect.gen(function*() {
          const byBucket = new Map<string, Array<number>>()
          batch.forEach((entry, i) => byBucket.set(entry.bucket, [...(byBucket.get(entry.bucket) ?? []), i]))
          // Rows in bucket order: two instances' batches lock shared buckets in the same order, so
          // they wait for each other instead of deadlocking.
          const rows = [...byBucket].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([bucket, positions]) => ({
            bucket,
            window_start: new Date(Math.max(...positions.map((i) => batch[i]?.windowStart ?? 0)) * 1000),
            count: positions.length
          }))
          const counted = yield* bump(rows)
          const totals = new Map(counted.map(({ bucket, count }) => [bucket, count]))
          // Each request of a bucket takes its own place in the bucket's new count.
          const exits = new Array<Exit.Exit<number>>(batch.length)
          for (const [bucket, positions] of byBucket) {
            const total = totals.get(bucket)
            positions.forEach((position, i) => {
              exits[position] = total === undefined
                ? Exit.die(`no count for ${bucket}`)
                : Exit.succeed(total - positions.length + i + 1)
            })
          }
          return exits
        }).pipe(Effect.orDie)

      const count = yield* Batched.make(countBatch, { maxBatch: 500, concurrency: 1 })

      // The first request of each new window sweeps, off the request's path: once a minute at most,
      // and not at all while nothing is counted (then nothing grows). No timer: a clock moved far
      // ahead (`TestClock`) would run one sweep per minute passed.
      const sweeps = yield* FiberSet.make()
      const swept = yield* Ref.make(0)
      const sweepOnNewWindow = (windowStart: number) =>
        Effect.flatMap(
          Ref.modify(swept, (last) => [windowStart > last, Math.max(last, windowStart)]),
          (due) =>
            due
              ? FiberSet.run(
                sweeps,
                RateLimiter.sweepSql.pipe(
                  Effect.provideService(SqlClient.SqlClient, sql),
                  Effect.catchAllCause((cause) => Effect.logWarning("rate_limits: ended windows not swept", cause))
                )
              )
              : Effect.void
        )

      return {
        consume: (bucket, limit) =>
          Effect.gen(function*() {
            const now = yield* DateTime.now
            const windowStart = rateWindow(now).start
            yield* sweepOnNewWindow(windowStart)
            return decide(limit, yield* count({ bucket, windowStart }), now)
          }).pipe(Effect.withSpan("RateLimiter.consume"))
      }
    })
  )

  /**
   * Deletes the rows of windows that ended more than a minute ago (a minute of slack for the clocks
   * of several instances): a row is recreated by its bucket's next request. Any number of instances
   * may sweep at once; a row bumped into a new window meanwhile no longer matches and stays.
   */
  static readonly sweepSql = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* DateTime.now
    const cutoff = new Date((rateWindow(now).start - 60) * 1000)
    yield* sql`DELETE FROM rate_limits WHERE window_start < ${cutoff}`
  }).pipe(Effect.withSpan("RateLimiter.sweep"))

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
            }).pipe(Effect.orDie, Effect.withSpan("RateLimiter.consume"))
        }
      })
    )

  /** No limit at all (the limiter-cost benchmark's baseline): every request is allowed. */
  static readonly layerUnlimited = Layer.succeed(this, {
    consume: (_bucket, limit) => Effect.map(DateTime.now, (now) => ({ ...decide(limit, 0, now), remaining: limit }))
  })
}
