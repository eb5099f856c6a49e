import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { BrokerId } from "../../domain/Ids.js"
import { type OrderSpec, OrderStatus, TimeInForce } from "../../domain/Intent.js"
import { decide, REFERENCE_PRICE, statusAt } from "../../domain/MockExchange.js"
import { orDie } from "../../sql/Defects.js"
import { BrokerUnavailable } from "../../domain/Broker.js"
import type { BrokerGateway, BrokerOrder, Connection, OrderRef } from "./BrokerGateway.js"

const Timestamp = Schema.DateTimeUtcFromDate

/** A row of `mock_broker_orders`. */
const Row = Schema.Struct({
  client_order_id: Schema.String,
  broker_order_id: Schema.String,
  connection_id: BrokerId,
  time_in_force: TimeInForce,
  status: OrderStatus,
  reason: Schema.NullOr(Schema.String),
  filled_quantity: Schema.NumberFromString,
  placed_at: Timestamp,
  updated_at: Timestamp,
  submissions: Schema.Int
})

/** An order as the broker reports it. */
const OrderView = Row.pick(
  "client_order_id",
  "broker_order_id",
  "time_in_force",
  "status",
  "reason",
  "filled_quantity",
  "placed_at"
)

/** A submission writes every column but the count of submissions, which starts at 1. */
const NewOrder = Row.omit("submissions")

const viewColumns = Object.keys(OrderView.fields)
  .map((column) => column === "filled_quantity" ? "filled_quantity::text" : column)
  .join(", ")

const toOrder = (row: typeof OrderView.Type, now: DateTime.Utc): BrokerOrder => ({
  brokerOrderId: row.broker_order_id,
  clientOrderId: row.client_order_id,
  status: statusAt({ status: row.status, time_in_force: row.time_in_force, placedAt: row.placed_at }, now),
  reason: row.reason ?? undefined,
  fills: row.filled_quantity > 0
    ? [{ id: `${row.broker_order_id}-1`, quantity: row.filled_quantity, price: REFERENCE_PRICE, filledAt: row.placed_at }]
    : []
})

/**
 * The deterministic mock broker of test mode. Its book lives in the database, keyed by
 * client order id: submissions are idempotent, survive restarts, and are shared by every instance.
 * Time (the end of a day order's day) is read from Effect's `Clock`.
 */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const selectOrder = SqlSchema.findOne({
    Request: Schema.String,
    Result: OrderView,
    execute: (clientOrderId) =>
      sql`SELECT ${sql.literal(viewColumns)} FROM mock_broker_orders WHERE client_order_id = ${clientOrderId}`
  })

  /** Places an order once: a submission again of the same client order id only counts, and returns the order placed. */
  const placeOrder = SqlSchema.single({
    Request: NewOrder,
    Result: OrderView,
    execute: (order) =>
      sql`INSERT INTO mock_broker_orders ${sql.insert(order)}
          ON CONFLICT (client_order_id) DO UPDATE SET submissions = mock_broker_orders.submissions + 1
          RETURNING ${sql.literal(viewColumns)}`
  })

  const cancelOrder = SqlSchema.void({
    Request: Row.pick("client_order_id", "updated_at"),
    execute: ({ client_order_id, updated_at }) =>
      sql`UPDATE mock_broker_orders SET status = 'canceled', updated_at = ${updated_at}
          WHERE client_order_id = ${client_order_id} AND status IN ('new', 'partially_filled')`
  })

  return identity<Context.Tag.Service<typeof BrokerGateway>>({
    submit: Effect.fn("MockBroker.submit")(
      function*(connection: Connection, { clientOrderId, spec }: { readonly clientOrderId: string; readonly spec: OrderSpec }) {
        const outcome = decide(spec)
        if (outcome._tag === "Unreachable") {
          return yield* new BrokerUnavailable({ detail: "Mock broker unreachable (symbol FAIL)" })
        }
        const now = yield* DateTime.now
        const [status, filled, reason] = outcome._tag === "Rejected"
          ? ["rejected", 0, outcome.reason] as const
          : [outcome.status, outcome.filled, null] as const
        const row = yield* orDie(placeOrder({
          client_order_id: clientOrderId,
          broker_order_id: `mock-${clientOrderId}`,
          connection_id: connection.id,
          time_in_force: spec.time_in_force,
          status,
          reason,
          filled_quantity: filled,
          placed_at: now,
          updated_at: now
        }))
        return toOrder(row, now)
      }
    ),

    lookup: Effect.fn("MockBroker.lookup")(function*(_: Connection, order: OrderRef) {
      const now = yield* DateTime.now
      return Option.map(yield* selectOrder(order.clientOrderId), (row) => toOrder(row, now))
    }, orDie),

    cancel: Effect.fn("MockBroker.cancel")(function*(_: Connection, clientOrderId: string) {
      const now = yield* DateTime.now
      const current = yield* selectOrder(clientOrderId)
      if (Option.isNone(current)) return Option.none()
      const order = toOrder(current.value, now)
      if (order.status !== "new" && order.status !== "partially_filled") return Option.some(order)
      yield* cancelOrder({ client_order_id: clientOrderId, updated_at: now })
      return Option.map(yield* selectOrder(clientOrderId), (row) => toOrder(row, now))
    }, orDie),

    // A mock connection has no credentials to check, and its orders change only when asked.
    verify: () => Effect.void,
    streaming: [],
    updates: () => Stream.empty
  })
})
