import type * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { BrokerUnavailable } from "../../../domain/Broker.js"
import type { BrokerId } from "../../../domain/Ids.js"
import { decide, REFERENCE_PRICE } from "../../../domain/MockExchange.js"
import * as Batched from "../../../sql/Batched.js"
import { orDie } from "../../../sql/Defects.js"
import type { BrokerGateway, BrokerOrder, Connection, OrderRef, Submission } from "../BrokerGateway.js"
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

/** A decided order with the price it was decided at. */
type PricedOrder = MockBook.BookOrder & { readonly price: number }

const unpriced = ({ price: _, ...order }: PricedOrder): MockBook.BookOrder => order

/** Where a submission's price is kept: its symbol's for its connection's user. */
const keyOf = ({ connection, spec }: Submission) => MockBook.priceKey(connection.id, spec.symbol)

/** The most prices a mock broker keeps from its last reads. */
const KNOWN_PRICES = 10_000

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
   * The price each connection's symbol had when last read (the reference price when none was
   * set), by `MockBook.priceKey`: what a submission is first decided at. At most `KNOWN_PRICES`
   * are kept; beyond that the map starts again.
   */
  const lastPrices = new Map<string, number>()

  /**
   * Decides the submissions at their prices in `prices` (by `priceKey`; the reference price when
   * none) and places the orders (a client order id given twice is placed once), into `answers` by
   * index: with `held`, each only if its price still holds, the others left unanswered.
   *
   * This and `submitAll` are made once, their steps in loops (see "Hot paths" in
   * docs/development.md).
   */
  const decideAndPlace = Effect.fnUntraced(function*(
    submissions: ReadonlyArray<readonly [number, Submission]>,
    prices: ReadonlyMap<string, number>,
    now: DateTime.Utc,
    answers: Array<Exit.Exit<BrokerOrder, BrokerUnavailable> | undefined>,
    held: boolean
  ) {
    const orders = new Map<string, PricedOrder>()
    for (const [index, submission] of submissions) {
      const price = prices.get(keyOf(submission)) ?? REFERENCE_PRICE
      const order = decideOrder(submission, price, now)
      if (Either.isLeft(order)) answers[index] = Exit.fail(order.left)
      else orders.set(order.right.client_order_id, { ...order.right, price })
    }
    const [first, ...rest] = orders.values()
    if (first === undefined) return
    const placed = held ? yield* book.placeAt([first, ...rest]) : yield* book.place([unpriced(first), ...rest.map(unpriced)])
    // An order placed now is the order sent; one placed before is the book's.
    const placedById = new Map<string, MockBook.BookOrder>()
    const placedBefore: Array<string> = []
    for (const { before, client_order_id } of placed) {
      const order = orders.get(client_order_id)
      if (before || order === undefined) placedBefore.push(client_order_id)
      else placedById.set(client_order_id, order)
    }
    const [firstBefore, ...restBefore] = placedBefore
    if (firstBefore !== undefined) {
      for (const row of yield* book.selectMany([firstBefore, ...restBefore])) placedById.set(row.client_order_id, row)
    }
    for (const [index, { clientOrderId }] of submissions) {
      if (answers[index] !== undefined) continue
      const row = placedById.get(clientOrderId)
      if (row !== undefined) answers[index] = Exit.succeed(MockBook.toBrokerOrder(row, now))
      else if (!held) answers[index] = Exit.die(new Error(`mock order ${clientOrderId} was not placed`))
    }
  })

  /**
   * Decides and places orders, each at its symbol's price for its connection's user. First at the
   * prices last read, placed in one statement where they still hold; the rest (prices not read
   * yet, or moved since) at the prices read now, in one statement and one more.
   */
  const submitAll = Effect.fnUntraced(function*(submissions: ReadonlyArray<Submission>) {
    const now = yield* DateTime.now
    const answers: Array<Exit.Exit<BrokerOrder, BrokerUnavailable> | undefined> = []
    const known: Array<readonly [number, Submission]> = []
    for (const [index, submission] of submissions.entries()) {
      answers.push(undefined)
      if (lastPrices.has(keyOf(submission))) known.push([index, submission])
    }
    yield* decideAndPlace(known, lastPrices, now, answers, true)
    const rest: Array<readonly [number, Submission]> = []
    const wanted: Array<{ readonly connectionId: BrokerId; readonly symbol: string }> = []
    for (const [index, submission] of submissions.entries()) {
      if (answers[index] !== undefined) continue
      rest.push([index, submission])
      wanted.push({ connectionId: submission.connection.id, symbol: submission.spec.symbol })
    }
    if (rest.length > 0) {
      const prices = yield* book.pricesFor(wanted)
      if (lastPrices.size + rest.length > KNOWN_PRICES) lastPrices.clear()
      for (const [, submission] of rest) lastPrices.set(keyOf(submission), prices.get(keyOf(submission)) ?? REFERENCE_PRICE)
      yield* decideAndPlace(rest, prices, now, answers, false)
    }
    const exits: Array<Exit.Exit<BrokerOrder, BrokerUnavailable>> = []
    for (const answer of answers) exits.push(answer ?? Exit.die(new Error("a submission went unanswered")))
    return exits
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
