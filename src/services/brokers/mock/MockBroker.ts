import type * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { BrokerUnavailable } from "../../../domain/Broker.js"
import type { OrderSpec } from "../../../domain/Intent.js"
import { decide, REFERENCE_PRICE } from "../../../domain/MockExchange.js"
import { orDie } from "../../../sql/Defects.js"
import type { BrokerGateway, Connection, OrderRef } from "../BrokerGateway.js"
import * as MockBook from "./MockBook.js"

/**
 * The deterministic mock broker of test mode. Its book lives in the database, keyed by client
 * order id: submissions are idempotent, survive restarts, and are shared by every instance. An
 * order is decided at its symbol's price for the connection's user (100 unless set; a price move
 * fills resting orders, see `MockMarket`). Time (the end of a day order's day) is read from
 * Effect's `Clock`.
 */
export const make = Effect.gen(function*() {
  const book = yield* MockBook.make

  return identity<Context.Tag.Service<typeof BrokerGateway>>({
    submit: Effect.fn("MockBroker.submit")(
      function*(connection: Connection, { clientOrderId, spec }: { readonly clientOrderId: string; readonly spec: OrderSpec }) {
        const price = Option.getOrElse(yield* orDie(book.priceFor(connection.id, spec.symbol)), () => REFERENCE_PRICE)
        const outcome = decide(spec, price)
        if (outcome._tag === "Unreachable") {
          return yield* new BrokerUnavailable({ detail: "Mock broker unreachable (symbol FAIL)" })
        }
        const now = yield* DateTime.now
        const [status, filled, reason, triggered] = outcome._tag === "Rejected"
          ? ["rejected", 0, outcome.reason, false] as const
          : [outcome.status, outcome.filled, null, outcome.triggered] as const
        const row = yield* orDie(book.place({
          client_order_id: clientOrderId,
          broker_order_id: `mock-${clientOrderId}`,
          connection_id: connection.id,
          time_in_force: spec.time_in_force,
          status,
          reason,
          filled_quantity: filled,
          placed_at: now,
          updated_at: now,
          symbol: spec.symbol,
          side: spec.side,
          order_type: spec.order_type,
          quantity: spec.quantity,
          limit_price: spec.limit_price,
          stop_price: spec.stop_price,
          triggered,
          fill_price: filled > 0 ? price : null,
          filled_at: filled > 0 ? now : null
        }))
        return MockBook.toBrokerOrder(row, now)
      }
    ),

    lookup: Effect.fn("MockBroker.lookup")(function*(_: Connection, order: OrderRef) {
      const now = yield* DateTime.now
      return Option.map(yield* book.select(order.clientOrderId), (row) => MockBook.toBrokerOrder(row, now))
    }, orDie),

    cancel: Effect.fn("MockBroker.cancel")(function*(_: Connection, clientOrderId: string) {
      const now = yield* DateTime.now
      const current = yield* book.select(clientOrderId)
      if (Option.isNone(current)) return Option.none()
      const order = MockBook.toBrokerOrder(current.value, now)
      if (order.status !== "new" && order.status !== "partially_filled") return Option.some(order)
      yield* book.cancel({ client_order_id: clientOrderId, updated_at: now })
      return Option.map(yield* book.select(clientOrderId), (row) => MockBook.toBrokerOrder(row, now))
    }, orDie),

    // A mock connection has no credentials to check, and its orders change only when asked.
    verify: () => Effect.void,
    streaming: [],
    updates: () => Stream.empty
  })
})
