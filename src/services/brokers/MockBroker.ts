import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { OrderStatus, TimeInForce } from "../../domain/Intent.js"
import { decide, REFERENCE_PRICE, statusAt } from "../../domain/MockExchange.js"
import { BrokerGateway, type BrokerOrder, BrokerUnavailable } from "./BrokerGateway.js"

const Row = Schema.Struct({
  client_order_id: Schema.String,
  broker_order_id: Schema.String,
  time_in_force: TimeInForce,
  status: OrderStatus,
  reason: Schema.NullOr(Schema.String),
  filled_quantity: Schema.NumberFromString,
  placed_at: Schema.DateTimeUtcFromDate
})
const decodeRows = Schema.decodeUnknown(Schema.Array(Row))

const toOrder = (row: typeof Row.Type, now: DateTime.Utc): BrokerOrder => ({
  brokerOrderId: row.broker_order_id,
  clientOrderId: row.client_order_id,
  status: statusAt({ status: row.status, time_in_force: row.time_in_force, placedAt: row.placed_at }, now),
  reason: row.reason ?? undefined,
  fills: row.filled_quantity > 0
    ? [{ id: `${row.broker_order_id}-1`, quantity: row.filled_quantity, price: REFERENCE_PRICE, filledAt: row.placed_at }]
    : []
})

const columns = "client_order_id, broker_order_id, time_in_force, status, reason, filled_quantity::text, placed_at"

/**
 * The deterministic mock broker of test mode. Its book lives in the database, keyed by
 * client order id: submissions are idempotent, survive restarts, and are shared by every instance.
 * Time (the end of a day order's day) is read from Effect's `Clock`.
 */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const select = (clientOrderId: string) =>
    sql`SELECT ${sql.literal(columns)} FROM mock_broker_orders WHERE client_order_id = ${clientOrderId}`.pipe(
      Effect.flatMap(decodeRows),
      Effect.map((rows) => Option.fromNullable(rows[0]))
    )

  return BrokerGateway.of({
    submit: (connection, { clientOrderId, spec }) =>
      Effect.gen(function*() {
        const outcome = decide(spec)
        if (outcome._tag === "Unreachable") {
          return yield* new BrokerUnavailable({ detail: "Mock broker unreachable (symbol FAIL)" })
        }
        const now = yield* DateTime.now
        const at = DateTime.toDate(now)
        const [status, filled, reason] = outcome._tag === "Rejected"
          ? ["rejected", 0, outcome.reason] as const
          : [outcome.status, outcome.filled, null] as const
        const rows = yield* sql`
          INSERT INTO mock_broker_orders (client_order_id, broker_order_id, connection_id, time_in_force, status, reason,
                                          filled_quantity, placed_at, updated_at)
          VALUES (${clientOrderId}, ${`mock-${clientOrderId}`}, ${connection.id}, ${spec.time_in_force}, ${status},
                  ${reason}, ${filled}, ${at}, ${at})
          ON CONFLICT (client_order_id) DO UPDATE SET submissions = mock_broker_orders.submissions + 1
          RETURNING ${sql.literal(columns)}`.pipe(Effect.flatMap(decodeRows))
        const row = rows[0]
        return row === undefined ? yield* Effect.dieMessage("mock order insert returned no row") : toOrder(row, now)
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("MockBroker.submit")),

    lookup: (_, clientOrderId) =>
      Effect.flatMap(DateTime.now, (now) => Effect.map(select(clientOrderId), Option.map((row) => toOrder(row, now)))).pipe(
        Effect.orDie,
        Effect.withSpan("MockBroker.lookup")
      ),

    cancel: (_, clientOrderId) =>
      Effect.gen(function*() {
        const now = yield* DateTime.now
        const current = yield* select(clientOrderId)
        if (Option.isNone(current)) return Option.none()
        const order = toOrder(current.value, now)
        if (order.status !== "new" && order.status !== "partially_filled") return Option.some(order)
        yield* sql`UPDATE mock_broker_orders SET status = 'canceled', updated_at = ${DateTime.toDate(now)}
                   WHERE client_order_id = ${clientOrderId} AND status IN ('new', 'partially_filled')`
        return Option.map(yield* select(clientOrderId), (row) => toOrder(row, now))
      }).pipe(Effect.orDie, Effect.withSpan("MockBroker.cancel"))
  })
})
