import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { QuotaExceeded } from "../../domain/Auth.js"
import type { Owner } from "../../domain/Ids.js"
import { DuplicateIntent, TradeIntent } from "../../domain/Intent.js"
import { IntentRepository } from "./IntentRepository.js"

const isUuid = Schema.is(Schema.UUID)

/**
 * An intent with its orders and their fills, built as one JSON document by the database so that a
 * lookup is one round trip; it decodes through the same schema as the API's responses.
 */
const intentJson = `json_build_object(
  'id', i.id, 'intent_id', i.intent_id, 'symbol', i.symbol, 'side', i.side, 'quantity', i.quantity,
  'order_type', i.order_type, 'limit_price', i.limit_price, 'stop_price', i.stop_price,
  'time_in_force', i.time_in_force, 'extended_hours', i.extended_hours, 'status', i.status,
  'status_reason', i.status_reason, 'broker_id', i.broker_id,
  'orders', COALESCE((
    SELECT json_agg(json_build_object(
      'id', o.id, 'broker_order_id', o.broker_order_id, 'status', o.status,
      'fills', COALESCE((
        SELECT json_agg(json_build_object('quantity', f.quantity, 'price', f.price, 'filled_at', f.filled_at)
                        ORDER BY f.filled_at, f.id)
        FROM fills f WHERE f.order_id = o.id), '[]'::json),
      'created_at', o.created_at, 'updated_at', o.updated_at) ORDER BY o.created_at, o.id)
    FROM orders o WHERE o.intent_id = i.id), '[]'::json),
  'created_at', i.created_at, 'updated_at', i.updated_at) AS intent`

const IntentRows = Schema.Array(Schema.Struct({ intent: TradeIntent }))
const decodeIntents = Schema.decodeUnknown(IntentRows)
const CountRows = Schema.Array(Schema.Struct({ total: Schema.NumberFromString }))

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const intent = sql.literal(intentJson)

  const select = (where: ReturnType<typeof sql.and>) =>
    sql`SELECT ${intent} FROM intents i WHERE ${where}`.pipe(
      Effect.flatMap(decodeIntents),
      Effect.map((rows) => Option.fromNullable(rows[0]?.intent))
    )

  const ownedBy = (owner: Owner) => [sql`i.user_id = ${owner.userId}`, sql`i.mode = ${owner.mode}`]

  return IntentRepository.of({
    create: (input, { now, quota }) =>
      Effect.gen(function*() {
        const at = DateTime.toDate(now)
        const inserted = yield* sql<{ id: string }>`
          INSERT INTO intents (id, user_id, mode, intent_id, symbol, side, quantity, order_type, limit_price,
                               stop_price, time_in_force, extended_hours, status, broker_id, created_at, updated_at)
          VALUES (${input.id}, ${input.user_id}, ${input.mode}, ${input.intent_id}, ${input.symbol}, ${input.side},
                  ${input.quantity}, ${input.order_type}, ${input.limit_price}, ${input.stop_price},
                  ${input.time_in_force}, ${input.extended_hours}, 'pending', ${input.broker_id}, ${at}, ${at})
          ON CONFLICT (user_id, mode, intent_id) DO NOTHING
          RETURNING id`
        if (inserted.length === 0) {
          const existing = yield* sql<{ id: TradeIntent["id"] }>`
            SELECT id FROM intents
            WHERE user_id = ${input.user_id} AND mode = ${input.mode} AND intent_id = ${input.intent_id}`
          return yield* new DuplicateIntent({ existing: existing[0]?.id })
        }
        if (quota !== undefined) {
          const counted = yield* sql`
            INSERT INTO intent_usage (user_id, period_start, count) VALUES (${input.user_id}, ${quota.period}, 1)
            ON CONFLICT (user_id, period_start)
              DO UPDATE SET count = intent_usage.count + 1 WHERE intent_usage.count < ${quota.limit}
            RETURNING count`
          if (counted.length === 0) {
            return yield* new QuotaExceeded({ retry_after: quota.retryAfter })
          }
        }
        return new TradeIntent({
          ...input,
          status: "pending",
          status_reason: null,
          orders: [],
          created_at: now,
          updated_at: now
        })
      }).pipe(
        sql.withTransaction,
        Effect.catchTag("SqlError", Effect.die),
        Effect.withSpan("IntentRepository.create")
      ),

    findById: (owner, id) =>
      isUuid(id)
        ? select(sql.and([...ownedBy(owner), sql`i.id = ${id}`])).pipe(
          Effect.orDie,
          Effect.withSpan("IntentRepository.findById")
        )
        : Effect.succeedNone,

    findByExternalId: (owner, intentId) =>
      select(sql.and([...ownedBy(owner), sql`i.intent_id = ${intentId}`])).pipe(
        Effect.orDie,
        Effect.withSpan("IntentRepository.findByExternalId")
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
export const layer = Layer.effect(IntentRepository, make)
