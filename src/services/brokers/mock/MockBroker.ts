import type * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { BrokerUnavailable } from "../../../domain/Broker.js"
import { decide, REFERENCE_PRICE } from "../../../domain/MockExchange.js"
import * as Batched from "../../../sql/Batched.js"
import { orDie } from "../../../sql/Defects.js"
import type { BrokerGateway, Connection, OrderRef, Submission } from "../BrokerGateway.js"
import * as MockBook from "./MockBook.js"
import * as Tracing from "../../../Tracing.js"

/** The book's row for an order decided at `price`, or the mock's refusal to answer (symbol `FAIL`). */
const decideOrder = (
  { clientOrderId, connection, spec }: Submission,
  price: number,
  now: DateTime.Utc
): Either.Either<MockBook.BookOrder, BrokerUnavailable> => {
  const outcome = decide(spec, price)
  if (outcome._tag === "Unreachable") return Either.left(new BrokerUnavailable({ detail: "Mock broker unreachable (symbol FAIL)" }))
  const [status, filled, reason, triggered] = outcome._tag === "Rejected"
    ? ["rejected", 0, outcome.reason, false] as const
    : [outcome.status, outcome.filled, null, outcome.triggered] as const
  return Either.right({
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
  })
}

/**
 * The deterministic mock broker of test mode. Its book lives in the database, keyed by client
 * order id: submissions are idempotent, survive restarts, and are shared by every instance. An
 * order is decided at its symbol's price for the connection's user (100 unless set; a price move
 * fills resting orders, see `MockMarket`). Time (the end of a day order's day) is read from
 * Effect's `Clock`.
 */
export const make = Effect.gen(function*() {
  const book = yield* MockBook.make

  /**
   * Decides and places orders, each at its symbol's price for its connection's user: the prices
   * read in one statement, the orders placed in one (a client order id given twice is placed once).
   */
  const submitAll = (submissions: ReadonlyArray<Submission>) =>
    Effect.gen(function*() {
      const prices = yield* book.pricesFor(submissions.map(({ connection, spec }) => ({ connectionId: connection.id, symbol: spec.symbol })))
      const now = yield* DateTime.now
      const decided = submissions.map((submission) =>
        decideOrder(
          submission,
          prices.get(MockBook.priceKey(submission.connection.id, submission.spec.symbol)) ?? REFERENCE_PRICE,
          now
        )
      )
      const orders = new Map(decided.flatMap((order) => Either.isRight(order) ? [[order.right.client_order_id, order.right]] : []))
      const [first, ...rest] = orders.values()
      const placed = first === undefined ? [] : yield* book.place([first, ...rest])
      const placedById = new Map(placed.map((row) => [row.client_order_id, row]))
      return decided.map((order) =>
        Either.match(order, {
          onLeft: (error) => Exit.fail(error),
          onRight: ({ client_order_id }) => {
            const row = placedById.get(client_order_id)
            return row === undefined
              ? Exit.die(new Error(`mock order ${client_order_id} was not placed`))
              : Exit.succeed(MockBook.toBrokerOrder(row, now))
          }
        })
      )
    })

  /**
   * Submissions placed together share the two statements; should those fail, each is submitted
   * alone, so that one bad submission fails no other (placing an order again only counts).
   */
  const submitIsolated = (submissions: ReadonlyArray<Submission>) =>
    submitAll(submissions).pipe(
      orDie,
      Effect.catchAllCause(() =>
        Effect.forEach(submissions, (submission) =>
          submitAll([submission]).pipe(
            orDie,
            Effect.flatMap(([exit]) => exit ?? Effect.dieMessage("a submission went unanswered")),
            Effect.exit
          ))
      ),
      Tracing.span("MockBroker.submitBatch", { attributes: { "batch.size": submissions.length } })
    )

  /** Submissions that arrive together (jobs claimed or handed together) are placed together. */
  const submitBatched = yield* Batched.makeMany(submitIsolated, { name: "mock_submit", maxBatch: 100, concurrency: 2 })
  const submitOne = Batched.single(submitBatched)

  return identity<Context.Tag.Service<typeof BrokerGateway>>({
    submit: (connection, order) =>
      submitOne({ connection, ...order }).pipe(Tracing.span("MockBroker.submit")),

    submitMany: (orders) => submitBatched(orders).pipe(Tracing.span("MockBroker.submitMany")),

    lookup: Effect.fnUntraced(function*(_: Connection, order: OrderRef) {
      const now = yield* DateTime.now
      return Option.map(yield* book.select(order.clientOrderId), (row) => MockBook.toBrokerOrder(row, now))
    }, orDie, Tracing.span("MockBroker.lookup")),

    cancel: Effect.fnUntraced(function*(_: Connection, clientOrderId: string) {
      const now = yield* DateTime.now
      const current = yield* book.select(clientOrderId)
      if (Option.isNone(current)) return Option.none()
      const order = MockBook.toBrokerOrder(current.value, now)
      if (order.status !== "new" && order.status !== "partially_filled") return Option.some(order)
      yield* book.cancel({ client_order_id: clientOrderId, updated_at: now })
      return Option.map(yield* book.select(clientOrderId), (row) => MockBook.toBrokerOrder(row, now))
    }, orDie, Tracing.span("MockBroker.cancel")),

    // A mock connection has no credentials to check, and its orders change only when asked.
    verify: () => Effect.void,
    streaming: [],
    updates: () => Stream.empty
  })
})
