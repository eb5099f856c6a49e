import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Mode } from "../../domain/Ids.js"
import { IntentStatus } from "../../domain/Intent.js"
import { orDie } from "../../sql/Defects.js"
import * as Tracing from "../../Tracing.js"

/** How much work stands in the database, as a metrics scrape reads it. */
export interface Stats {
  /** Intents by mode and status; a pair without any may be left out. */
  readonly intents: ReadonlyArray<{ readonly mode: Mode; readonly status: IntentStatus; readonly count: number }>
  /** Routing jobs due (waiting for a worker), running (leased by one) and scheduled for later. */
  readonly routingJobs: { readonly due: number; readonly running: number; readonly scheduled: number }
  /** How long the due job that has waited longest has waited, in seconds; 0 when none waits. */
  readonly routingOldestDueSeconds: number
  /** Webhook deliveries not yet succeeded or given up. */
  readonly webhookPending: number
  /** The age of the oldest of those, in seconds; 0 when there is none. */
  readonly webhookOldestPendingSeconds: number
}

/** Nothing stands: what the in-memory ports report. */
export const empty: Stats = {
  intents: [],
  routingJobs: { due: 0, running: 0, scheduled: 0 },
  routingOldestDueSeconds: 0,
  webhookPending: 0,
  webhookOldestPendingSeconds: 0
}

const Timestamp = Schema.DateTimeUtcFromDate

const secondsSince = (at: DateTime.Utc, then: DateTime.Utc | null) =>
  then === null ? 0 : Math.max(0, DateTime.distance(then, at) / 1000)

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const intentCounts = SqlSchema.findAll({
    Request: Schema.Void,
    Result: Schema.Struct({ mode: Mode, status: IntentStatus, count: Schema.Int }),
    // From the counts the triggers on `intents` keep (see the migration `0016_intent_counts`): no scan of the intents.
    execute: () =>
      sql`SELECT mode, status, sum(n)::int AS count FROM intent_counts GROUP BY mode, status HAVING sum(n) <> 0`
  })

  // A job is leased while `locked_until` lies ahead; otherwise due once `run_at` has come (as the claim sees it).
  const queues = SqlSchema.single({
    Request: Timestamp,
    Result: Schema.Struct({
      due: Schema.Int,
      running: Schema.Int,
      scheduled: Schema.Int,
      oldest_due: Schema.NullOr(Timestamp),
      pending: Schema.Int,
      oldest_pending: Schema.NullOr(Timestamp)
    }),
    execute: (at) =>
      sql`
        SELECT r.due, r.running, r.scheduled, r.oldest_due, w.pending, w.oldest_pending
        FROM (
          SELECT (count(*) FILTER (WHERE (locked_until IS NULL OR locked_until < ${at}) AND run_at <= ${at}))::int AS due,
                 (count(*) FILTER (WHERE locked_until >= ${at}))::int AS running,
                 (count(*) FILTER (WHERE (locked_until IS NULL OR locked_until < ${at}) AND run_at > ${at}))::int AS scheduled,
                 min(run_at) FILTER (WHERE (locked_until IS NULL OR locked_until < ${at}) AND run_at <= ${at}) AS oldest_due
          FROM routing_jobs
        ) r, (
          SELECT count(*)::int AS pending, min(created_at) AS oldest_pending
          FROM webhook_deliveries WHERE status = 'pending'
        ) w`
  })

  return {
    read: Effect.gen(function*() {
      const at = yield* DateTime.now
      const intents = yield* intentCounts(undefined)
      const row = yield* queues(at)
      return {
        intents,
        routingJobs: { due: row.due, running: row.running, scheduled: row.scheduled },
        routingOldestDueSeconds: secondsSince(at, row.oldest_due),
        webhookPending: row.pending,
        webhookOldestPendingSeconds: secondsSince(at, row.oldest_pending)
      } satisfies Stats
    }).pipe(orDie, Tracing.span("QueueStats.read"))
  }
})

/** The figures a metrics scrape reads from the database: intents by status, the routing and webhook queues. */
export class QueueStats extends Context.Tag("QueueStats")<QueueStats, {
  readonly read: Effect.Effect<Stats>
}>() {
  /** On the `SqlClient` in context: two statements, the same on PostgreSQL and PGlite. */
  static readonly layerSql = Layer.effect(this, make)
  /** No database: nothing stands. */
  static readonly layerInMemory = Layer.succeed(this, { read: Effect.succeed(empty) })
}
