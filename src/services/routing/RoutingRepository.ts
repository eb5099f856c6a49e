import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type { BrokerId, IntentId, Mode, UserId } from "../../domain/Ids.js"
import type { IntentStatus, OrderSpec } from "../../domain/Intent.js"
import type { JobKind, Transition } from "../../domain/Routing.js"
import type { BrokerOrder, Connection } from "../brokers/BrokerGateway.js"
import * as SqlRoutingRepository from "./SqlRoutingRepository.js"
import * as TransitionLog from "./TransitionLog.js"

/**
 * A claimed unit of routing work. `claims` counts how often it was claimed: more than 1 means an
 * earlier claim may have acted already (a submission may have reached the broker). `version`
 * counts how often it was enqueued again. `context` is the intent as the claim read it (none if it
 * is gone).
 */
export interface Job {
  readonly intentId: IntentId
  readonly kind: JobKind
  readonly claims: number
  readonly version: number
  readonly context: Option.Option<RoutingContext>
}

/** Everything a worker needs to act on an intent. */
export interface RoutingContext {
  readonly intentId: IntentId
  readonly userId: UserId
  readonly mode: Mode
  readonly status: IntentStatus
  readonly spec: OrderSpec
  readonly connection: Connection
  readonly clientOrderId: string
  readonly hasOrder: boolean
  readonly cancelRequested: boolean
  /** The quantity the recorded fills add up to. */
  readonly filled: number
}

/**
 * The broker's word about an intent's order, to record; with `done`, the job that ends with it;
 * with `followUp`, the work that follows an order left open, queued with it.
 */
export interface Recording {
  readonly intentId: IntentId
  readonly order: BrokerOrder
  readonly done?: Job | undefined
  readonly followUp?: FollowUp | undefined
}

/** A word the broker volunteered about an order of `connectionId` (see `recordHeard`). */
export interface HeardWord {
  readonly connectionId: BrokerId
  readonly intentId: IntentId
  readonly order: BrokerOrder
}

/**
 * What follows a submission whose order the broker left open, queued in the transaction that
 * records it, under the intent's lock: the cancel the client asked for before that lock, if any
 * (a cancel asked for later waits for the lock, then finds the order and queues its own); else,
 * with `syncAt`, a check of the order then (a day order at a broker that does not stream its
 * updates). Nothing follows an intent the recording left final.
 */
export interface FollowUp {
  readonly syncAt: DateTime.Utc | undefined
}

/** An intent whose order may still change at the broker. */
export interface OpenOrder {
  readonly intentId: IntentId
  readonly clientOrderId: string
  readonly brokerOrderId: string | null
  readonly filled: number
}

/** The durable side of routing: jobs, orders, fills, transitions and their events. */
export class RoutingRepository extends Context.Tag("RoutingRepository")<RoutingRepository, {
  /**
   * Claims up to `limit` due jobs for `lease`, each with its intent's context (one round trip);
   * jobs claimed by a live worker are skipped, not waited for.
   */
  readonly claim: (limit: number, lease: Duration.Duration) => Effect.Effect<ReadonlyArray<Job>>
  /** When the earliest job not held by a live worker is due: how long a worker may sleep. */
  readonly nextDue: Effect.Effect<Option.Option<DateTime.Utc>>
  /**
   * Extends the lease of jobs still in flight, so that only a dead worker's jobs are claimed again.
   * A job whose row another transaction holds at that moment is skipped, not waited for.
   */
  readonly extend: (jobs: ReadonlyArray<Job>, lease: Duration.Duration) => Effect.Effect<void>
  /**
   * Records the broker's word about the order: the order, new fills, the transition and its event;
   * with `done`, also finishes that job (as `finish` does) in the same transaction, and with
   * `followUp`, queues there what follows an order left open. Records that arrive together may
   * share that transaction; inside a caller's transaction, it is the caller's.
   */
  readonly record: (intentId: IntentId, order: BrokerOrder, done?: Job, followUp?: FollowUp) => Effect.Effect<Transition>
  /**
   * Records a word the broker volunteered about an order of `connectionId` (its update stream, the
   * mock market's fills), as `record` would, while the intent is open and routed through that
   * connection: none otherwise (the intent is gone, final, or another's). A cancel the client
   * asked for is recorded as the client's (`heardReason`).
   */
  readonly recordHeard: (connectionId: BrokerId, intentId: IntentId, order: BrokerOrder) => Effect.Effect<Option.Option<Transition>>
  /**
   * Records many volunteered words at once, each as `recordHeard` would: with the recordings
   * arriving meanwhile, or inside a caller's transaction, in it, a few statements whatever their
   * number (should those fail, each recorded alone). Each is answered with its own exit, in the
   * order given.
   */
  readonly recordHeardMany: (words: ReadonlyArray<HeardWord>) => Effect.Effect<ReadonlyArray<Exit.Exit<Option.Option<Transition>>>>
  /**
   * Records many words at once, each as `record` would, with its follow-up: in one transaction
   * with the recordings arriving meanwhile (should it fail, each recorded alone), or in the
   * caller's transaction. Each is answered with its own exit, in the order given.
   */
  readonly recordMany: (recordings: ReadonlyArray<Recording>) => Effect.Effect<ReadonlyArray<Exit.Exit<Transition>>>
  /** Routing gave up (the broker certainly holds no order); with `done`, that job ends with it. */
  readonly fail: (intentId: IntentId, reason: string, done?: Job) => Effect.Effect<Transition>
  /**
   * Cancels an intent whose order certainly never reached the broker: its submission was never
   * claimed, or the broker, asked by client order id, holds none. With `done`, that job ends with it.
   */
  readonly cancelLocally: (intentId: IntentId, reason: string, done?: Job) => Effect.Effect<Transition>
  /** The broker refused the order and holds none: `rejected` with its reason; with `done`, that job ends with it. */
  readonly reject: (intentId: IntentId, reason: string, done?: Job) => Effect.Effect<Transition>
  /**
   * Done with a job, if this worker still holds it; if it was enqueued again meanwhile, it is
   * handed back to run again instead.
   */
  readonly finish: (job: Job) => Effect.Effect<void>
  /** Releases a job (if this worker still holds it) to run again at `runAt`, or sooner if enqueued again meanwhile. */
  readonly reschedule: (job: Job, runAt: DateTime.Utc) => Effect.Effect<void>
  /** Routing work on an intent still open, due at `runAt` (a final intent has none left: nothing is queued). */
  readonly enqueue: (intentId: IntentId, kind: JobKind, runAt: DateTime.Utc) => Effect.Effect<void>
  /**
   * Takes or renews the lease on a connection's update stream for `holder`: true while it holds
   * it. Another holder gets it only once the lease has run out unrenewed.
   */
  readonly holdStream: (connectionId: BrokerId, holder: string, lease: Duration.Duration) => Effect.Effect<boolean>
  /** Gives the lease up, if `holder` still holds it. */
  readonly releaseStream: (connectionId: BrokerId, holder: string) => Effect.Effect<void>
  /** The intents of a connection with an order still open, and the quantity recorded filled of each. */
  readonly openOrders: (connectionId: BrokerId) => Effect.Effect<ReadonlyArray<OpenOrder>>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** On the `SqlClient` in context; each status change it commits is logged. */
  static readonly layerSql = Layer.scoped(this, Effect.map(SqlRoutingRepository.make, TransitionLog.logged))
}
