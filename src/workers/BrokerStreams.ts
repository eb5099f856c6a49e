import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { IntentId } from "../domain/Ids.js"
import { intentOfOrder, isFinal } from "../domain/Routing.js"
import { AccountRepository } from "../services/accounts/AccountRepository.js"
import { type BrokerCredentialsRefused, BrokerGateway, type BrokerOrder, type Connection } from "../services/brokers/BrokerGateway.js"
import { IdGenerator } from "../services/IdGenerator.js"
import { type OpenOrder, RoutingRepository } from "../services/routing/RoutingRepository.js"
import * as OrderedByKey from "./OrderedByKey.js"
import { delays } from "./RetryConfig.js"

export interface StreamOptions {
  /** How often the orders still open are asked for, stream or no stream; 30 seconds unless set. */
  readonly reconcileInterval?: Duration.DurationInput | undefined
  /** How long a stream's lease holds unrenewed: another instance takes the stream over after it. 15 seconds unless set. */
  readonly lease?: Duration.DurationInput | undefined
}

const EPSILON = 1e-9
/** The words of one stream being recorded at once; beyond, the stream is read no further until one is done. */
const WORDS_IN_FLIGHT = 256
/** The key of a stream's reconciliations among its words' keys (intent ids). */
const RECONCILIATION = "reconciliation"
/**
 * The update streams of the brokers that push them (Alpaca's `trade_updates`). Every active
 * connection of such a broker has one stream across all instances: a lease row decides which
 * instance holds it, renewed every third of its length; when the holder dies, another takes over
 * once the lease runs out. The holder records each update through the one transition function,
 * and reconciles the connection's open orders on every (re)connect and every `reconcileInterval`,
 * so that fills the stream dropped are found by asking the broker.
 */
export const make = (options: StreamOptions = {}) =>
  Effect.gen(function*() {
    const repository = yield* RoutingRepository
    const accounts = yield* AccountRepository
    const broker = yield* BrokerGateway
    const holder = yield* (yield* IdGenerator).uuid
    const reconcileInterval = Duration.decode(options.reconcileInterval ?? "30 seconds")
    const lease = Duration.decode(options.lease ?? "15 seconds")
    const streams = yield* FiberMap.make<Connection["id"]>()
    const held = new Set<Connection["id"]>()

    /** Records one word of the broker about an order, then asks for the executions it shows were missed. */
    const apply = Effect.fnUntraced(function*(connection: Connection, intentId: IntentId, order: BrokerOrder) {
      // Recorded only while the intent is open and routed through this very connection: an
      // order's id names no one else's intent.
      const recorded = yield* repository.recordHeard(connection.id, intentId, order)
      if (Option.isNone(recorded)) return
      const transition = recorded.value
      if (isFinal(transition.status) || order.filledQuantity === undefined) return
      if (order.filledQuantity > transition.filled + EPSILON) {
        yield* reconcileOne(connection, {
          intentId,
          clientOrderId: order.clientOrderId,
          brokerOrderId: order.brokerOrderId,
          filled: transition.filled
        })
      }
    })

    /**
     * Hands one word to the recording without waiting for it: the words of one order are recorded
     * in the order heard, each after the one before it; words of different orders go at once, so
     * that words heard together share a recording instead of each waiting for the last one's.
     */
    const hand = (connection: Connection, inOrder: OrderedByKey.OrderedByKey<BrokerCredentialsRefused>, order: BrokerOrder) => {
      const intentId = intentOfOrder(order.clientOrderId)
      if (Option.isNone(intentId)) return Effect.void
      // An order open with nothing filled says only that it exists, which the submission records
      // (or, its answer lost, the lookup that follows): only words that change something are kept.
      if (order.status === "new" && order.fills.length === 0) return Effect.void
      return inOrder.run(intentId.value, apply(connection, intentId.value, order))
    }

    const reconcileOne = (connection: Connection, open: OpenOrder) =>
      broker.lookup(connection, { clientOrderId: open.clientOrderId, brokerOrderId: open.brokerOrderId, recorded: open.filled }).pipe(
        Effect.flatMap(Option.match({
          onNone: () => Effect.void,
          onSome: (order) => Effect.asVoid(repository.record(open.intentId, order))
        })),
        Effect.catchTags({
          BrokerTimeout: (error) => Effect.logWarning("reconciliation deferred", error.detail),
          BrokerUnavailable: (error) => Effect.logWarning("reconciliation deferred", error.detail)
        }),
        Effect.annotateLogs({ intent_id: open.intentId })
      )

    /** Asks the broker for every order of the connection still open. */
    const reconcile = (connection: Connection) =>
      Effect.flatMap(repository.openOrders(connection.id), (open) =>
        Effect.forEach(open, (one) => reconcileOne(connection, one), { discard: true }))

    const follow = (connection: Connection) =>
      Effect.gen(function*() {
        yield* Effect.logInfo("following the broker's updates")
        yield* reconcile(connection).pipe(
          Effect.delay(reconcileInterval),
          Effect.repeat(Schedule.spaced(reconcileInterval)),
          Effect.forkScoped
        )
        const inOrder = yield* OrderedByKey.make<BrokerCredentialsRefused>(WORDS_IN_FLIGHT)
        yield* broker.updates(connection).pipe(
          Stream.runForEach((update) =>
            // On every (re)connect the open orders are asked for, one reconciliation after another,
            // while the words the stream brings meanwhile are recorded as they come.
            update._tag === "Connected"
              ? inOrder.run(RECONCILIATION, reconcile(connection))
              : hand(connection, inOrder, update.order)
          ),
          // The stream ended: the words it handed over are recorded first.
          Effect.zipRight(inOrder.idle),
          Effect.raceFirst(inOrder.failure)
        )
      }).pipe(
        Effect.scoped,
        Effect.catchTag("BrokerCredentialsRefused", () =>
          Effect.logWarning("the broker refused the connection's credentials; its stream stops")),
        Effect.annotateLogs({ broker_id: connection.id, kind: connection.kind })
      )

    /** One round: take or renew each lease, start the streams this instance holds, stop the others. */
    const round = Effect.gen(function*() {
      const active = new Map<Connection["id"], Connection>()
      for (const kind of broker.streaming) {
        for (const id of yield* accounts.listActiveBrokers(kind)) active.set(id, { id, kind })
      }
      for (const id of [...held]) {
        if (!active.has(id)) {
          yield* FiberMap.remove(streams, id)
          yield* repository.releaseStream(id, holder)
          held.delete(id)
        }
      }
      for (const connection of active.values()) {
        if (yield* repository.holdStream(connection.id, holder, lease)) {
          held.add(connection.id)
          yield* FiberMap.run(streams, connection.id, follow(connection), { onlyIfMissing: true })
        } else if (held.delete(connection.id)) {
          yield* FiberMap.remove(streams, connection.id)
        }
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("stream leases not renewed", cause)))

    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        yield* FiberMap.clear(streams)
        yield* Effect.forEach(held, (id) => repository.releaseStream(id, holder), { discard: true })
      }).pipe(Effect.ignoreLogged)
    )
    yield* round.pipe(
      Effect.repeat(Schedule.spaced(Duration.divide(lease, 3).pipe(Option.getOrElse(() => Duration.seconds(5))))),
      Effect.forkScoped
    )
  }).pipe(Effect.annotateLogs({ service: "broker-streams" }))

/** The streams, followed for as long as the Layer is in use. */
export const layer = (options: StreamOptions = {}) => Layer.scopedDiscard(make(options))

/** `ALPACA_RECONCILE_INTERVAL` (default `30s`) and `BROKER_STREAM_LEASE` (default `15s`). */
export const config = Config.all({
  reconcileInterval: Config.map(delays("ALPACA_RECONCILE_INTERVAL", "30s"), (d) => d[0] ?? Duration.seconds(30)),
  lease: Config.map(delays("BROKER_STREAM_LEASE", "15s"), (d) => d[0] ?? Duration.seconds(15))
})
