import * as Schema from "effect/Schema"
import type { OrderStatus } from "../../../domain/Intent.js"

/** A decimal as Alpaca sends it, mostly a string and in some payloads a JSON number, as a number. */
const Decimal = Schema.Union(Schema.NumberFromString, Schema.Number)

/** A decimal that may be absent or null. */
const OptionalDecimal = Schema.optionalWith(Schema.NullOr(Decimal), { default: () => null })

/**
 * An order as Alpaca answers it. Only the fields routing reads are decoded; the others are
 * ignored. `status` is any string: Alpaca may add statuses, and an unknown one must not fail.
 */
export const Order = Schema.Struct({
  id: Schema.String,
  client_order_id: Schema.String,
  symbol: Schema.String,
  qty: OptionalDecimal,
  filled_qty: Decimal,
  filled_avg_price: OptionalDecimal,
  status: Schema.String,
  type: Schema.String,
  side: Schema.String,
  time_in_force: Schema.String,
  limit_price: OptionalDecimal,
  stop_price: OptionalDecimal,
  extended_hours: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  created_at: Schema.DateTimeUtc,
  updated_at: Schema.DateTimeUtc
})
export type Order = typeof Order.Type

/**
 * One message of the `trade_updates` stream: an event (`new`, `fill`, `partial_fill`, `canceled`,
 * `expired`, `rejected`, or one Alpaca adds later) and the order as it stands after it. Executions
 * (`fill`, `partial_fill`) carry their `execution_id`, price and quantity; other fields are ignored.
 */
export const TradeUpdate = Schema.Struct({
  event: Schema.String,
  execution_id: Schema.optional(Schema.NullOr(Schema.String)),
  price: Schema.optional(Schema.NullOr(Decimal)),
  qty: Schema.optional(Schema.NullOr(Decimal)),
  timestamp: Schema.optional(Schema.DateTimeUtc),
  order: Order
})
export type TradeUpdate = typeof TradeUpdate.Type

/** `GET /v2/account`, the fields read. */
export const Account = Schema.Struct({
  id: Schema.String,
  status: Schema.String,
  account_number: Schema.optional(Schema.String),
  currency: Schema.optional(Schema.String)
})
export type Account = typeof Account.Type

/** One execution among the `FILL` account activities: its `id` is the execution's own. */
export const FillActivity = Schema.Struct({
  id: Schema.String,
  order_id: Schema.String,
  qty: Decimal,
  price: Decimal,
  transaction_time: Schema.DateTimeUtc
})
export type FillActivity = typeof FillActivity.Type

export const FillActivities = Schema.Array(FillActivity)

/** Alpaca's error body. */
export const ErrorBody = Schema.Struct({
  code: Schema.optional(Schema.Number),
  message: Schema.String
})
export type ErrorBody = typeof ErrorBody.Type

/** Alpaca's order statuses as the router's: final ones as they are, every other one still open. */
export const orderStatus = (order: Pick<Order, "status" | "filled_qty">): OrderStatus => {
  switch (order.status) {
    case "filled":
      return "filled"
    case "partially_filled":
      return "partially_filled"
    case "canceled":
      return "canceled"
    case "expired":
    case "done_for_day":
      return "expired"
    case "rejected":
      return "rejected"
    default:
      return order.filled_qty > 0 ? "partially_filled" : "new"
  }
}
