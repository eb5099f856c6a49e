import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { detail, rule, Unprocessable, WireErrors } from "./Errors.js"
import { BrokerId, IntentId, Mode, OrderId, UserId } from "./Ids.js"


const oneOf = <const L extends ReadonlyArray<string>>(...literals: L) =>
  Schema.Literal(...literals).annotations(rule(`must be one of: ${literals.join(", ")}`))

export const Side = oneOf("buy", "sell")
export type Side = typeof Side.Type

export const OrderType = oneOf("market", "limit", "stop", "stop_limit")
export type OrderType = typeof OrderType.Type

export const TimeInForce = oneOf("day", "gtc", "ioc", "fok")
export type TimeInForce = typeof TimeInForce.Type

export const IntentStatus = oneOf("pending", "partially_filled", "filled", "canceled", "rejected", "failed")
export type IntentStatus = typeof IntentStatus.Type

export const finalStatuses: ReadonlySet<IntentStatus> = new Set(["filled", "canceled", "rejected", "failed"])

export const OrderStatus = Schema.Literal("new", "partially_filled", "filled", "canceled", "expired", "rejected")
export type OrderStatus = typeof OrderStatus.Type

/** The caller's own id of an intent, also its idempotency key. */
export const ExternalIntentId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.:-]{1,128}$/)).annotations(
  rule("must be 1 to 128 characters of A-Z a-z 0-9 _ . : -")
)

/** A trading symbol, stored upper-case. */
export const Symbol = Schema.transform(
  Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9./-]{1,32}$/)).annotations(
    rule("must be 1 to 32 characters of A-Z a-z 0-9 . - /")
  ),
  Schema.String,
  { strict: true, decode: (s) => s.toUpperCase(), encode: (s) => s }
)

/** `broker_id` as a client sends it, a string of up to 128 characters; only an existing connection's id matches. */
export const BrokerRef = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128)).annotations(
  rule("must be a string of 1 to 128 characters")
)

/** A quantity or price on the wire: a finite JSON number. Its rules (> 0, decimals) are checked as 422s. */
export const Amount = Schema.Number.pipe(Schema.finite()).annotations(rule("must be a number"))

export class Fill extends Schema.Class<Fill>("Fill")({
  quantity: Schema.Number,
  price: Schema.Number,
  filled_at: Schema.DateTimeUtc
}) {}

export class Order extends Schema.Class<Order>("Order")({
  id: OrderId,
  broker_order_id: Schema.String,
  status: OrderStatus,
  fills: Schema.Array(Fill),
  created_at: Schema.DateTimeUtc,
  updated_at: Schema.DateTimeUtc
}) {}

/** A Trade Intent as every response that carries one shows it. */
export class TradeIntent extends Schema.Class<TradeIntent>("TradeIntent")({
  id: IntentId,
  intent_id: Schema.String,
  symbol: Schema.String,
  side: Side,
  quantity: Schema.Number,
  order_type: OrderType,
  limit_price: Schema.NullOr(Schema.Number),
  stop_price: Schema.NullOr(Schema.Number),
  time_in_force: TimeInForce,
  extended_hours: Schema.Boolean,
  status: IntentStatus,
  status_reason: Schema.NullOr(Schema.String),
  broker_id: BrokerId,
  orders: Schema.Array(Order),
  created_at: Schema.DateTimeUtc,
  updated_at: Schema.DateTimeUtc
}) {}

const encodeTradeIntent = Schema.encodeSync(TradeIntent)

/** A Trade Intent's JSON, as every response that carries one writes it. */
export const intentJson = (intent: TradeIntent): string => JSON.stringify(encodeTradeIntent(intent))

/** The body of `POST /api/v1/intents`. Unknown fields are refused. */
export const CreateIntentPayload = Schema.Struct({
  intent_id: ExternalIntentId,
  symbol: Symbol,
  side: Side,
  quantity: Amount,
  order_type: OrderType,
  broker_id: BrokerRef,
  limit_price: Schema.optional(Schema.NullOr(Amount)),
  stop_price: Schema.optional(Schema.NullOr(Amount)),
  /** Default `day`. */
  time_in_force: Schema.optional(TimeInForce),
  /** Default false. */
  extended_hours: Schema.optional(Schema.Boolean.annotations(rule("must be a boolean")))
}).annotations({ identifier: "CreateIntentPayload", parseOptions: { onExcessProperty: "error" } })
export type CreateIntentPayload = typeof CreateIntentPayload.Type

/** An order whose rules hold: what the repository stores for a new intent. */
export interface OrderSpec {
  readonly symbol: string
  readonly side: Side
  readonly quantity: number
  readonly order_type: OrderType
  readonly limit_price: number | null
  readonly stop_price: number | null
  readonly time_in_force: TimeInForce
  readonly extended_hours: boolean
}

/** The order of anything that holds one (an intent, its row), and nothing else. */
export const orderSpecOf = (order: OrderSpec): OrderSpec => ({
  symbol: order.symbol,
  side: order.side,
  quantity: order.quantity,
  order_type: order.order_type,
  limit_price: order.limit_price,
  stop_price: order.stop_price,
  time_in_force: order.time_in_force,
  extended_hours: order.extended_hours
})

/** Everything needed to insert an intent. */
export interface NewIntent extends OrderSpec {
  readonly id: IntentId
  readonly user_id: UserId
  readonly mode: Mode
  readonly intent_id: string
  readonly broker_id: BrokerId
}

const MAX_DECIMALS = 9
const MAX_AMOUNT = 1e15

/**
 * Decimal places of the shortest decimal form of `n`. For a request body these are the digits
 * sent: a number that a double would not hold exactly is refused (400) before the rules run.
 */
const decimalPlaces = (n: number): number => {
  const [mantissa, exponent] = n.toString().split("e")
  const fraction = mantissa?.split(".")[1]?.length ?? 0
  return Math.max(0, fraction - Number(exponent ?? 0))
}

/** Why a quantity or price breaks the rules (not above 0, too large, over 9 decimal places); none if it holds. */
export const amountProblem = (field: string, value: number): string | undefined =>
  value <= 0
    ? `${field} must be greater than 0`
    : value >= MAX_AMOUNT
    ? `${field} must be less than ${MAX_AMOUNT}`
    : decimalPlaces(value) > MAX_DECIMALS
    ? `${field} must have at most ${MAX_DECIMALS} decimal places`
    : undefined

const needsLimit = (type: OrderType) => type === "limit" || type === "stop_limit"
const needsStop = (type: OrderType) => type === "stop" || type === "stop_limit"

/**
 * The rules of an order that a well-formed body can still break (422s), in this order:
 * limit_price, stop_price, quantity, then the prices' own rules.
 */
export const validateOrder = (payload: CreateIntentPayload): Either.Either<OrderSpec, Unprocessable> => {
  const limit = payload.limit_price ?? null
  const stop = payload.stop_price ?? null
  const type = payload.order_type
  const problem = needsLimit(type) && limit === null
    ? "limit_price is required for limit orders"
    : needsStop(type) && stop === null
    ? "stop_price is required for stop orders"
    : amountProblem("quantity", payload.quantity) ??
      (!needsLimit(type) && limit !== null
        ? `limit_price is not allowed for ${type} orders`
        : !needsStop(type) && stop !== null
        ? `stop_price is not allowed for ${type} orders`
        : (limit !== null ? amountProblem("limit_price", limit) : undefined) ??
          (stop !== null ? amountProblem("stop_price", stop) : undefined))
  return problem === undefined
    ? Either.right({
      symbol: payload.symbol,
      side: payload.side,
      quantity: payload.quantity,
      order_type: type,
      limit_price: limit,
      stop_price: stop,
      time_in_force: payload.time_in_force ?? "day",
      extended_hours: payload.extended_hours ?? false
    })
    : Either.left(new Unprocessable({ detail: problem }))
}

export class IntentNotFound extends Schema.TaggedError<IntentNotFound>()("IntentNotFound", {
  detail: detail(WireErrors.IntentNotFound)
}) {}

export class DuplicateIntent extends Schema.TaggedError<DuplicateIntent>()("DuplicateIntent", {
  detail: detail(WireErrors.DuplicateIntent),
  /** The intent that already holds the intent_id; not sent in the body, but as `Location`. */
  existing: Schema.optional(IntentId)
}) {}

export class IntentNotCancelable extends Schema.TaggedError<IntentNotCancelable>()("IntentNotCancelable", {
  detail: Schema.String
}) {
  static of(status: IntentStatus) {
    return new IntentNotCancelable({ detail: `Trade Intent cannot be canceled in status ${status}` })
  }
}
