import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BrokerKind } from "../../domain/Account.js"
import { BrokerId, IntentId } from "../../domain/Ids.js"
import { orderSpecOf } from "../../domain/Intent.js"
import {
  applyFailure,
  applyLocalCancel,
  applyRejection,
  clientOrderId,
  isFinal,
  type JobKind,
  type RoutingState,
  type Transition
} from "../../domain/Routing.js"
import type { BrokerOrder } from "../brokers/BrokerGateway.js"
import { IdGenerator } from "../IdGenerator.js"
import * as Batched from "../../sql/Batched.js"
import { orDie } from "../../sql/Defects.js"
import * as Outbox from "../../sql/Outbox.js"
import * as Tables from "../../sql/Tables.js"
import type { FollowUp, Job, RoutingContext, RoutingRepository } from "./RoutingRepository.js"
import * as JobEnds from "./SqlJobEnds.js"
import * as Recording from "./SqlRecording.js"
import * as Tracing from "../../Tracing.js"

const Timestamp = Schema.DateTimeUtcFromDate

/** The columns of an intent that routing reads. */
const IntentContext = Tables.Intents.row.pick(
  "id",
  "user_id",
  "mode",
  "status",
  "symbol",
  "side",
  "quantity",
  "order_type",
  "limit_price",
  "stop_price",
  "time_in_force",
  "extended_hours",
  "broker_id"
)

/** An intent's routing context: its columns, its connection's kind and where its routing stands. */
const ContextRow = Schema.Struct({
  ...IntentContext.fields,
  kind: BrokerKind,
  cancel_requested: Schema.Boolean,
  has_order: Schema.Boolean,
  filled: Schema.Number
})

/** What `ContextRow` decodes, as one JSON object, from `intents i` joined with `broker_connections b`. */
const contextObject = `json_build_object(
  ${Tables.rowFields(IntentContext, Tables.Intents.types, "i")},
  'kind', b.kind, 'cancel_requested', i.cancel_requested_at IS NOT NULL,
  'has_order', EXISTS (SELECT 1 FROM orders o WHERE o.intent_id = i.id),
  'filled', (SELECT coalesce(sum(f.quantity), 0) FROM orders o JOIN fills f ON f.order_id = o.id WHERE o.intent_id = i.id))`

/** A claimed job and its intent's context (null when the intent is gone). */
const ClaimRow = Schema.Struct({ ...JobEnds.JobClaim.fields, context: Schema.NullOr(ContextRow) })

const toContext = (row: typeof ContextRow.Type): RoutingContext => ({
  intentId: row.id,
  userId: row.user_id,
  mode: row.mode,
  status: row.status,
  spec: orderSpecOf(row),
  connection: { id: row.broker_id, kind: row.kind },
  clientOrderId: clientOrderId(row.id),
  hasOrder: row.has_order,
  cancelRequested: row.cancel_requested,
  filled: row.filled
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ids = yield* IdGenerator
  const newEventId = ids.eventId
  const lease = (duration: Duration.Duration) =>
    Effect.map(DateTime.now, (at) => ({ at, until: DateTime.addDuration(at, duration) }))

  const transitions = Outbox.make(sql, newEventId)
  const { applyAll, lockState } = transitions
  const ends = JobEnds.make(sql)
  const { endings, finishJobs } = ends
  const { recordHeardMany, recordMany } = yield* Recording.make(transitions, ends)

  const claimJobs = SqlSchema.findAll({
    Request: Schema.Struct({ at: Timestamp, until: Timestamp, limit: Schema.Int }),
    Result: ClaimRow,
    execute: ({ at, limit, until }) =>
      sql`
        WITH claimed AS (
          UPDATE routing_jobs j SET locked_until = ${until}, claims = j.claims + 1
          FROM (SELECT intent_id, kind FROM routing_jobs
                WHERE run_at <= ${at} AND (locked_until IS NULL OR locked_until < ${at})
                ORDER BY run_at LIMIT ${limit}
                FOR UPDATE SKIP LOCKED) due
          WHERE j.intent_id = due.intent_id AND j.kind = due.kind
          RETURNING j.intent_id, j.kind, j.claims, j.version
        )
        SELECT c.intent_id, c.kind, c.claims, c.version,
               CASE WHEN i.id IS NULL THEN NULL ELSE ${sql.literal(contextObject)} END AS context
        FROM claimed c
        LEFT JOIN intents i ON i.id = c.intent_id
        LEFT JOIN broker_connections b ON b.id = i.broker_id`
  })

  const selectNextDue = SqlSchema.single({
    Request: Schema.Void,
    Result: Schema.Struct({ due: Schema.NullOr(Timestamp) }),
    execute: () => sql`SELECT min(GREATEST(run_at, COALESCE(locked_until, run_at))) AS due FROM routing_jobs`
  })

  /**
   * Renews the leases of the jobs still claimed, skipping any whose row another transaction holds
   * (a recording ending the job, say): should the job still be claimed afterwards, the worker's next
   * renewal, well before the lease runs out, takes it. Waiting for such a row instead could
   * deadlock: a recording writes the rows of many jobs in one order and this statement in another
   * (seen under load: both stalled for PostgreSQL's `deadlock_timeout`, a second by default).
   */
  const extendLeases = SqlSchema.void({
    Request: Schema.Struct({ until: Timestamp, jobs: Schema.NonEmptyArray(JobEnds.JobClaim) }),
    execute: ({ jobs, until }) =>
      sql`UPDATE routing_jobs j SET locked_until = ${until}
          FROM (
            SELECT intent_id, kind FROM routing_jobs
            WHERE ${sql.or(jobs.map((job) => sql`(intent_id = ${job.intent_id} AND kind = ${job.kind} AND claims = ${job.claims} AND locked_until IS NOT NULL)`))}
            FOR UPDATE SKIP LOCKED
          ) free
          WHERE j.intent_id = free.intent_id AND j.kind = free.kind`
  })

  const upsertStream = SqlSchema.findAll({
    Request: Schema.Struct({ connection_id: BrokerId, holder: Schema.String, at: Timestamp, until: Timestamp }),
    Result: Schema.Struct({ holder: Schema.String }),
    execute: ({ at, connection_id, holder, until }) =>
      sql`INSERT INTO broker_streams (connection_id, holder, lease_until) VALUES (${connection_id}, ${holder}, ${until})
          ON CONFLICT (connection_id) DO UPDATE SET holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until
          WHERE broker_streams.holder = EXCLUDED.holder OR broker_streams.lease_until < ${at}
          RETURNING holder`
  })

  const deleteStream = SqlSchema.void({
    Request: Schema.Struct({ connection_id: BrokerId, holder: Schema.String }),
    execute: ({ connection_id, holder }) =>
      sql`DELETE FROM broker_streams WHERE connection_id = ${connection_id} AND holder = ${holder}`
  })

  const selectOpenOrders = SqlSchema.findAll({
    Request: BrokerId,
    Result: Schema.Struct({ intent_id: IntentId, broker_order_id: Schema.NullOr(Schema.String), filled: Schema.Number }),
    execute: (connectionId) =>
      sql`SELECT i.id AS intent_id, o.broker_order_id,
            (SELECT coalesce(sum(f.quantity), 0) FROM fills f WHERE f.order_id = o.id)::float8 AS filled
          FROM intents i JOIN orders o ON o.intent_id = i.id
          WHERE i.broker_id = ${connectionId} AND i.status IN ('pending', 'partially_filled')
          ORDER BY i.created_at`
  })

  const finishClaim = SqlSchema.void({
    Request: JobEnds.JobClaim,
    execute: (job) => sql`WITH ${finishJobs([job])} SELECT 1`
  })

  const rescheduleJob = SqlSchema.void({
    Request: Schema.Struct({ ...JobEnds.JobClaim.fields, run_at: Timestamp }),
    execute: (job) =>
      sql`UPDATE routing_jobs SET locked_until = NULL,
            run_at = CASE WHEN version = ${job.version} THEN ${job.run_at} ELSE LEAST(run_at, ${job.run_at}) END
          WHERE intent_id = ${job.intent_id} AND kind = ${job.kind} AND claims = ${job.claims}`
  })

  /** A transition no broker order caused (giving up, a cancel before submission), and the job's end. */
  const withoutOrder = (
    span: string,
    decide: (state: RoutingState, reason: string) => Transition
  ) =>
    Effect.fnUntraced(function*(intentId: IntentId, reason: string, done?: Job) {
      const transition = decide(yield* lockState(intentId), reason)
      yield* applyAll([{ intentId, transition }], DateTime.toDate(yield* DateTime.now), endings([{ intentId, transition, done }]))
      return transition
    }, sql.withTransaction, orDie, Tracing.span(span))

  return identity<Context.Tag.Service<typeof RoutingRepository>>({
    claim: Effect.fnUntraced(function*(limit: number, duration: Duration.Duration) {
      const rows = yield* claimJobs({ ...(yield* lease(duration)), limit })
      return rows.map((row) => ({
        intentId: row.intent_id,
        kind: row.kind,
        claims: row.claims,
        version: row.version,
        context: Option.map(Option.fromNullable(row.context), toContext)
      }))
    }, orDie, Tracing.span("RoutingRepository.claim")),

    nextDue: selectNextDue(undefined).pipe(
      Effect.map((row) => Option.fromNullable(row.due)),
      orDie,
      Tracing.span("RoutingRepository.nextDue")
    ),

    extend: Effect.fnUntraced(function*(jobs: ReadonlyArray<Job>, duration: Duration.Duration) {
      const [first, ...rest] = jobs.map(JobEnds.claimOf)
      if (first === undefined) return
      const { until } = yield* lease(duration)
      yield* extendLeases({ until, jobs: [first, ...rest] })
    }, orDie, Tracing.span("RoutingRepository.extend")),

    record: (intentId: IntentId, order: BrokerOrder, done?: Job, followUp?: FollowUp) =>
      Batched.single(recordMany)({ intentId, order, done, followUp }).pipe(
        Tracing.span("RoutingRepository.record", { attributes: { intent_id: intentId } })
      ),

    recordHeard: (connectionId: BrokerId, intentId: IntentId, order: BrokerOrder) =>
      Batched.single(recordHeardMany)({ intentId, order, via: connectionId }).pipe(
        Tracing.span("RoutingRepository.recordHeard", { attributes: { intent_id: intentId } })
      ),

    recordHeardMany: (words) =>
      recordHeardMany(words.map(({ connectionId, intentId, order }) => ({ intentId, order, via: connectionId }))).pipe(
        Tracing.span("RoutingRepository.recordHeardMany", { attributes: { "batch.size": words.length } })
      ),

    recordMany: (recordings) =>
      recordMany(recordings).pipe(
        Tracing.span("RoutingRepository.recordMany", { attributes: { "batch.size": recordings.length } })
      ),

    fail: withoutOrder("RoutingRepository.fail", applyFailure),

    cancelLocally: withoutOrder("RoutingRepository.cancelLocally", applyLocalCancel),

    reject: withoutOrder("RoutingRepository.reject", applyRejection),

    finish: Effect.fnUntraced(function*(job: Job) {
      yield* finishClaim(JobEnds.claimOf(job))
    }, orDie, Tracing.span("RoutingRepository.finish")),

    reschedule: Effect.fnUntraced(function*(job: Job, runAt: DateTime.Utc) {
      yield* rescheduleJob({ ...JobEnds.claimOf(job), run_at: runAt })
    }, orDie, Tracing.span("RoutingRepository.reschedule")),

    holdStream: Effect.fnUntraced(
      function*(connectionId: BrokerId, holder: string, duration: Duration.Duration) {
        const { at, until } = yield* lease(duration)
        return (yield* upsertStream({ connection_id: connectionId, holder, at, until })).length > 0
      },
      orDie,
      Tracing.span("RoutingRepository.holdStream")
    ),

    releaseStream: Effect.fnUntraced(function*(connectionId: BrokerId, holder: string) {
      yield* deleteStream({ connection_id: connectionId, holder })
    }, orDie, Tracing.span("RoutingRepository.releaseStream")),

    openOrders: Effect.fnUntraced(function*(connectionId: BrokerId) {
      return (yield* selectOpenOrders(connectionId)).map((row) => ({
        intentId: row.intent_id,
        clientOrderId: clientOrderId(row.intent_id),
        brokerOrderId: row.broker_order_id,
        filled: row.filled
      }))
    }, orDie, Tracing.span("RoutingRepository.openOrders")),

    enqueue: Effect.fnUntraced(function*(intentId: IntentId, kind: JobKind, runAt: DateTime.Utc) {
      // Under the intent's lock: a final word committing meanwhile either comes first (nothing is
      // queued) or ends this job with the intent's other waiting ones.
      const state = yield* lockState(intentId)
      if (!isFinal(state.status)) yield* transitions.enqueue(intentId, kind, runAt, yield* DateTime.now)
    }, sql.withTransaction, orDie, Tracing.span("RoutingRepository.enqueue"))
  })
})
