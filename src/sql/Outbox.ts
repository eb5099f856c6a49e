import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { IntentId } from "../domain/Ids.js"
import { IntentStatus } from "../domain/Intent.js"
import { eventType, type JobKind, type RoutingState, type Transition } from "../domain/Routing.js"
import { ROUTING_CHANNEL, WEBHOOK_CHANNEL } from "./Channels.js"

export const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

/**
 * An intent with its orders and their fills, built as one JSON document by the database so that a
 * lookup is one round trip, in exactly the API's format (ISO 8601 UTC with `Z`, JSON numbers): it
 * decodes through the response schema, and events carry it as GET shows it.
 */
export const intentObject = `json_build_object(
  'id', i.id, 'intent_id', i.intent_id, 'symbol', i.symbol, 'side', i.side, 'quantity', i.quantity::float8,
  'order_type', i.order_type, 'limit_price', i.limit_price::float8, 'stop_price', i.stop_price::float8,
  'time_in_force', i.time_in_force, 'extended_hours', i.extended_hours, 'status', i.status,
  'status_reason', i.status_reason, 'broker_id', i.broker_id,
  'orders', COALESCE((
    SELECT json_agg(json_build_object(
      'id', o.id, 'broker_order_id', o.broker_order_id, 'status', o.status,
      'fills', COALESCE((
        SELECT json_agg(json_build_object(
          'quantity', f.quantity::float8, 'price', f.price::float8, 'filled_at', ${iso("f.filled_at")}
        ) ORDER BY f.filled_at, f.id)
        FROM fills f WHERE f.order_id = o.id), '[]'::json),
      'created_at', ${iso("o.created_at")}, 'updated_at', ${iso("o.updated_at")}) ORDER BY o.created_at, o.id)
    FROM orders o WHERE o.intent_id = i.id), '[]'::json),
  'created_at', ${iso("i.created_at")}, 'updated_at', ${iso("i.updated_at")})`

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
        SELECT ${event.id}, i.user_id, i.mode, i.id, ${event.type}, ${sql.literal(intentObject)}, ${event.at}
        FROM ${source}
        RETURNING id, user_id, mode, type, created_at
      ), deliveries AS (
        INSERT INTO webhook_deliveries (id, endpoint_id, event_id, status, next_attempt_at, created_at, updated_at)
        SELECT gen_random_uuid(), w.id, event.id, 'pending', event.created_at, event.created_at, event.created_at
        FROM event JOIN webhook_endpoints w
          ON w.user_id = event.user_id AND w.mode = event.mode AND w.disabled_at IS NULL AND w.events @> to_jsonb(event.type)
        RETURNING 1
      )`

/** Wakes the delivery workers at commit when `deliveries` (of `eventTables`) made any. */
export const DELIVERIES_DUE = `(SELECT pg_notify('${WEBHOOK_CHANNEL}', 'due') FROM (SELECT 1 FROM deliveries LIMIT 1) due)`

const StateRow = Schema.Struct({
  status: IntentStatus,
  quantity: Schema.NumberFromString,
  fills: Schema.Array(Schema.Struct({ id: Schema.String, quantity: Schema.NumberFromString }))
})
const decodeState = Schema.decodeUnknown(Schema.Array(StateRow))

/** The SQL steps every state change shares, to be run inside the caller's transaction. */
export const make = (sql: SqlClient.SqlClient, newEventId: Effect.Effect<string>) => ({
  /** Locks the intent and reads what the transition function needs, fills included: one round trip. */
  lockState: (intentId: IntentId) =>
    Effect.gen(function*() {
      const [intent] = yield* sql`
        SELECT i.status, i.quantity::text AS quantity,
               COALESCE((SELECT json_agg(json_build_object('id', f.broker_fill_id, 'quantity', f.quantity::text))
                         FROM fills f JOIN orders o ON o.id = f.order_id
                         WHERE o.intent_id = i.id), '[]'::json) AS fills
        FROM intents i WHERE i.id = ${intentId} FOR UPDATE OF i`.pipe(Effect.flatMap(decodeState))
      if (intent === undefined) return yield* Effect.dieMessage(`intent ${intentId} vanished`)
      return intent satisfies RoutingState
    }).pipe(Effect.catchTag("ParseError", Effect.die)),

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
            SELECT ${sql.literal(DELIVERIES_DUE)}`)
      : also === undefined
      ? Effect.void
      : sql`WITH ${also} SELECT 1`,

  /**
   * Adds routing work, or sets the time of the same work already queued, and wakes the workers
   * when the transaction commits. A job a worker is running keeps its lease: its `version` moves
   * on, so that the worker hands it back to run again instead of deleting it when done.
   */
  enqueue: (intentId: IntentId, kind: JobKind, runAt: Date, at: Date) =>
    sql`WITH job AS (
          INSERT INTO routing_jobs (intent_id, kind, run_at, created_at) VALUES (${intentId}, ${kind}, ${runAt}, ${at})
          ON CONFLICT (intent_id, kind) DO UPDATE SET run_at = EXCLUDED.run_at, version = routing_jobs.version + 1
        )
        SELECT pg_notify(${ROUTING_CHANNEL}, ${kind})`
})
