import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { decide, type RateDecision, rateWindow } from "../domain/Limits.js"

/** Counts requests per bucket (an API key) in fixed one-minute windows. */
export class RateLimiter extends Context.Tag("RateLimiter")<RateLimiter, {
  /** Counts one request and says whether it is within `limit` for the current window. */
  readonly consume: (bucket: string, limit: number) => Effect.Effect<RateDecision>
}>() {
  /** Windows kept in memory: one process only, driven by `TestClock` in tests. */
  static readonly layerInMemory = Layer.effect(
    this,
    Effect.gen(function*() {
      const windows = yield* Ref.make(new Map<string, { readonly start: number; readonly count: number }>())
      return {
        consume: (bucket, limit) =>
          Effect.gen(function*() {
            const now = yield* DateTime.now
            const { start } = rateWindow(now)
            const count = yield* Ref.modify(windows, (map) => {
              const current = map.get(bucket)
              const count = current !== undefined && current.start === start ? current.count + 1 : 1
              return [count, new Map(map).set(bucket, { start, count })]
            })
            return decide(limit, count, now)
          })
      }
    })
  )

  /**
   * The count lives in the database, one row per bucket, bumped by a single atomic upsert: every
   * instance on the database shares it.
   */
  static readonly layerSql = Layer.effect(
    this,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const decodeCount = Schema.decodeUnknown(Schema.Array(Schema.Struct({ count: Schema.Number })))
      return {
        consume: (bucket, limit) =>
          Effect.gen(function*() {
            const now = yield* DateTime.now
            const start = new Date(rateWindow(now).start * 1000)
            const rows = yield* sql`
              INSERT INTO rate_limits (bucket, window_start, count) VALUES (${bucket}, ${start}, 1)
              ON CONFLICT (bucket) DO UPDATE SET
                count = CASE WHEN rate_limits.window_start >= EXCLUDED.window_start
                             THEN rate_limits.count + 1 ELSE 1 END,
                window_start = GREATEST(rate_limits.window_start, EXCLUDED.window_start)
              RETURNING count`.pipe(Effect.flatMap(decodeCount))
            return decide(limit, rows[0]?.count ?? 1, now)
          }).pipe(Effect.orDie, Effect.withSpan("RateLimiter.consume"))
      }
    })
  )
}
