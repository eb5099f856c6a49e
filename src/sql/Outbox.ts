import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import type { ParseError } from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { type BrokerId, IntentId } from "../domain/Ids.js"
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

/** `'id', i.id, …` for a `json_build_object`: an intent's own fields (of the row `alias`) in the API's format. */
const intentFields = (alias: string) => apiFields(Tables.Intents, TradeIntent.fields, alias)

/** A fill (of the row `alias`) as the API shows it in its order. */
export const fillObject = (alias: string) => `json_build_object(${apiFields(Tables.Fills, Fill.fields, alias)})`

/** An order (of the row `alias`) as the API shows it, with `fills`, an expression of its fills' JSON array. */
export const orderObject = (alias: string, fills: string) =>
  `json_build_object(${apiFields(Tables.Orders, Order.fields, alias)}, 'fills', ${fills})`

/** The order of an intent's orders in its document (`alias`: an order's row). */
export const orderSequence = (alias: string) => `${alias}.created_at, ${alias}.id`

/** The order of an order's fills in its intent's document (`alias`: a fill's row). */
export const fillSequence = (alias: string) => `${alias}.filled_at, ${alias}.id`

/**
 * An intent's document (of the row `alias`) around `orders`, an expression of its orders' JSON
 * array as {@link intentObject} builds it.
 */
export const intentAround = (alias: string, orders: string) => `json_build_object(${intentFields(alias)}, 'orders', ${orders})`

/**
 * An intent with its orders and their fills, built as one JSON document by the database so that a
 * lookup is one round trip, in exactly the API's format (ISO 8601 UTC with `Z`, JSON numbers): it
 * decodes through the response schema, and events carry it as GET shows it. It is the body of the
 * function `intent_document(intents)` that a migration defines, through which triggers keep each
 * intent's document in `intents.document` for lookups, pages and events to read: a change here
 * needs a migration that replaces the function and the row trigger's function (which builds a new
 * intent's document with {@link orderlessIntentObject}, and one whose orders a statement wrote with
 * {@link intentAround}) and rewrites the stored documents (`UPDATE intents SET document = NULL`,
 * which the trigger fills in).
 */
export const intentObject = intentAround("i", `COALESCE((
    SELECT json_agg(${orderObject("o", `COALESCE((
        SELECT json_agg(${fillObject("f")} ORDER BY ${fillSequence("f")})
        FROM fills f WHERE f.order_id = o.id), '[]'::json)`)} ORDER BY ${orderSequence("o")})
    FROM orders o WHERE o.intent_id = i.id), '[]'::json)`)

/**
 * {@link intentObject} for an intent that has no order yet (of the row `alias`): the same document,
 * built without asking for its orders. A change to the document's format changes both.
 */
export const orderlessIntentObject = (alias: string) => intentAround(alias, "'[]'::json")

/**
 * The common table expressions `event` and `deliveries`: for each row of `source` (a FROM clause in
 * which `i` has the intents table's columns: the table itself, or the rows an INSERT or UPDATE of
 * the same statement returns), an event whose `data` is the intent as a GET would show it now
 * (its stored document, which the row's trigger wrote), and one delivery for each enabled
 * endpoint of the intent's user and mode that subscribes to its type.
 */
export const eventTables = (
  sql: SqlClient.SqlClient,
  source: Statement.Fragment,
  event: { readonly id: Statement.Fragment; readonly type: Statement.Fragment; readonly at: Statement.Fragment }
) =>
  sql`event AS (
        INSERT INTO events (id, user_id, mode, intent_id, type, data, created_at)
        SELECT ${event.id}, i.user_id, i.mode, i.id, ${event.type}, i.document, ${event.at}
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

/** What the transition function needs of an intent (its status, quantity and fills), its connection and its cancel request. */
const StateRow = Schema.Struct({
  ...Tables.Intents.row.pick("id", "status", "quantity", "broker_id").fields,
  cancel_requested: Schema.Boolean,
  fills: Schema.Array(Schema.Struct({ id: Schema.String, quantity: Tables.Fills.row.fields.quantity })),
  version: Schema.String
})

/**
 * An intent as its lock read it: what the transition function needs, the connection it is routed
 * through, and whether the client asked for a cancel.
 */
export interface LockedState extends RoutingState {
  readonly brokerId: BrokerId
  readonly cancelRequested: boolean
}

/**
 * An intent as a read without a lock found it, with the version of its row read (`xmin`): every
 * change to its status, orders, fills or cancel request writes a new version of that row.
 */
export interface ReadState extends LockedState {
  readonly version: string
}

/** Routing work to add, or to move to `run_at` if already queued. */
const NewJob = Tables.RoutingJobs.row.pick("intent_id", "kind", "run_at", "created_at")
const newJobColumns = Tables.columnList(NewJob)
const newJobRecordset = Tables.recordsetTypes(NewJob, Tables.RoutingJobs.types)
const encodeNewJobs = Schema.encodeSync(Schema.Array(NewJob))

/** Routing work to queue: the intent, what to do, and when. */
export interface Work {
  readonly intentId: IntentId
  readonly kind: JobKind
  readonly runAt: DateTime.Utc
}

/** A status change to write: the intent's new status and reason, with its event. */
export interface Change {
  readonly intentId: IntentId
  readonly transition: Transition
}

/** What the statement of {@link make}'s `applyAll` reads of each change, as a `json_to_recordset`. */
const CHANGE_RECORDSET = "intent_id uuid, status text, status_reason text, event_id text, type text"

/** The SQL steps every state change shares, to be run inside the caller's transaction. */
export const make = (sql: SqlClient.SqlClient, newEventId: Effect.Effect<string>) => {
  const selectStates = (lock: boolean) =>
    SqlSchema.findAll({
      Request: Schema.NonEmptyArray(IntentId),
      Result: StateRow,
      execute: (intentIds) =>
        sql`
          SELECT i.id, i.status, i.quantity::text AS quantity, i.broker_id,
                 i.cancel_requested_at IS NOT NULL AS cancel_requested,
                 COALESCE((SELECT json_agg(json_build_object('id', f.broker_fill_id, 'quantity', f.quantity::text))
                           FROM fills f JOIN orders o ON o.id = f.order_id
                           WHERE o.intent_id = i.id), '[]'::json) AS fills,
                 i.xmin::text AS version
          FROM intents i WHERE i.id IN ${sql.in(intentIds)}
          ${lock ? sql`ORDER BY i.id FOR UPDATE OF i` : sql``}`
    })
  const selectLocked = selectStates(true)
  const selectRead = selectStates(false)

  const statesOf = (rows: ReadonlyArray<typeof StateRow.Type>) =>
    new Map(rows.map(({ broker_id, cancel_requested, fills, id, quantity, status, version }) => [
      id,
      { status, quantity, fills, brokerId: broker_id, cancelRequested: cancel_requested, version }
    ]))

  /**
   * Routing work added, or the same work already queued moved to its new time, as a common table
   * expression; the workers are woken when the transaction commits. A job a worker is running
   * keeps its lease: its `version` moves on, so that the worker hands it back to run again
   * instead of deleting it when done. With `among` (a query of intent ids), only those intents'
   * work is queued.
   */
  const queued = (work: ReadonlyArray<Work>, at: DateTime.Utc, among?: Statement.Fragment) => {
    const jobs = encodeNewJobs(work.map(({ intentId, kind, runAt }) => ({ intent_id: intentId, kind, run_at: runAt, created_at: at })))
    return sql`jobs_queued AS (
        INSERT INTO routing_jobs (${sql.literal(newJobColumns)})
        SELECT ${sql.literal(newJobColumns)} FROM json_to_recordset(${JSON.stringify(jobs)}::json) AS j(${sql.literal(newJobRecordset)})
        ${among === undefined ? sql`` : sql`WHERE j.intent_id IN (${among})`}
        ON CONFLICT (intent_id, kind) DO UPDATE SET run_at = EXCLUDED.run_at, version = routing_jobs.version + 1
        RETURNING pg_notify(${ROUTING_CHANNEL}, routing_jobs.kind)
      )`
  }

  /**
   * Locks the intents, in the order of their ids (so that transactions locking several never wait
   * on each other in a circle), and reads what the transition function needs of each, fills
   * included: one round trip. An intent that does not exist is missing from the map.
   */
  const lockStates = (intentIds: ReadonlyArray<IntentId>): Effect.Effect<ReadonlyMap<IntentId, LockedState>, SqlError | ParseError> => {
    const [first, ...rest] = intentIds
    return first === undefined ? Effect.succeed(new Map()) : Effect.map(selectLocked([first, ...rest]), statesOf)
  }

  /**
   * Reads what {@link lockStates} reads, without locking, and each row's version: one round trip,
   * in no transaction. An intent that does not exist is missing from the map.
   */
  const readStates = (intentIds: ReadonlyArray<IntentId>): Effect.Effect<ReadonlyMap<IntentId, ReadState>, SqlError | ParseError> => {
    const [first, ...rest] = intentIds
    return first === undefined ? Effect.succeed(new Map()) : Effect.map(selectRead([first, ...rest]), statesOf)
  }

  /**
   * Writes status changes and one event each (with its deliveries): one statement, whatever their
   * number, which also runs `also` (common table expressions of data-modifying statements, such
   * as jobs' ends) when given. Unchanged transitions write nothing.
   */
  const applyAll = (changes: ReadonlyArray<Change>, at: Date, also?: Statement.Fragment) =>
    Effect.gen(function*() {
      const changed = changes.filter(({ transition }) => transition.changed)
      if (changed.length === 0) return also === undefined ? undefined : yield* sql`WITH ${also} SELECT 1`
      const rows = yield* Effect.forEach(changed, ({ intentId, transition }) =>
        Effect.map(newEventId, (eventId) => ({
          intent_id: intentId,
          status: transition.status,
          status_reason: transition.reason,
          event_id: eventId,
          type: eventType(transition.status)
        })))
      return yield* sql`WITH changes AS (
            SELECT * FROM json_to_recordset(${JSON.stringify(rows)}::json) AS c(${sql.literal(CHANGE_RECORDSET)})
          ), changed AS (
            UPDATE intents SET status = c.status, status_reason = c.status_reason, updated_at = ${at}
            FROM changes c WHERE intents.id = c.intent_id
            RETURNING intents.*
          ), ${eventTables(sql, sql`changed i JOIN changes c ON c.intent_id = i.id`, { id: sql`c.event_id`, type: sql`c.type`, at: sql`${at}` })}
          ${also === undefined ? sql`` : sql`, ${also}`}
          SELECT ${sql.literal(DELIVERIES_DUE)}, ${sql.literal(EVENTS_WRITTEN)}`
    }).pipe(Effect.asVoid)

  return {
    lockStates,

    readStates,

    /** Locks the intent and reads what the transition function needs, fills included: one round trip. */
    lockState: (intentId: IntentId) =>
      Effect.flatMap(lockStates([intentId]), (states) => {
        const state = states.get(intentId)
        return state === undefined ? Effect.dieMessage(`intent ${intentId} vanished`) : Effect.succeed(state)
      }),

    applyAll,

    /** {@link applyAll} for one change. */
    apply: (intentId: IntentId, transition: Transition, at: Date, also?: Statement.Fragment) =>
      applyAll([{ intentId, transition }], at, also),

    queued,

    /** {@link queued} work for one intent, in a statement of its own. */
    enqueue: (intentId: IntentId, kind: JobKind, runAt: DateTime.Utc, at: DateTime.Utc) =>
      Effect.asVoid(sql`WITH ${queued([{ intentId, kind, runAt }], at)} SELECT 1`)
  }
}

/** The SQL steps every state change shares (see {@link make}). */
export type Transitions = ReturnType<typeof make>
