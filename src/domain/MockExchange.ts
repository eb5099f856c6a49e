import * as DateTime from "effect/DateTime"
import type { OrderSpec, OrderStatus } from "./Intent.js"
import { endOfDay } from "./Routing.js"

/** The mock broker's price for every symbol. */
export const REFERENCE_PRICE = 100

/** What the mock broker does with an order, decided once at submission (price 100 for every symbol; the symbols REJECT, PARTIAL, FAIL and HOLD reach the other outcomes). */
export type MockOutcome =
  | { readonly _tag: "Unreachable" }
  | { readonly _tag: "Rejected"; readonly reason: string }
  | { readonly _tag: "Placed"; readonly status: OrderStatus; readonly filled: number }

const round9 = (n: number) => Math.round(n * 1e9) / 1e9

const marketable = (spec: OrderSpec, limit: number) =>
  spec.side === "buy" ? limit >= REFERENCE_PRICE : limit <= REFERENCE_PRICE

const stopTriggered = (spec: OrderSpec, stop: number) =>
  spec.side === "buy" ? REFERENCE_PRICE >= stop : REFERENCE_PRICE <= stop

/** Whether the order executes at the reference price now. */
const executes = (spec: OrderSpec): boolean => {
  switch (spec.order_type) {
    case "market":
      return true
    case "limit":
      return marketable(spec, spec.limit_price ?? 0)
    case "stop":
      return stopTriggered(spec, spec.stop_price ?? 0)
    case "stop_limit":
      return stopTriggered(spec, spec.stop_price ?? 0) && marketable(spec, spec.limit_price ?? 0)
  }
}

/** An order that does not execute now rests, unless its time in force forbids resting. */
const rests = (spec: OrderSpec): OrderStatus =>
  spec.time_in_force === "ioc" || spec.time_in_force === "fok" ? "canceled" : "new"

export const decide = (spec: OrderSpec): MockOutcome => {
  switch (spec.symbol) {
    case "FAIL":
      return { _tag: "Unreachable" }
    case "REJECT":
      return { _tag: "Rejected", reason: "Rejected by the mock broker: symbol REJECT is not tradable" }
    case "HOLD":
      return { _tag: "Placed", status: "new", filled: 0 }
  }
  if (!executes(spec)) return { _tag: "Placed", status: rests(spec), filled: 0 }
  if (spec.symbol === "PARTIAL") {
    if (spec.time_in_force === "fok") return { _tag: "Placed", status: "canceled", filled: 0 }
    const half = round9(spec.quantity / 2)
    return { _tag: "Placed", status: spec.time_in_force === "ioc" ? "canceled" : "partially_filled", filled: half }
  }
  return { _tag: "Placed", status: "filled", filled: spec.quantity }
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
