import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { IntentId } from "../../domain/Ids.js"
import { IntentStatus } from "../../domain/Intent.js"
import { eventType, type RoutingState, type Transition } from "../../domain/Routing.js"

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

/** The channel a commit that adds routing work notifies, so that workers wake at once. */
export const ROUTING_CHANNEL = "routing_jobs"

/** The channel a commit that makes a webhook delivery due notifies. */
export const WEBHOOK_CHANNEL = "webhook_deliveries"

/**
 * The common table expressions `event` and `deliveries`: an event row whose `data` is the intent as
 * a GET would show it now (DESIGN.md section 7), built from `intents` (a relation aliased `i` with
 * the intents table's columns: the table itself, or the rows an INSERT in the same statement
 * returns), and one delivery for each enabled endpoint of the intent's user and mode that
 * subscribes to its type.
 */
export const eventTables = (
  sql: SqlClient.SqlClient,
  event: { readonly eventId: string; readonly type: string; readonly at: Date },
  intents: Statement.Fragment
) =>
  sql`event AS (
        INSERT INTO events (id, user_id, mode, intent_id, type, data, created_at)
        SELECT ${event.eventId}, i.user_id, i.mode, i.id, ${event.type}, ${sql.literal(intentObject)}, ${event.at}
        FROM ${intents}
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

/**
 * The event of a state change of the intent `intentId` and its deliveries, in one statement;
 * delivery workers are woken when the transaction commits.
 */
export const insertEvent = (
  sql: SqlClient.SqlClient,
  event: { readonly eventId: string; readonly intentId: string; readonly type: string; readonly at: Date }
) =>
  sql`WITH ${eventTables(sql, event, sql`intents i WHERE i.id = ${event.intentId}`)}
      SELECT ${sql.literal(DELIVERIES_DUE)}`

const StateRow = Schema.Struct({ status: IntentStatus, quantity: Schema.NumberFromString })
const FillRow = Schema.Struct({ id: Schema.String, quantity: Schema.NumberFromString })
const decode = <A, I>(schema: Schema.Schema<A, I>) => Effect.flatMap(Schema.decodeUnknown(Schema.Array(schema)))

export type JobKind = "submit" | "cancel" | "sync"

/** The SQL steps every state change shares, to be run inside the caller's transaction. */
export const make = (sql: SqlClient.SqlClient, newEventId: Effect.Effect<string>) => ({
  /** Locks the intent and reads what the transition function needs. */
  lockState: (intentId: IntentId) =>
    Effect.gen(function*() {
      const [intent] = yield* sql`SELECT status, quantity::text AS quantity FROM intents
                                  WHERE id = ${intentId} FOR UPDATE`.pipe(decode(StateRow))
      if (intent === undefined) return yield* Effect.dieMessage(`intent ${intentId} vanished`)
      const fills = yield* sql`SELECT f.broker_fill_id AS id, f.quantity::text AS quantity
                               FROM fills f JOIN orders o ON o.id = f.order_id
                               WHERE o.intent_id = ${intentId}`.pipe(decode(FillRow))
      return { status: intent.status, quantity: intent.quantity, fills } satisfies RoutingState
    }).pipe(Effect.catchTag("ParseError", Effect.die)),

  /** Writes a transition's status and its one event. */
  apply: (intentId: IntentId, transition: Transition, at: Date) =>
    transition.changed
      ? Effect.gen(function*() {
        yield* sql`UPDATE intents SET status = ${transition.status}, status_reason = ${transition.reason},
                   updated_at = ${at} WHERE id = ${intentId}`
        yield* insertEvent(sql, { eventId: yield* newEventId, intentId, type: eventType(transition.status), at })
      })
      : Effect.void,

  /** Adds (or brings forward) routing work and wakes the workers when the transaction commits. */
  enqueue: (intentId: IntentId, kind: JobKind, runAt: Date, at: Date) =>
    Effect.zipRight(
      sql`INSERT INTO routing_jobs (intent_id, kind, run_at, created_at) VALUES (${intentId}, ${kind}, ${runAt}, ${at})
          ON CONFLICT (intent_id, kind) DO UPDATE SET run_at = EXCLUDED.run_at, locked_until = NULL`,
      sql`SELECT pg_notify(${ROUTING_CHANNEL}, ${kind})`
    )
})
