import * as DateTime from "effect/DateTime"
import type { OrderSpec, OrderStatus } from "./Intent.js"
import { endOfDay } from "./Routing.js"

/** The mock broker's price for a symbol whose price was never set. */
export const REFERENCE_PRICE = 100

/**
 * What the mock broker does with an order, decided once at submission at the symbol's price
 * (100 unless set); the symbols REJECT, PARTIAL, FAIL and HOLD reach the other outcomes.
 * `triggered`: a stop limit order whose stop the price has reached, resting on its limit.
 */
export type MockOutcome =
  | { readonly _tag: "Unreachable" }
  | { readonly _tag: "Rejected"; readonly reason: string }
  | { readonly _tag: "Placed"; readonly status: OrderStatus; readonly filled: number; readonly triggered: boolean }

/** What a resting order does when its symbol's price moves. */
export type PriceMove =
  | { readonly _tag: "Unchanged" }
  | { readonly _tag: "Triggered" }
  | { readonly _tag: "Filled"; readonly quantity: number }

/** An order resting in the mock book. */
export interface RestingOrder {
  readonly spec: Pick<OrderSpec, "symbol" | "side" | "quantity" | "order_type" | "limit_price" | "stop_price">
  readonly triggered: boolean
  readonly filled: number
}

const round9 = (n: number) => Math.round(n * 1e9) / 1e9

type Priced = Pick<OrderSpec, "side" | "order_type" | "limit_price" | "stop_price">

const marketable = (spec: Priced, price: number) =>
  spec.side === "buy" ? price <= (spec.limit_price ?? 0) : price >= (spec.limit_price ?? Infinity)

const stopReached = (spec: Priced, price: number) =>
  spec.side === "buy" ? price >= (spec.stop_price ?? Infinity) : price <= (spec.stop_price ?? 0)

/** At `price`: whether the order's stop has triggered (now or before), and whether it executes. */
const evaluate = (spec: Priced, price: number, triggeredBefore: boolean) => {
  const triggered = triggeredBefore || ((spec.order_type === "stop" || spec.order_type === "stop_limit") && stopReached(spec, price))
  switch (spec.order_type) {
    case "market":
      return { triggered, executes: true }
    case "limit":
      return { triggered, executes: marketable(spec, price) }
    case "stop":
      return { triggered, executes: triggered }
    case "stop_limit":
      return { triggered, executes: triggered && marketable(spec, price) }
  }
}

/** An order that does not execute now rests, unless its time in force forbids resting. */
const rests = (spec: OrderSpec): OrderStatus =>
  spec.time_in_force === "ioc" || spec.time_in_force === "fok" ? "canceled" : "new"

export const decide = (spec: OrderSpec, price: number = REFERENCE_PRICE): MockOutcome => {
  switch (spec.symbol) {
    case "FAIL":
      return { _tag: "Unreachable" }
    case "REJECT":
      return { _tag: "Rejected", reason: "Rejected by the mock broker: symbol REJECT is not tradable" }
    case "HOLD":
      return { _tag: "Placed", status: "new", filled: 0, triggered: false }
  }
  const { executes, triggered } = evaluate(spec, price, false)
  if (!executes) return { _tag: "Placed", status: rests(spec), filled: 0, triggered }
  if (spec.symbol === "PARTIAL") {
    if (spec.time_in_force === "fok") return { _tag: "Placed", status: "canceled", filled: 0, triggered }
    const half = round9(spec.quantity / 2)
    return { _tag: "Placed", status: spec.time_in_force === "ioc" ? "canceled" : "partially_filled", filled: half, triggered }
  }
  return { _tag: "Placed", status: "filled", filled: spec.quantity, triggered }
}

/**
 * A resting order when its symbol's price moves to `price`: a limit order the price reaches fills
 * whole at that price, a stop order whose stop it reaches triggers and then acts as a market
 * (fills) or limit order. HOLD never fills, and PARTIAL's rest keeps resting, as at submission.
 */
export const onPrice = (order: RestingOrder, price: number): PriceMove => {
  if (order.spec.symbol === "HOLD" || order.spec.symbol === "PARTIAL" || order.filled > 0) return { _tag: "Unchanged" }
  const { executes, triggered } = evaluate(order.spec, price, order.triggered)
  if (executes) return { _tag: "Filled", quantity: order.spec.quantity }
  return triggered && !order.triggered ? { _tag: "Triggered" } : { _tag: "Unchanged" }
}

/** A resting order's status at `now`: a day order still open at the end of its day has expired. */
export const statusAt = (
  order: { readonly status: OrderStatus; readonly time_in_force: OrderSpec["time_in_force"]; readonly placedAt: DateTime.Utc },
  now: DateTime.Utc
): OrderStatus =>
  (order.status === "new" || order.status === "partially_filled") &&
    order.time_in_force === "day" &&
    !DateTime.lessThan(now, endOfDay(order.placedAt))
    ? "expired"
    : order.status
