import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import type * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import type * as Stream from "effect/Stream"
import type { BrokerEnvironment, BrokerKind } from "../../domain/Account.js"
import type { BrokerId } from "../../domain/Ids.js"
import type { OrderSpec, OrderStatus } from "../../domain/Intent.js"
import * as Brokers from "./Brokers.js"
import * as InMemoryBrokers from "./InMemoryBrokers.js"

export {
  type BrokerError,
  BrokerCredentialsRefused,
  BrokerRejected,
  BrokerTimeout,
  BrokerUnavailable
} from "../../domain/Broker.js"
import type { BrokerCredentialsRefused, BrokerError, BrokerRejected, BrokerUnavailable } from "../../domain/Broker.js"

/** One execution of an order. Its `id` is the broker's: recording it twice changes nothing. */
export interface BrokerExecution {
  readonly id: string
  readonly quantity: number
  readonly price: number
  readonly filledAt: DateTime.Utc
}

/** An order as the broker holds it. */
export interface BrokerOrder {
  readonly brokerOrderId: string
  readonly clientOrderId: string
  readonly status: OrderStatus
  readonly reason?: string | undefined
  /** Executions the broker reported with this word (all of them, or only new ones from a stream). */
  readonly fills: ReadonlyArray<BrokerExecution>
  /** The broker's own total filled so far, when it says: fewer recorded fills mean some were missed. */
  readonly filledQuantity?: number | undefined
}

/**
 * An order to look up: by the client order id the router gave it, or by the broker's own id once
 * recorded. `recorded` is the quantity already recorded: a broker may skip reading executions when
 * its own filled total shows none are missing.
 */
export interface OrderRef {
  readonly clientOrderId: string
  readonly brokerOrderId?: string | null | undefined
  readonly recorded?: number | undefined
}

/** Which connection an order goes through. */
export interface Connection {
  readonly id: BrokerId
  readonly kind: BrokerKind
}

/** A key pair a user gives to connect a real broker account. */
export interface BrokerCredentials {
  readonly apiKeyId: string
  readonly apiSecretKey: Redacted.Redacted<string>
}

/**
 * What a broker pushes on a connection's update stream: `Connected` each time the stream is
 * (re)established (updates may have been missed before it: reconcile the open orders), then the
 * orders as they change.
 */
export type BrokerUpdate =
  | { readonly _tag: "Connected" }
  | { readonly _tag: "Order"; readonly order: BrokerOrder }

/** An order to place: its connection, its client order id and what to buy or sell. */
export interface Submission {
  readonly connection: Connection
  readonly clientOrderId: string
  readonly spec: OrderSpec
}

/**
 * A broker, as routing sees it. Every call names the order by its client order id, derived from
 * the intent, so a repeated submission can never place a second order.
 */
export class BrokerGateway extends Context.Tag("BrokerGateway")<BrokerGateway, {
  /** Places the order; `BrokerRejected` when the broker certainly refused it. */
  readonly submit: (
    connection: Connection,
    order: { readonly clientOrderId: string; readonly spec: OrderSpec }
  ) => Effect.Effect<BrokerOrder, BrokerError | BrokerRejected>
  /**
   * Places many orders at once, each answered as `submit` would answer it alone, in the order
   * given: the mock broker places them in two statements, other brokers take one call each.
   */
  readonly submitMany: (
    orders: ReadonlyArray<Submission>
  ) => Effect.Effect<ReadonlyArray<Exit.Exit<BrokerOrder, BrokerError | BrokerRejected>>>
  /** The order as it stands, with its executions (none if the broker holds no such order). */
  readonly lookup: (connection: Connection, order: OrderRef) => Effect.Effect<Option.Option<BrokerOrder>, BrokerError>
  /**
   * Cancels what is still open; answers the order as it stands afterwards (none if unknown). A
   * broker that cancels asynchronously answers the order still open: the outcome comes later.
   */
  readonly cancel: (connection: Connection, clientOrderId: string) => Effect.Effect<Option.Option<BrokerOrder>, BrokerError>
  /** Checks credentials before a connection is stored: nothing is stored unless they work. */
  readonly verify: (
    kind: BrokerKind,
    environment: BrokerEnvironment,
    credentials: BrokerCredentials
  ) => Effect.Effect<void, BrokerCredentialsRefused | BrokerUnavailable>
  /** The kinds of broker that push updates: each of their active connections holds one stream. */
  readonly streaming: ReadonlyArray<BrokerKind>
  /**
   * A connection's updates, reconnecting by itself until interrupted; it ends with a failure only
   * when the broker refuses the credentials.
   */
  readonly updates: (connection: Connection) => Stream.Stream<BrokerUpdate, BrokerCredentialsRefused>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** Each connection to the broker of its kind: the mock broker (test mode) and Alpaca (live mode). */
  static readonly layer = (options: Brokers.BrokersOptions) => Layer.scoped(this, Brokers.make(options))
  /** Beside the in-memory repositories: Alpaca as configured, and no mock broker (it needs the database). */
  static readonly layerInMemory = (options: Brokers.BrokersOptions) => Layer.scoped(this, InMemoryBrokers.make(options))
}
