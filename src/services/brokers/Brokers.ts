import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { identity } from "effect/Function"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as Option from "effect/Option"
import type { BrokerKind } from "../../domain/Account.js"
import { BrokerRejected } from "../../domain/Broker.js"
import * as AlpacaBroker from "./alpaca/AlpacaBroker.js"
import type { AlpacaOptions } from "./alpaca/AlpacaConfig.js"
import type { BrokerError, BrokerGateway, BrokerOrder, Submission } from "./BrokerGateway.js"
import * as MockBroker from "./mock/MockBroker.js"
import * as MetricSeries from "../../MetricSeries.js"

export interface BrokersOptions {
  readonly alpaca: AlpacaOptions
}

/** How long each call to a broker takes, by broker, operation and outcome. */
export const requestDuration = Metric.histogram(
  "tir_broker_request_duration_seconds",
  MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "Broker call latency in seconds, by broker, operation (submit, lookup, cancel) and outcome (ok, rejected, error)."
)

/** A call's outcome: `ok`, `rejected` (the broker refused the order), or `error` (no usable answer, interrupted). */
const outcomeOf = (exit: Exit.Exit<unknown, unknown>) => {
  if (Exit.isSuccess(exit)) return "ok"
  const failure = Cause.failureOption(exit.cause)
  return Option.isSome(failure) && failure.value instanceof BrokerRejected ? "rejected" : "error"
}

type Operation = "submit" | "lookup" | "cancel"

/** Records a call's duration under its broker, operation and outcome. */
const observeDuration = (broker: BrokerKind, operation: Operation, exit: Exit.Exit<unknown, unknown>, seconds: number) =>
  requestDuration.unsafeUpdate(
    seconds,
    MetricSeries.labels(["broker", broker], ["operation", operation], ["outcome", outcomeOf(exit)])
  )

const recordDuration = (broker: BrokerKind, operation: Operation, exit: Exit.Exit<unknown, unknown>, seconds: number) =>
  Effect.sync(() => observeDuration(broker, operation, exit, seconds))

const timed = <A, E>(broker: BrokerKind, operation: Operation, call: Effect.Effect<A, E>) =>
  Effect.flatMap(Clock.currentTimeMillis, (started) =>
    Effect.onExit(call, (exit) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => recordDuration(broker, operation, exit, (now - started) / 1000))))

/** The gateway routing uses: each connection goes to the broker of its kind, each call timed. */
export const make = (options: BrokersOptions) =>
  Effect.gen(function*() {
    const brokers: Record<BrokerKind, BrokerGateway["Type"]> = {
      mock: yield* MockBroker.make,
      alpaca: yield* AlpacaBroker.make(options.alpaca)
    }
    return identity<BrokerGateway["Type"]>({
      submit: (connection, order) => timed(connection.kind, "submit", brokers[connection.kind].submit(connection, order)),
      // Each kind's orders go to its broker together; each order's duration is its batch's. Made
      // once, its steps in loops (see "Hot paths" in docs/development.md).
      submitMany: Effect.fnUntraced(function*(orders: ReadonlyArray<Submission>) {
        const kinds = new Set<BrokerKind>()
        for (const order of orders) kinds.add(order.connection.kind)
        const answers: Array<Exit.Exit<BrokerOrder, BrokerError | BrokerRejected>> = []
        for (const kind of kinds) {
          const indexes: Array<number> = []
          const mine: Array<Submission> = []
          for (const [index, order] of orders.entries()) {
            if (order.connection.kind !== kind) continue
            indexes.push(index)
            mine.push(order)
          }
          const started = yield* Clock.currentTimeMillis
          const exits = yield* brokers[kind].submitMany(mine)
          const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
          for (const [i, exit] of exits.entries()) {
            const index = indexes[i]
            if (index !== undefined) answers[index] = exit
            observeDuration(kind, "submit", exit, seconds)
          }
        }
        for (const [index] of orders.entries()) answers[index] ??= Exit.die(new Error("a submission went unanswered"))
        return answers
      }),
      lookup: (connection, order) => timed(connection.kind, "lookup", brokers[connection.kind].lookup(connection, order)),
      cancel: (connection, clientOrderId) =>
        timed(connection.kind, "cancel", brokers[connection.kind].cancel(connection, clientOrderId)),
      verify: (kind, environment, credentials) => brokers[kind].verify(kind, environment, credentials),
      streaming: Object.values(brokers).flatMap((broker) => broker.streaming),
      updates: (connection) => brokers[connection.kind].updates(connection)
    })
  })
