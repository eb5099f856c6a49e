import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { QuotaExceeded } from "../../domain/Auth.js"
import { Unavailable } from "../../domain/Errors.js"
import type { Owner } from "../../domain/Ids.js"
import * as Batched from "../../sql/Batched.js"
import {
  DuplicateIntent,
  IntentNotCancelable,
  IntentNotFound,
  IntentStatus,
  type NewIntent,
  TradeIntent
} from "../../domain/Intent.js"
import { applyLocalCancel, isFinal } from "../../domain/Routing.js"
import { IntentRepository, type Quota } from "./IntentRepository.js"
import { ROUTING_CHANNEL } from "../../sql/Channels.js"
import * as Outbox from "../../sql/Outbox.js"
import { DELIVERIES_DUE, eventTables, intentObject } from "../../sql/Outbox.js"


const IntentRows = Schema.Array(Schema.Struct({ intent: TradeIntent }))
const decodeIntents = Schema.decodeUnknown(IntentRows)
const decodeCancelRows = Schema.decodeUnknown(
  Schema.Array(Schema.Struct({ status: IntentStatus, has_order: Schema.Boolean }))
)
interface Creation {
  readonly eventId: string
  readonly now: DateTime.Utc
  readonly quota: Quota | undefined
}

const CountRows = Schema.Array(Schema.Struct({ total: Schema.NumberFromString }))

export interface Options {
  /**
   * Creations that may wait for a batch while the database is slow; beyond, a creation is refused
   * at once with 503 (nothing written) instead of queueing without bound.
   */
  readonly creationQueue?: number | undefined
}

/** The default bound of the creation queue: a few batches' worth. */
export const CREATION_QUEUE = 1_000

export const make = (options: Options = {}) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const intent = sql.literal(`${intentObject} AS intent`)

  const select = (where: ReturnType<typeof sql.and>) =>
    sql`SELECT ${intent} FROM intents i WHERE ${where}`.pipe(
      Effect.flatMap(decodeIntents),
      Effect.map((rows) => Option.fromNullable(rows[0]?.intent))
    )

  const ownedBy = (owner: Owner) => [sql`i.user_id = ${owner.userId}`, sql`i.mode = ${owner.mode}`]

  const intentCreated = (input: NewIntent, now: DateTime.Utc) =>
    new TradeIntent({ ...input, status: "pending", status_reason: null, orders: [], created_at: now, updated_at: now })

  /**
   * One creation: the intent, its routing job, the `intent.created` event and its webhook
   * deliveries, with the workers woken at commit, in one statement (one round trip, an atomic
   * whole); with a quota, the count joins it in a transaction.
   */
  const createOne = (input: NewIntent, { eventId, now, quota }: Creation) => {
    const at = DateTime.toDate(now)
    const insert = sql<{ id: string }>`
      WITH created AS (
        INSERT INTO intents (id, user_id, mode, intent_id, symbol, side, quantity, order_type, limit_price,
                             stop_price, time_in_force, extended_hours, status, broker_id, created_at, updated_at)
        VALUES (${input.id}, ${input.user_id}, ${input.mode}, ${input.intent_id}, ${input.symbol}, ${input.side},
                ${input.quantity}, ${input.order_type}, ${input.limit_price}, ${input.stop_price},
                ${input.time_in_force}, ${input.extended_hours}, 'pending', ${input.broker_id}, ${at}, ${at})
        ON CONFLICT (user_id, mode, intent_id) DO NOTHING
        RETURNING *
      ), job AS (
        INSERT INTO routing_jobs (intent_id, kind, run_at, created_at)
        SELECT id, 'submit', ${at}, ${at} FROM created
      ), ${eventTables(sql, sql`created i`, { id: sql`${eventId}`, type: "intent.created", at: sql`${at}` })}
      SELECT id, pg_notify(${ROUTING_CHANNEL}, 'submit'), ${sql.literal(DELIVERIES_DUE)} FROM created`
    // The intent_id is taken. If by this very intent (its id is ours), an earlier try committed and
    // only its acknowledgement was lost: answer as that try would have.
    const duplicate = sql<{ id: TradeIntent["id"] }>`
      SELECT id FROM intents
      WHERE user_id = ${input.user_id} AND mode = ${input.mode} AND intent_id = ${input.intent_id}`.pipe(
      Effect.flatMap(([existing]) =>
        existing?.id === input.id
          ? Effect.succeed(intentCreated(input, now))
          : new DuplicateIntent({ existing: existing?.id })
      )
    )
    const written = Effect.gen(function*() {
      const inserted = yield* insert
      if (inserted.length === 0) return yield* duplicate
      if (quota !== undefined) {
        // Counted after the insert, so that a duplicate spends nothing; over quota, the
        // transaction's rollback takes the intent back.
        const counted = yield* sql`
          INSERT INTO intent_usage (user_id, period_start, count) VALUES (${input.user_id}, ${quota.period}, 1)
          ON CONFLICT (user_id, period_start)
            DO UPDATE SET count = intent_usage.count + 1 WHERE intent_usage.count < ${quota.limit}
          RETURNING count`
        if (counted.length === 0) {
          return yield* new QuotaExceeded({ retry_after: quota.retryAfter })
        }
      }
      return intentCreated(input, now)
    })
    return (quota === undefined ? written : sql.withTransaction(written)).pipe(
      Effect.catchTag("SqlError", Effect.die),
      Effect.withSpan("IntentRepository.create")
    )
  }

  /**
   * Creations without a quota that arrive together, in one statement and one commit: each is
   * answered after that commit, with its intent or, when its intent_id was taken (by an earlier
   * intent or an earlier creation of the same batch), the intent that holds it. Should the batch
   * fail as a whole, each creation is tried alone, so that one bad creation fails no other; one whose
   * batch did commit (only the answer was lost) finds its own intent and answers as the batch would have.
   */
  const createBatch = (creations: ReadonlyArray<Creation & { readonly input: NewIntent }>) =>
    Effect.gen(function*() {
      const rows = creations.map(({ eventId, input, now }, ord) => ({
        ...input,
        at: DateTime.formatIso(now),
        event_id: eventId,
        ord
      }))
      const inserted = yield* sql<{ id: string }>`
        WITH input AS (
          SELECT * FROM json_to_recordset(${JSON.stringify(rows)}::json) AS x(
            id uuid, user_id uuid, mode text, intent_id text, symbol text, side text, quantity numeric,
            order_type text, limit_price numeric, stop_price numeric, time_in_force text, extended_hours boolean,
            broker_id uuid, at timestamptz, event_id text, ord int)
        ), created AS (
          INSERT INTO intents (id, user_id, mode, intent_id, symbol, side, quantity, order_type, limit_price,
                               stop_price, time_in_force, extended_hours, status, broker_id, created_at, updated_at)
          SELECT id, user_id, mode, intent_id, symbol, side, quantity, order_type, limit_price,
                 stop_price, time_in_force, extended_hours, 'pending', broker_id, at, at
          FROM input ORDER BY ord
          ON CONFLICT (user_id, mode, intent_id) DO NOTHING
          RETURNING *
        ), job AS (
          INSERT INTO routing_jobs (intent_id, kind, run_at, created_at)
          SELECT id, 'submit', created_at, created_at FROM created
        ), ${eventTables(sql, sql`created i JOIN input x ON x.id = i.id`, {
        id: sql`x.event_id`,
        type: "intent.created",
        at: sql`i.created_at`
      })}
        SELECT id, pg_notify(${ROUTING_CHANNEL}, 'submit'), ${sql.literal(DELIVERIES_DUE)} FROM created`
      const createdIds = new Set(inserted.map((row) => row.id))
      const taken = creations.filter(({ input }) => !createdIds.has(input.id))
      const holders = taken.length === 0 ? [] : yield* sql<{ id: TradeIntent["id"]; key: string }>`
        SELECT id, user_id || '/' || mode || '/' || intent_id AS key FROM intents
        WHERE ${sql.or(taken.map(({ input }) => sql`(user_id = ${input.user_id} AND mode = ${input.mode} AND intent_id = ${input.intent_id})`))}`
      const holderOf = new Map(holders.map((row) => [row.key, row.id]))
      return creations.map(({ input, now }): Exit.Exit<TradeIntent, DuplicateIntent> => {
        const holder = holderOf.get(`${input.user_id}/${input.mode}/${input.intent_id}`)
        return createdIds.has(input.id) || holder === input.id
          ? Exit.succeed(intentCreated(input, now))
          : Exit.fail(new DuplicateIntent({ existing: holder }))
      })
    }).pipe(
      Effect.catchTag("SqlError", () =>
        Effect.forEach(creations, (creation) => Effect.exit(createOne(creation.input, creation)), { concurrency: 4 }))
    )

  const createBatched = yield* Batched.make(createBatch, {
    maxBatch: 200,
    concurrency: 2,
    whenFull: {
      capacity: options.creationQueue ?? CREATION_QUEUE,
      error: () => new Unavailable({ detail: "Too many creations are waiting for the database; retry shortly" })
    }
  })

  return IntentRepository.of({
    create: (input, options) => options.quota === undefined ? createBatched({ input, ...options }) : createOne(input, options),

    findById: (owner, id) =>
      select(sql.and([...ownedBy(owner), sql`i.id = ${id}`])).pipe(
        Effect.orDie,
        Effect.withSpan("IntentRepository.findById")
      ),

    findByExternalId: (owner, intentId) =>
      select(sql.and([...ownedBy(owner), sql`i.intent_id = ${intentId}`])).pipe(
        Effect.orDie,
        Effect.withSpan("IntentRepository.findByExternalId")
      ),

    requestCancel: (owner, intentId, { eventId, now }) =>
      Effect.gen(function*() {
        const [intent] = yield* sql`
          SELECT status, EXISTS (SELECT 1 FROM orders o WHERE o.intent_id = i.id) AS has_order
          FROM intents i WHERE id = ${intentId} AND user_id = ${owner.userId} AND mode = ${owner.mode}
          FOR UPDATE`.pipe(Effect.flatMap(decodeCancelRows))
        if (intent === undefined) return yield* new IntentNotFound()
        if (isFinal(intent.status)) return yield* IntentNotCancelable.of(intent.status)
        const at = DateTime.toDate(now)
        const transitions = Outbox.make(sql, Effect.succeed(eventId))
        yield* sql`UPDATE intents SET cancel_requested_at = ${at} WHERE id = ${intentId}`
        if (!intent.has_order) {
          // A submission never claimed cannot have reached the broker: take it back and cancel here.
          // Once claimed, it may have: its job decides with the broker's answer, so bring it forward.
          const taken = yield* sql`DELETE FROM routing_jobs
                                   WHERE intent_id = ${intentId} AND kind = 'submit' AND claims = 0
                                   RETURNING intent_id`
          if (taken.length > 0) {
            const state = yield* transitions.lockState(intentId)
            yield* transitions.apply(intentId, applyLocalCancel(state, "Canceled by the client before submission"), at)
            return "canceled" as const
          }
          yield* sql`WITH due AS (
                       UPDATE routing_jobs SET run_at = LEAST(run_at, ${at})
                       WHERE intent_id = ${intentId} AND kind = 'submit'
                     )
                     SELECT pg_notify(${ROUTING_CHANNEL}, 'submit')`
          return "requested" as const
        }
        yield* transitions.enqueue(intentId, "cancel", at, at)
        return "requested" as const
      }).pipe(
        sql.withTransaction,
        Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }),
        Effect.withSpan("IntentRepository.requestCancel")
      ),

    list: (owner, query) =>
      Effect.gen(function*() {
        const where = sql.and([
          ...ownedBy(owner),
          ...(query.status !== undefined ? [sql`i.status = ${query.status}`] : []),
          ...(query.symbol !== undefined ? [sql`i.symbol = ${query.symbol.toUpperCase()}`] : []),
          ...(query.brokerId !== undefined ? [sql`i.broker_id::text = ${query.brokerId}`] : [])
        ])
        const [rows, counts] = yield* Effect.all([
          sql`SELECT ${intent} FROM intents i WHERE ${where}
              ORDER BY i.created_at DESC, i.id DESC
              LIMIT ${query.pageSize} OFFSET ${(query.page - 1) * query.pageSize}`.pipe(Effect.flatMap(decodeIntents)),
          sql`SELECT count(*)::text AS total FROM intents i WHERE ${where}`.pipe(
            Effect.flatMap(Schema.decodeUnknown(CountRows))
          )
        ], { concurrency: "unbounded" })
        return { items: rows.map((row) => row.intent), total: counts[0]?.total ?? 0 }
      }).pipe(Effect.orDie, Effect.withSpan("IntentRepository.list"))
  })
})

/** The repository on the `SqlClient` in context: PostgreSQL or embedded PGlite alike. */
