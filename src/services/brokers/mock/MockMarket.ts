import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { Unprocessable } from "../../../domain/Errors.js"
import type { UserId } from "../../../domain/Ids.js"
import { amountProblem } from "../../../domain/Intent.js"
import { onPrice, statusAt } from "../../../domain/MockExchange.js"
import { MockPrice, type SetMockPricePayload } from "../../../domain/MockPrice.js"
import { intentOfOrder } from "../../../domain/Routing.js"
import { orDie } from "../../../sql/Defects.js"
import { type HeardWord, RoutingRepository } from "../../routing/RoutingRepository.js"
import * as MockBook from "./MockBook.js"
import * as Tracing from "../../../Tracing.js"

const validate = (payload: SetMockPricePayload) => {
  const problem = amountProblem("price", payload.price)
  return problem === undefined ? Effect.void : Effect.fail(new Unprocessable({ detail: problem }))
}

const toPrice = (row: MockBook.MockPriceRow) => new MockPrice({ symbol: row.symbol, price: row.price, updated_at: row.updated_at })

/**
 * The test helper over the mock broker's market: each user's price per symbol (100 unless set).
 * Setting a price acts on the user's resting orders of that symbol as a broker would: a limit the
 * price reaches fills at that price, a stop it reaches triggers. The book, the intents, their
 * fills and events change in one transaction, before the answer.
 */
export class MockMarket extends Context.Tag("MockMarket")<MockMarket, {
  readonly setPrice: (userId: UserId, payload: SetMockPricePayload) => Effect.Effect<MockPrice, Unprocessable>
  readonly prices: (userId: UserId) => Effect.Effect<ReadonlyArray<MockPrice>>
}>() {
  /** On the `SqlClient` in context, where the mock broker keeps its book. */
  static readonly layerSql = Layer.effect(
    this,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const book = yield* MockBook.make
      const routing = yield* RoutingRepository

      /**
       * Moves the resting orders at `price`, in one statement for those it triggers, one for those
       * it fills and one recording of their fills, whatever their number; a fill reaches its intent
       * as the broker's word about the order.
       */
      const move = Effect.fnUntraced(function*(open: ReadonlyArray<MockBook.BookOrder>, price: number, now: DateTime.Utc) {
        const triggered: Array<string> = []
        const filled: Array<typeof MockBook.FillRow.Type> = []
        for (const row of open) {
          const resting = MockBook.toResting(row)
          if (Option.isNone(resting)) continue
          if (statusAt({ status: row.status, time_in_force: row.time_in_force, placedAt: row.placed_at }, now) === "expired") continue
          const outcome = onPrice(resting.value, price)
          if (outcome._tag === "Triggered") triggered.push(row.client_order_id)
          if (outcome._tag === "Filled") {
            filled.push({ client_order_id: row.client_order_id, filled_quantity: outcome.quantity, fill_price: price, updated_at: now })
          }
        }
        const [firstTriggered, ...moreTriggered] = triggered
        if (firstTriggered !== undefined) yield* book.trigger({ client_order_ids: [firstTriggered, ...moreTriggered], updated_at: now })
        const [firstFilled, ...moreFilled] = filled
        if (firstFilled === undefined) return
        const words: Array<HeardWord> = []
        for (const row of yield* book.fill([firstFilled, ...moreFilled])) {
          const intentId = intentOfOrder(row.client_order_id)
          // Recorded only while the intent is open and routed through this connection.
          if (Option.isSome(intentId)) {
            words.push({ connectionId: row.connection_id, intentId: intentId.value, order: MockBook.toBrokerOrder(row, now) })
          }
        }
        if (words.length === 0) return
        for (const exit of yield* routing.recordHeardMany(words)) if (Exit.isFailure(exit)) return yield* exit
      })

      return {
        setPrice: Effect.fnUntraced(function*(userId: UserId, payload: SetMockPricePayload) {
          yield* validate(payload)
          const now = yield* DateTime.now
          return yield* Effect.gen(function*() {
            const saved = yield* book.setPrice({ user_id: userId, symbol: payload.symbol, price: payload.price, updated_at: now })
            yield* move(yield* book.openOrders({ userId, symbol: payload.symbol }), saved.price, now)
            return toPrice(saved)
          }).pipe(sql.withTransaction, orDie)
        }, Tracing.span("MockMarket.setPrice")),
        prices: Effect.fnUntraced(function*(userId: UserId) {
          return (yield* book.listPrices(userId)).map(toPrice)
        }, orDie, Tracing.span("MockMarket.prices"))
      }
    })
  )

  /** Prices only, for the in-memory ports: without a database there is no mock book to act on. */
  static readonly layerInMemory = Layer.effect(
    this,
    Effect.gen(function*() {
      const store = yield* Ref.make(new Map<string, MockPrice>())
      const key = (userId: UserId, symbol: string) => `${userId}/${symbol}`
      return {
        setPrice: (userId, payload) =>
          Effect.gen(function*() {
            yield* validate(payload)
            const price = new MockPrice({ symbol: payload.symbol, price: payload.price, updated_at: yield* DateTime.now })
            yield* Ref.update(store, (prices) => new Map(prices).set(key(userId, payload.symbol), price))
            return price
          }),
        prices: (userId) =>
          Effect.map(Ref.get(store), (prices) =>
            [...prices.entries()]
              .filter(([k]) => k.startsWith(`${userId}/`))
              .map(([, price]) => price)
              .sort((a, b) => a.symbol < b.symbol ? -1 : a.symbol > b.symbol ? 1 : 0))
      }
    })
  )
}
