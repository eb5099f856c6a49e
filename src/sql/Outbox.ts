import type * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { IntentId } from "../domain/Ids.js"
import { Fill, Order, TradeIntent } from "../domain/Intent.js"
import { eventType, type JobKind, type RoutingState, type Transition } from "../domain/Routing.js"
import { EVENTS_CHANNEL, ROUTING_CHANNEL, WEBHOOK_CHANNEL } from "./Channels.js"
import * as Tables from "./Tables.js"

/** A timestamp column as the API writes it: ISO 8601 UTC with milliseconds and `Z`. */
export const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/** A column's value in the API's format: numbers as JSON numbers, times as {@link iso}. */
const apiValue = (expression: string, type: Tables.SqlType) =>
  type === "numeric" ? `${expression}::float8` : type === "timestamptz" ? iso(expression) : expression

/** `'a', x.a, …` for a `json_build_object`: the columns of `table` that `view` shows, in the API's format. */
const apiFields = <F extends Schema.Struct.Fields>(table: Tables.Table<F>, view: Schema.Struct.Fields, alias: string) =>
  Tables.shownColumns(table, view).map((column) => `'${column}', ${apiValue(`${alias}.${column}`, table.types[column])}`)
    .join(", ")

/**
 * An intent with its orders and their fills, built as one JSON document by the database so that a
 * lookup is one round trip, in exactly the API's format (ISO 8601 UTC with `Z`, JSON numbers): it
 * decodes through the response schema, and events carry it as GET shows it. The statements call it
 * as the function `intent_document(intents)` that a migration defines with this body: a change
 * here needs a migration that replaces the function.
 */
export const intentObject = `json_build_object(
  ${apiFields(Tables.Intents, TradeIntent.fields, "i")},
  'orders', COALESCE((
    SELECT json_agg(json_build_object(
      ${apiFields(Tables.Orders, Order.fields, "o")},
      'fills', COALESCE((
        SELECT json_agg(json_build_object(${apiFields(Tables.Fills, Fill.fields, "f")}) ORDER BY f.filled_at, f.id)
        FROM fills f WHERE f.order_id = o.id), '[]'::json)) ORDER BY o.created_at, o.id)
    FROM orders o WHERE o.intent_id = i.id), '[]'::json))`

/**
 * The common table expressions `event` and `deliveries`: for each row of `source` (a FROM clause in
 * which `i` has the intents table's columns: the table itself, or the rows an INSERT or UPDATE of
 * the same statement returns), an event whose `data` is the intent as a GET would show it now
 * (the event envelope's `data`), and one delivery for each enabled endpoint of the intent's user and mode
 * that subscribes to its type.
 */
export const eventTables = (
  sql: SqlClient.SqlClient,
  source: Statement.Fragment,
  event: { readonly id: Statement.Fragment; readonly type: string; readonly at: Statement.Fragment }
) =>
  sql`event AS (
        INSERT INTO events (id, user_id, mode, intent_id, type, data, created_at)
        SELECT ${event.id}, i.user_id, i.mode, i.id, ${event.type}, intent_document(i::intents), ${event.at}
        FROM ${source}
        RETURNING id, user_id, mode, type, created_at
      ), deliveries AS (
        INSERT INTO webhook_deliveries (id, endpoint_id, event_id, status, next_attempt_at, created_at, updated_at)
        SELECT gen_random_uuid(), w.id, event.id, 'pending', event.created_at, event.created_at, event.created_at
        FROM event JOIN webhook_endpoints w
          ON w.user_id = event.user_id AND w.mode = event.mode AND w.disabled_at IS NULL AND w.events @> to_jsonb(event.type)
        RETURNING 1
      )`

/** Wakes the event streams of each user and mode `event` (of `eventTables`) wrote to, at commit. */
export const EVENTS_WRITTEN =
  `(SELECT count(pg_notify('${EVENTS_CHANNEL}', user_id::text || ':' || mode)) FROM event) AS events_written`

/** Wakes the delivery workers at commit when `deliveries` (of `eventTables`) made any. */
export const DELIVERIES_DUE = `(SELECT pg_notify('${WEBHOOK_CHANNEL}', 'due') FROM (SELECT 1 FROM deliveries LIMIT 1) due)`

/** What the transition function needs of an intent: its status, quantity and fills. */
const StateRow = Schema.Struct({
  ...Tables.Intents.row.pick("status", "quantity").fields,
  fills: Schema.Array(Schema.Struct({ id: Schema.String, quantity: Tables.Fills.row.fields.quantity }))
})

/** Routing work to add, or to move to `run_at` if already queued. */
const NewJob = Tables.RoutingJobs.row.pick("intent_id", "kind", "run_at", "created_at")

/** The SQL steps every state change shares, to be run inside the caller's transaction. */
export const make = (sql: SqlClient.SqlClient, newEventId: Effect.Effect<string>) => {
  const selectState = SqlSchema.findOne({
    Request: IntentId,
    Result: StateRow,
    execute: (intentId) =>
      sql`
        SELECT i.status, i.quantity::text AS quantity,
               COALESCE((SELECT json_agg(json_build_object('id', f.broker_fill_id, 'quantity', f.quantity::text))
                         FROM fills f JOIN orders o ON o.id = f.order_id
                         WHERE o.intent_id = i.id), '[]'::json) AS fills
        FROM intents i WHERE i.id = ${intentId} FOR UPDATE OF i`
  })

  const insertJob = SqlSchema.void({
    Request: NewJob,
    execute: (job) =>
      sql`WITH job AS (
            INSERT INTO routing_jobs (${sql.literal(Tables.columnList(NewJob))})
            VALUES (${job.intent_id}, ${job.kind}, ${job.run_at}, ${job.created_at})
            ON CONFLICT (intent_id, kind) DO UPDATE SET run_at = EXCLUDED.run_at, version = routing_jobs.version + 1
          )
          SELECT pg_notify(${ROUTING_CHANNEL}, ${job.kind})`
  })

  return {
    /** Locks the intent and reads what the transition function needs, fills included: one round trip. */
    lockState: (intentId: IntentId) =>
      Effect.flatMap(
        selectState(intentId),
        Option.match({
          onNone: () => Effect.dieMessage(`intent ${intentId} vanished`),
          onSome: (state): Effect.Effect<RoutingState> => Effect.succeed(state)
        })
      ),

    /**
     * Writes a transition's status and its one event (with its deliveries): one statement, which
     * also runs `also` (common table expressions of data-modifying statements, such as a job's end)
     * when given.
     */
    apply: (intentId: IntentId, transition: Transition, at: Date, also?: Statement.Fragment) =>
      transition.changed
        ? Effect.flatMap(newEventId, (eventId) =>
          sql`WITH changed AS (
                UPDATE intents SET status = ${transition.status}, status_reason = ${transition.reason}, updated_at = ${at}
                WHERE id = ${intentId}
                RETURNING *
              ), ${eventTables(sql, sql`changed i`, { id: sql`${eventId}`, type: eventType(transition.status), at: sql`${at}` })}
              ${also === undefined ? sql`` : sql`, ${also}`}
              SELECT ${sql.literal(DELIVERIES_DUE)}, ${sql.literal(EVENTS_WRITTEN)}`).pipe(Effect.asVoid)
        : also === undefined
        ? Effect.void
        : Effect.asVoid(sql`WITH ${also} SELECT 1`),

    /**
     * Adds routing work, or sets the time of the same work already queued, and wakes the workers
     * when the transaction commits. A job a worker is running keeps its lease: its `version` moves
     * on, so that the worker hands it back to run again instead of deleting it when done.
     */
    enqueue: (intentId: IntentId, kind: JobKind, runAt: DateTime.Utc, at: DateTime.Utc) =>
      insertJob({ intent_id: intentId, kind, run_at: runAt, created_at: at })
  }
}
