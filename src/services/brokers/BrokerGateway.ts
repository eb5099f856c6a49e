import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type { BrokerKind } from "../../domain/Account.js"
import type { BrokerId } from "../../domain/Ids.js"
import type { OrderSpec, OrderStatus } from "../../domain/Intent.js"
import * as Brokers from "./Brokers.js"

export { type BrokerError, BrokerTimeout, BrokerUnavailable } from "../../domain/Broker.js"
import type { BrokerError } from "../../domain/Broker.js"

/** An order as the broker holds it. */
export interface BrokerOrder {
  readonly brokerOrderId: string
  readonly clientOrderId: string
  readonly status: OrderStatus
  readonly reason?: string | undefined
  readonly fills: ReadonlyArray<{
    readonly id: string
    readonly quantity: number
    readonly price: number
    readonly filledAt: DateTime.Utc
  }>
}

/** Which connection an order goes through. */
export interface Connection {
  readonly id: BrokerId
  readonly kind: BrokerKind
}

/**
 * A broker, as routing sees it. Every call names the order by its client order id, derived from
 * the intent, so a repeated submission can never place a second order.
 */
export class BrokerGateway extends Context.Tag("BrokerGateway")<BrokerGateway, {
  readonly submit: (
    connection: Connection,
    order: { readonly clientOrderId: string; readonly spec: OrderSpec }
  ) => Effect.Effect<BrokerOrder, BrokerError>
  readonly lookup: (connection: Connection, clientOrderId: string) => Effect.Effect<Option.Option<BrokerOrder>, BrokerError>
  /** Cancels what is still open; answers the order as it stands afterwards (none if unknown). */
  readonly cancel: (connection: Connection, clientOrderId: string) => Effect.Effect<Option.Option<BrokerOrder>, BrokerError>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** Each connection to the broker of its kind: the mock broker; Alpaca is not reachable in this version. */
  static readonly layer = Layer.effect(this, Brokers.make)
}
