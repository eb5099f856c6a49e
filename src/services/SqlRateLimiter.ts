import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Schema from "effect/Schema"
import { decide, granted, leaseSize, type RateDecision, rateWindow } from "../domain/Limits.js"
import * as Batched from "../sql/Batched.js"
import * as Tracing from "../Tracing.js"

/** A lease asked for: `size` more requests of `bucket` in the window starting at `windowStart` (Unix seconds). */
interface LeaseRequest {
  readonly bucket: string
  readonly windowStart: number
  readonly size: number
}

/** What this instance holds of a bucket's current window. */
interface Lease {
  readonly window: number
  /** Requests this instance may admit in the window, of which `used` are admitted. */
  granted: number
  used: number
  /**
   * The shared count (every instance's leases) at this instance's last granted request: where the
   * last lease left it, less what that lease asked for beyond the limit.
   */
  total: number
  /** The shared count reached the limit: refused until the window ends, with no round trip. */
  exhausted: boolean
  /** A lease on its way: the bucket's other requests wait for it instead of asking for their own. */
  pending: Deferred.Deferred<void> | undefined
  /** The size of the last lease asked for. */
  size: number
}

type Step =
  /** Admitted at `count`; with `ahead`, the next lease (of that size) is to be taken now, off the request's path. */
  | { readonly _tag: "Admit"; readonly count: number; readonly ahead?: number }
  | { readonly _tag: "Refuse" }
  | { readonly _tag: "Wait"; readonly lease: Deferred.Deferred<void> }
  | { readonly _tag: "Lease"; readonly size: number }

/**
 * Deletes the rows of windows that ended more than a minute ago (a minute of slack for the clocks
 * of several instances): a row is recreated by its bucket's next request. Any number of instances
 * may sweep at once; a row bumped into a new window meanwhile no longer matches and stays.
 */
export const sweep = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = yield* DateTime.now
  const cutoff = new Date((rateWindow(now).start - 60) * 1000)
  yield* sql`DELETE FROM rate_limits WHERE window_start < ${cutoff}`
}).pipe(Tracing.span("RateLimiter.sweep"))

/**
 * The count lives in the database, one row per bucket, shared by every instance; each instance
 * takes leases of it (`leaseSize`: one request at a time for small limits) and admits requests
 * from its lease in memory, so a busy key costs one round trip per lease, not per request. Once
 * half of a lease (of more than one request) is used, the next is taken ahead, beside the
 * requests, so that a busy key's requests find it in hand instead of waiting for the database.
 * Leases that several buckets need at once go in one statement. The limit is never exceeded
 * across instances; what an instance holds unused when the key no longer reaches it (at most the
 * half left of its lease and the next one) is lost for the window.
 */
export const make = Effect.gen(function*() {
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

  /** Each lease's shared count once bumped by it; a bucket's leases of one batch in one row. */
  const leaseBatch = (batch: ReadonlyArray<LeaseRequest>) =>
    Effect.gen(function*() {
      const byBucket = new Map<string, Array<number>>()
      batch.forEach((entry, i) => byBucket.set(entry.bucket, [...(byBucket.get(entry.bucket) ?? []), i]))
      const sizeAt = (i: number) => batch[i]?.size ?? 0
      // Rows in bucket order: two instances' batches lock shared buckets in the same order, so
      // they wait for each other instead of deadlocking.
      const rows = [...byBucket].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([bucket, positions]) => ({
        bucket,
        window_start: new Date(Math.max(...positions.map((i) => batch[i]?.windowStart ?? 0)) * 1000),
        count: positions.reduce((sum, i) => sum + sizeAt(i), 0)
      }))
      const totals = new Map((yield* bump(rows)).map(({ bucket, count }) => [bucket, count]))
      const exits = new Array<Exit.Exit<number>>(batch.length)
      for (const [bucket, positions] of byBucket) {
        const total = totals.get(bucket)
        // Each lease takes its own place in the bucket's new count, in the batch's order.
        let after = positions.reduce((sum, i) => sum + sizeAt(i), 0)
        for (const position of positions) {
          after -= sizeAt(position)
          exits[position] = total === undefined ? Exit.die(`no count for ${bucket}`) : Exit.succeed(total - after)
        }
      }
      return exits
    }).pipe(Effect.orDie)

  const lease = yield* Batched.make(leaseBatch, { name: "rate_limit_lease", maxBatch: 500, concurrency: 1 })
  const leases = new Map<string, Lease>()

  /** One synchronous step on the bucket's lease: admit from it, refuse, wait for the lease on its way, or ask for one. */
  const step = (bucket: string, limit: number, window: number): Step => {
    let current = leases.get(bucket)
    if (current === undefined || current.window < window) {
      current = { window, granted: 0, used: 0, total: 0, exhausted: false, pending: undefined, size: 0 }
      leases.set(bucket, current)
    }
    if (current.used < current.granted) {
      current.used += 1
      const left = current.granted - current.used
      const count = current.total - left
      // Half of a lease used: the next one is taken now, so that the key's requests find it in
      // hand instead of waiting for the database. Not for leases of one (small limits stay exact).
      return current.size > 1 && left * 2 <= current.size && !current.exhausted && current.pending === undefined
        ? { _tag: "Admit", count, ahead: leaseSize(limit, current.total) }
        : { _tag: "Admit", count }
    }
    if (current.exhausted) return { _tag: "Refuse" }
    if (current.pending !== undefined) return { _tag: "Wait", lease: current.pending }
    return { _tag: "Lease", size: leaseSize(limit, current.total) }
  }

  /** Asks the database for a lease; the bucket's requests meanwhile wait for it. */
  const takeLease = (bucket: string, limit: number, window: number, size: number) =>
    Effect.gen(function*() {
      const done = yield* Deferred.make<void>()
      const current = leases.get(bucket)
      if (current === undefined || current.window !== window || current.pending !== undefined) return
      current.pending = done
      current.size = size
      yield* lease({ bucket, windowStart: window, size }).pipe(
        Effect.tap((total) =>
          Effect.sync(() => {
            const got = granted(limit, size, total)
            current.granted += got
            // A lease granted in part ends at the limit: its last request is the limit's last.
            current.total = total - (size - got)
            current.exhausted = got < size
          })
        ),
        Effect.onExit((exit) =>
          Effect.zipRight(
            Effect.sync(() => (current.pending = undefined)),
            Deferred.done(done, Exit.asVoid(exit))
          )
        )
      )
    })

  // Leases taken ahead run beside the requests, in the limiter's scope: a request that ends (or is
  // interrupted) does not take its bucket's next lease down with it. A failed one is taken again
  // by the next request that needs it, on its own path.
  const aheads = yield* FiberSet.make()
  const takeAhead = (bucket: string, limit: number, window: number, size: number) =>
    takeLease(bucket, limit, window, size).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("rate_limits: a lease taken ahead failed", cause))
    )

  // The first request of each new window sweeps ended rows and forgets ended leases, off the
  // request's path: once a minute at most, and not at all while nothing is counted. No timer: a
  // clock moved far ahead (`TestClock`) would run one sweep per minute passed.
  const sweeps = yield* FiberSet.make()
  let swept = 0
  /** The first request of a new window forgets ended leases and sweeps ended rows, off its path. */
  const sweepOnNewWindow = (windowStart: number) => {
    swept = windowStart
    for (const [bucket, held] of leases) if (held.window < windowStart && held.pending === undefined) leases.delete(bucket)
    return FiberSet.run(
      sweeps,
      sweep.pipe(
        Effect.provideService(SqlClient.SqlClient, sql),
        Effect.catchAllCause((cause) => Effect.logWarning("rate_limits: ended windows not swept", cause))
      )
    )
  }

  /** The request admitted or refused from the bucket's lease; first waiting for the lease on its way, or taking one. */
  const settle = (bucket: string, limit: number, window: number, now: DateTime.Utc): Effect.Effect<RateDecision> => {
    const next = step(bucket, limit, window)
    switch (next._tag) {
      case "Admit":
        return next.ahead === undefined
          ? Effect.succeed(decide(limit, next.count, now))
          : Effect.as(FiberSet.run(aheads, takeAhead(bucket, limit, window, next.ahead)), decide(limit, next.count, now))
      case "Refuse":
        return Effect.succeed(decide(limit, limit + 1, now))
      case "Wait":
        // Whatever became of the lease: a failed one is asked for again, by this request.
        return Effect.zipRight(Effect.exit(Deferred.await(next.lease)), Effect.suspend(() => settle(bucket, limit, window, now)))
      case "Lease":
        return Effect.zipRight(
          takeLease(bucket, limit, window, next.size),
          Effect.suspend(() => settle(bucket, limit, window, now))
        )
    }
  }

  // Most requests are admitted from the lease in memory: the clock read and the decision taken in
  // one step of the runtime (`DateTime.now` and a `flatMap` on it took four more).
  const consume = (bucket: string, limit: number): Effect.Effect<RateDecision> =>
    Effect.clockWith((clock) => {
      const now = DateTime.unsafeMake(clock.unsafeCurrentTimeMillis())
      const window = rateWindow(now).start
      const sweeping = window > swept ? sweepOnNewWindow(window) : undefined
      const decided = settle(bucket, limit, window, now)
      return sweeping === undefined ? decided : Effect.zipRight(sweeping, decided)
    })

  return { consume }
})
