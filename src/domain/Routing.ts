import * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"
import { IntentId } from "./Ids.js"
import { finalStatuses, type IntentStatus, type OrderStatus } from "./Intent.js"

/** Routing work on an intent: submit its order, cancel it, or bring its status up to date. */
export type JobKind = "submit" | "cancel" | "sync"

/** The end of the UTC day an order was placed on: when a resting day order expires. */
export const endOfDay = (placedAt: DateTime.Utc): DateTime.Utc =>
  DateTime.add(DateTime.startOf(placedAt, "day"), { days: 1 })

/** What the broker says of the order of an intent: its status and every fill so far. */
export interface BrokerFill {
  /** The broker's id of the fill: recording the same fill twice changes nothing. */
  readonly id: string
  readonly quantity: number
  readonly price: number
}

export interface OrderUpdate {
  readonly status: OrderStatus
  readonly fills: ReadonlyArray<BrokerFill>
  readonly reason?: string | undefined
}

/** What routing knows of an intent: enough to decide its next state. */
export interface RoutingState {
  readonly status: IntentStatus
  readonly quantity: number
  /** Ids and quantities of the fills recorded so far. */
  readonly fills: ReadonlyArray<{ readonly id: string; readonly quantity: number }>
}

export interface Transition {
  readonly status: IntentStatus
  readonly reason: string | null
  /** The fills to record: new ones only, never beyond the intent's quantity. */
  readonly fills: ReadonlyArray<BrokerFill>
  /** True when the status changes (and so an event is due). */
  readonly changed: boolean
  /** The quantity filled once the fills are recorded. */
  readonly filled: number
}

const legal: Record<IntentStatus, ReadonlySet<IntentStatus>> = {
  pending: new Set(["partially_filled", "filled", "canceled", "rejected", "failed"]),
  partially_filled: new Set(["filled", "canceled"]),
  filled: new Set(),
  canceled: new Set(),
  rejected: new Set(),
  failed: new Set()
}

/** Whether the intent state diagram has the edge `from → to` (`legal` above). */
export const isLegal = (from: IntentStatus, to: IntentStatus) => legal[from].has(to)

export const isFinal = (status: IntentStatus) => finalStatuses.has(status)

const EPSILON = 1e-9
const round9 = (n: number) => Math.round(n * 1e9) / 1e9

/** The quantity the recorded fills add up to. */
export const filledQuantity = (state: RoutingState) => round9(state.fills.reduce((sum, f) => sum + f.quantity, 0))

/** No change: the state as it is. */
const unchanged = (state: RoutingState): Transition => ({
  status: state.status,
  reason: null,
  fills: [],
  changed: false,
  filled: filledQuantity(state)
})

/** Fills not yet recorded, cut so that the total never exceeds `quantity`. */
const acceptFills = (state: RoutingState, incoming: ReadonlyArray<BrokerFill>) => {
  const known = new Set(state.fills.map((f) => f.id))
  let filled = filledQuantity(state)
  const accepted: Array<BrokerFill> = []
  for (const fill of incoming) {
    if (known.has(fill.id) || fill.quantity <= 0) continue
    const room = round9(state.quantity - filled)
    if (room <= EPSILON) break
    const quantity = round9(Math.min(fill.quantity, room))
    accepted.push({ ...fill, quantity })
    known.add(fill.id)
    filled = round9(filled + quantity)
  }
  return { accepted, filled }
}

/** The intent status an order update points at, before asking whether the edge is legal. */
const target = (update: OrderUpdate, filled: number, quantity: number): IntentStatus => {
  if (filled >= quantity - EPSILON) return "filled"
  switch (update.status) {
    case "rejected":
      return filled > 0 ? "canceled" : "rejected"
    case "canceled":
    case "expired":
      return "canceled"
    case "filled":
    case "partially_filled":
    case "new":
      return filled > 0 ? "partially_filled" : "pending"
  }
}

const reasonFor = (status: IntentStatus, update: OrderUpdate): string | null => {
  if (status === "rejected") return update.reason ?? "Rejected by the broker"
  if (status === "canceled") {
    return update.reason ?? (update.status === "expired" ? "Order expired at the end of the day" : "Order canceled")
  }
  return null
}

/**
 * The one function that decides an intent's transitions: a broker's word about the order gives
 * the fills to record and the next status. Final states absorb; illegal edges are ignored; the
 * filled quantity never exceeds the intent's quantity.
 */
export const applyOrderUpdate = (state: RoutingState, update: OrderUpdate): Transition => {
  if (isFinal(state.status)) return unchanged(state)
  const { accepted, filled } = acceptFills(state, update.fills)
  const next = target(update, filled, state.quantity)
  const moves = next !== state.status && isLegal(state.status, next)
  const status = moves ? next : state.status
  return { status, reason: moves ? reasonFor(status, update) : null, fills: accepted, changed: moves, filled }
}

/** A move to `status` with no order behind it, when the diagram allows it; otherwise no change. */
const withoutOrder = (status: IntentStatus) => (state: RoutingState, reason: string): Transition =>
  isLegal(state.status, status)
    ? { status, reason, fills: [], changed: true, filled: filledQuantity(state) }
    : unchanged(state)

/** Routing gave up: `failed`, unless the intent is already final. */
export const applyFailure = withoutOrder("failed")

/** Canceled before any order reached the broker. */
export const applyLocalCancel = withoutOrder("canceled")

/** The broker refused the order and holds none: `rejected` with the broker's reason. */
export const applyRejection = withoutOrder("rejected")

/** The statuses an order at a broker never leaves. */
export const finalOrderStatuses: ReadonlySet<OrderStatus> = new Set(["filled", "canceled", "expired", "rejected"])

/**
 * What an order's status becomes on a later word about it: words may arrive out of order (a stream
 * event before the submission's answer), so a final status stays, and a partial fill is never
 * undone by `new`.
 */
export const nextOrderStatus = (current: OrderStatus, incoming: OrderStatus): OrderStatus =>
  finalOrderStatuses.has(current) || (current === "partially_filled" && incoming === "new") ? current : incoming

/** The webhook event type of a status an intent has just entered. */
export const eventType = (status: IntentStatus) => `intent.${status === "pending" ? "created" : status}` as const

/** The status_reason of an intent the client canceled. */
export const CANCELED_BY_CLIENT = "Canceled by the client"

/**
 * The reason to record with a word heard on a broker's update stream: a cancel there, after the
 * client asked for one, is the client's.
 */
export const heardReason = (update: OrderUpdate, cancelRequested: boolean): string | undefined =>
  update.status === "canceled" && cancelRequested ? CANCELED_BY_CLIENT : update.reason

const CLIENT_ORDER_PREFIX = "tir-"

/** The client order id of an intent's order: one intent, one order, whatever is retried. */
export const clientOrderId = (intentId: string) => `${CLIENT_ORDER_PREFIX}${intentId}`

/** The intent an order belongs to, from the client order id routing gave it; none for other orders. */
export const intentOfOrder = (clientOrderId: string): Option.Option<IntentId> =>
  clientOrderId.startsWith(CLIENT_ORDER_PREFIX)
    ? Option.liftPredicate(clientOrderId.slice(CLIENT_ORDER_PREFIX.length), (id) => /^[0-9a-f-]{36}$/.test(id)).pipe(
      Option.map(IntentId.make)
    )
    : Option.none()
