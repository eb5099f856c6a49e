import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BrokerKind } from "../../domain/Account.js"
import { BrokerId, IntentId, Mode, UserId } from "../../domain/Ids.js"
import { IntentStatus, OrderType, Side, TimeInForce } from "../../domain/Intent.js"
import {
  applyFailure,
  applyLocalCancel,
  applyOrderUpdate,
  clientOrderId,
  type RoutingState,
  type Transition
} from "../../domain/Routing.js"
import { eventId, IdGenerator } from "../IdGenerator.js"
import { ROUTING_CHANNEL } from "../../sql/Channels.js"
import * as Outbox from "../../sql/Outbox.js"
import { type Job, type RoutingContext, RoutingRepository } from "./RoutingRepository.js"

const Amount = Schema.NumberFromString


const ContextRow = Schema.Struct({
  id: IntentId,
  user_id: UserId,
  mode: Mode,
  status: IntentStatus,
  symbol: Schema.String,
  side: Side,
  quantity: Amount,
  order_type: OrderType,
  limit_price: Schema.NullOr(Amount),
  stop_price: Schema.NullOr(Amount),
  time_in_force: TimeInForce,
  extended_hours: Schema.Boolean,
  broker_id: BrokerId,
  kind: BrokerKind,
  cancel_requested: Schema.Boolean,
  has_order: Schema.Boolean
})

/** What `ContextRow` decodes, as one JSON object, from `intents i` joined with `broker_connections b`. */
const contextObject = `json_build_object(
  'id', i.id, 'user_id', i.user_id, 'mode', i.mode, 'status', i.status, 'symbol', i.symbol, 'side', i.side,
  'quantity', i.quantity::text, 'order_type', i.order_type, 'limit_price', i.limit_price::text,
  'stop_price', i.stop_price::text, 'time_in_force', i.time_in_force, 'extended_hours', i.extended_hours,
  'broker_id', i.broker_id, 'kind', b.kind, 'cancel_requested', i.cancel_requested_at IS NOT NULL,
  'has_order', EXISTS (SELECT 1 FROM orders o WHERE o.intent_id = i.id))`

/** A claimed job and its intent's context (null when the intent is gone). */
const ClaimRow = Schema.Struct({
  intent_id: IntentId,
  kind: Schema.Literal("submit", "cancel", "sync"),
  claims: Schema.Number,
  version: Schema.Number,
  context: Schema.NullOr(ContextRow)
})

type ContextRow = typeof ContextRow.Type

const toContext = (row: ContextRow): RoutingContext => ({
  intentId: row.id,
  userId: row.user_id,
  mode: row.mode,
  status: row.status,
  spec: {
    symbol: row.symbol,
    side: row.side,
    quantity: row.quantity,
    order_type: row.order_type,
    limit_price: row.limit_price,
    stop_price: row.stop_price,
    time_in_force: row.time_in_force,
    extended_hours: row.extended_hours
  },
  connection: { id: row.broker_id, kind: row.kind },
  clientOrderId: clientOrderId(row.id),
  hasOrder: row.has_order,
  cancelRequested: row.cancel_requested
})


export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ids = yield* IdGenerator
  const newEventId = eventId.pipe(Effect.provideService(IdGenerator, ids))
  const decode = <A, I>(schema: Schema.Schema<A, I>) => Effect.flatMap(Schema.decodeUnknown(Schema.Array(schema)))
  const now = Effect.map(DateTime.now, DateTime.toDate)

  const transitions = Outbox.make(sql, newEventId)
  const { lockState } = transitions
  const applyTransition = transitions.apply

  const transact = <A, E>(effect: Effect.Effect<A, E>, span: string) =>
    effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die), Effect.withSpan(span))

  const enqueue = transitions.enqueue

  /**
   * A job's end, as common table expressions: deleted if this worker still holds it (no other claim
   * since) and it was not enqueued again meanwhile; if it was, handed back (and the workers woken)
   * to run again.
   */
  const finishJob = (job: Job) => {
    const held = sql`intent_id = ${job.intentId} AND kind = ${job.kind} AND claims = ${job.claims} AND locked_until IS NOT NULL`
    return sql`job_done AS (
        DELETE FROM routing_jobs WHERE ${held} AND version = ${job.version}
      ), job_again AS (
        UPDATE routing_jobs SET locked_until = NULL WHERE ${held} AND version <> ${job.version}
        RETURNING pg_notify(${ROUTING_CHANNEL}, kind)
      )`
  }

  /** A transition no broker order caused (giving up, a cancel before submission), and the job's end. */
  const withoutOrder = (
    intentId: IntentId,
    decide: (state: RoutingState, reason: string) => Transition,
    reason: string,
    done: Job | undefined,
    span: string
  ) =>
    transact(
      Effect.gen(function*() {
        const transition = decide(yield* lockState(intentId), reason)
        yield* applyTransition(intentId, transition, yield* now, done === undefined ? undefined : finishJob(done))
        return transition
      }),
      span
    )

  return RoutingRepository.of({
    claim: (limit, lease) =>
      Effect.gen(function*() {
        const at = yield* now
        const until = new Date(at.getTime() + Duration.toMillis(lease))
        const rows = yield* sql`
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
          LEFT JOIN broker_connections b ON b.id = i.broker_id`.pipe(decode(ClaimRow))
        return rows.map((row) => ({
          intentId: row.intent_id,
          kind: row.kind,
          claims: row.claims,
          version: row.version,
          context: Option.map(Option.fromNullable(row.context), toContext)
        }))
      }).pipe(Effect.orDie, Effect.withSpan("RoutingRepository.claim")),

    nextDue: Effect.gen(function*() {
      const [row] = yield* sql`SELECT min(GREATEST(run_at, COALESCE(locked_until, run_at))) AS due
                               FROM routing_jobs`.pipe(decode(Schema.Struct({ due: Schema.NullOr(Schema.DateTimeUtcFromDate) })))
      return Option.fromNullable(row?.due)
    }).pipe(Effect.orDie, Effect.withSpan("RoutingRepository.nextDue")),

    extend: (jobs, lease) =>
      jobs.length === 0 ? Effect.void : Effect.gen(function*() {
        const until = new Date((yield* now).getTime() + Duration.toMillis(lease))
        yield* sql`UPDATE routing_jobs SET locked_until = ${until}
                   WHERE ${sql.or(jobs.map((job) => sql`(intent_id = ${job.intentId} AND kind = ${job.kind} AND claims = ${job.claims} AND locked_until IS NOT NULL)`))}`
      }).pipe(Effect.orDie, Effect.withSpan("RoutingRepository.extend")),

    context: (intentId) =>
      sql`SELECT ${sql.literal(contextObject)} AS context
          FROM intents i JOIN broker_connections b ON b.id = i.broker_id
          WHERE i.id = ${intentId}`.pipe(
        decode(Schema.Struct({ context: ContextRow })),
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => toContext(row.context))),
        Effect.orDie,
        Effect.withSpan("RoutingRepository.context")
      ),

    record: (intentId, order, done) =>
      transact(
        Effect.gen(function*() {
          const at = yield* now
          const state = yield* lockState(intentId)
          const transition = applyOrderUpdate(state, {
            status: order.status,
            reason: order.reason,
            fills: order.fills.map(({ id, price, quantity }) => ({ id, price, quantity }))
          })
          // The order and its new fills: one statement.
          const fills = yield* Effect.forEach(transition.fills, (fill) =>
            Effect.map(ids.uuid, (id) => {
              const filledAt = order.fills.find((f) => f.id === fill.id)?.filledAt
              return {
                id,
                broker_fill_id: fill.id,
                quantity: fill.quantity,
                price: fill.price,
                filled_at: filledAt === undefined ? at.toISOString() : DateTime.formatIso(filledAt)
              }
            }))
          yield* sql`
            WITH saved AS (
              INSERT INTO orders (id, intent_id, client_order_id, broker_order_id, status, created_at, updated_at)
              VALUES (${yield* ids.uuid}, ${intentId}, ${order.clientOrderId}, ${order.brokerOrderId}, ${order.status},
                      ${at}, ${at})
              ON CONFLICT (client_order_id) DO UPDATE SET
                broker_order_id = EXCLUDED.broker_order_id,
                status = EXCLUDED.status,
                updated_at = CASE WHEN orders.status = EXCLUDED.status THEN orders.updated_at ELSE EXCLUDED.updated_at END
              RETURNING id
            )
            INSERT INTO fills (id, order_id, broker_fill_id, quantity, price, filled_at)
            SELECT f.id, saved.id, f.broker_fill_id, f.quantity, f.price, f.filled_at
            FROM saved, json_to_recordset(${JSON.stringify(fills)}::json)
              AS f(id uuid, broker_fill_id text, quantity numeric, price numeric, filled_at timestamptz)
            ON CONFLICT (order_id, broker_fill_id) DO NOTHING`
          // The transition (status, event, deliveries) and the job's end: one statement.
          yield* applyTransition(intentId, transition, at, done === undefined ? undefined : finishJob(done))
          return transition
        }),
        "RoutingRepository.record"
      ),

    fail: (intentId, reason, done) => withoutOrder(intentId, applyFailure, reason, done, "RoutingRepository.fail"),

    cancelLocally: (intentId, reason, done) =>
      withoutOrder(intentId, applyLocalCancel, reason, done, "RoutingRepository.cancelLocally"),

    finish: (job) =>
      sql`WITH ${finishJob(job)} SELECT 1`.pipe(Effect.asVoid, Effect.orDie, Effect.withSpan("RoutingRepository.finish")),

    reschedule: (job, runAt) =>
      sql`UPDATE routing_jobs SET locked_until = NULL,
            run_at = CASE WHEN version = ${job.version} THEN ${DateTime.toDate(runAt)}
                          ELSE LEAST(run_at, ${DateTime.toDate(runAt)}) END
          WHERE intent_id = ${job.intentId} AND kind = ${job.kind} AND claims = ${job.claims}`.pipe(
        Effect.asVoid,
        Effect.orDie,
        Effect.withSpan("RoutingRepository.reschedule")
      ),

    enqueue: (intentId, kind, runAt) =>
      Effect.flatMap(now, (at) => enqueue(intentId, kind, DateTime.toDate(runAt), at)).pipe(
        Effect.asVoid,
        Effect.orDie,
        Effect.withSpan("RoutingRepository.enqueue")
      )
  })
})
