import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { BrokerKind } from "../../domain/Account.js"
import type { BrokerId } from "../../domain/Ids.js"
import type { OrderSpec, OrderStatus } from "../../domain/Intent.js"
import * as Brokers from "./Brokers.js"

/** The broker certainly did not receive the request (connection refused, DNS, 5xx before acceptance). */
export class BrokerUnavailable extends Schema.TaggedError<BrokerUnavailable>()("BrokerUnavailable", {
  detail: Schema.String
}) {}

/** The outcome is unknown (a timeout): the broker may or may not hold the order. */
export class BrokerTimeout extends Schema.TaggedError<BrokerTimeout>()("BrokerTimeout", {
  detail: Schema.String
}) {}

export type BrokerError = BrokerUnavailable | BrokerTimeout

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
  // The implementations import this Tag: `Effect.suspend` reads them only when the Layer is built.
  /** Each connection to the broker of its kind: the mock broker; Alpaca is not reachable in this version. */
  static readonly layer = Layer.effect(this, Effect.suspend(() => Brokers.make))
}
