import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BrokerId, UserId } from "../../../domain/Ids.js"
import { OrderStatus, OrderType, Side, TimeInForce } from "../../../domain/Intent.js"
import { REFERENCE_PRICE, type RestingOrder, statusAt } from "../../../domain/MockExchange.js"
import type { BrokerOrder } from "../BrokerGateway.js"
import { PREPARED } from "../../../sql/Prepared.js"
import * as Tables from "../../../sql/Tables.js"

const Timestamp = Schema.DateTimeUtcFromDate
const Decimal = Schema.NumberFromString

/**
 * A row of `mock_broker_orders`. The order's own columns are null on orders placed before the
 * book kept them: those never react to a price.
 */
const Row = Schema.Struct({
  client_order_id: Schema.String,
  broker_order_id: Schema.String,
  connection_id: BrokerId,
  time_in_force: TimeInForce,
  status: OrderStatus,
  reason: Schema.NullOr(Schema.String),
  filled_quantity: Decimal,
  placed_at: Timestamp,
  updated_at: Timestamp,
  symbol: Schema.NullOr(Schema.String),
  side: Schema.NullOr(Side),
  order_type: Schema.NullOr(OrderType),
  quantity: Schema.NullOr(Decimal),
  limit_price: Schema.NullOr(Decimal),
  stop_price: Schema.NullOr(Decimal),
  triggered: Schema.Boolean,
  fill_price: Schema.NullOr(Decimal),
  filled_at: Schema.NullOr(Timestamp)
})
export type BookOrder = typeof Row.Type

/** Each column's SQL type. */
const types: Tables.Types<typeof Row.fields> = {
  client_order_id: "text",
  broker_order_id: "text",
  connection_id: "uuid",
  time_in_force: "text",
  status: "text",
  reason: "text",
  filled_quantity: "numeric",
  placed_at: "timestamptz",
  updated_at: "timestamptz",
  symbol: "text",
  side: "text",
  order_type: "text",
  quantity: "numeric",
  limit_price: "numeric",
  stop_price: "numeric",
  triggered: "boolean",
  fill_price: "numeric",
  filled_at: "timestamptz"
}
const columnList = Tables.columnList(Row)

/** An order decided at `price`: placed only while its symbol's price for its connection's user still is that price. */
const PricedRow = Schema.Struct({ ...Row.fields, price: Schema.Number })
const pricedRecordset = Tables.recordsetTypes(PricedRow, { ...types, price: "numeric" })

/**
 * What placing an order answers: its client order id, and whether it was placed `before` (the
 * same client order id submitted again, which only counts).
 */
const Placed = Schema.Struct({ client_order_id: Schema.String, before: Schema.Boolean })
/** The row's submissions counted from 1, the insert's default: more, and it was there before. */
const PLACED_COLUMNS = "client_order_id, submissions > 1 AS before"

/** An order filled whole by a price move. */
export const FillRow = Row.pick("client_order_id", "filled_quantity", "fill_price", "updated_at")
const fillRecordset = Tables.recordsetTypes(FillRow, types)

/** Numeric columns as text, so that both drivers hand them over alike. */
const columns = (prefix: string) =>
  Tables.columnsOf(Row).map((column) => types[column] === "numeric" ? `${prefix}${column}::text AS ${column}` : `${prefix}${column}`)
    .join(", ")

/** The order as the broker reports it at `now`: its one fill at the price it filled at. */
export const toBrokerOrder = (row: BookOrder, now: DateTime.Utc): BrokerOrder => ({
  brokerOrderId: row.broker_order_id,
  clientOrderId: row.client_order_id,
  status: statusAt({ status: row.status, time_in_force: row.time_in_force, placedAt: row.placed_at }, now),
  reason: row.reason ?? undefined,
  fills: row.filled_quantity > 0
    ? [{
      id: `${row.broker_order_id}-1`,
      quantity: row.filled_quantity,
      price: row.fill_price ?? REFERENCE_PRICE,
      filledAt: row.filled_at ?? row.placed_at
    }]
    : []
})

/** The order as a price move sees it; none for an order placed before the book kept its columns. */
export const toResting = (row: BookOrder): Option.Option<RestingOrder> =>
  row.symbol === null || row.side === null || row.order_type === null || row.quantity === null
    ? Option.none()
    : Option.some({
      spec: {
        symbol: row.symbol,
        side: row.side,
        order_type: row.order_type,
        quantity: row.quantity,
        limit_price: row.limit_price,
        stop_price: row.stop_price
      },
      triggered: row.triggered,
      filled: row.filled_quantity
    })

/** How {@link make}'s `pricesFor` keys the price of a symbol for a connection's user. */
export const priceKey = (connectionId: BrokerId, symbol: string) => `${connectionId}/${symbol}`

const PriceRow = Schema.Struct({ symbol: Schema.String, price: Decimal, updated_at: Timestamp })
export type MockPriceRow = typeof PriceRow.Type

/**
 * The mock broker's book and prices in the database, shared by every instance: orders keyed by
 * client order id, prices by user and symbol.
 */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const all = sql.literal(columns(""))
  const placedColumns = sql.literal(PLACED_COLUMNS)

  /** The prices set for these connections' users and symbols (and perhaps others of the same ones). */
  const selectPrices = SqlSchema.findAll({
    Request: Schema.Struct({ connections: Schema.NonEmptyArray(BrokerId), symbols: Schema.NonEmptyArray(Schema.String) }),
    Result: Schema.Struct({ connection_id: BrokerId, symbol: Schema.String, price: Decimal }),
    execute: ({ connections, symbols }) =>
      sql`SELECT c.id AS connection_id, p.symbol, p.price::text AS price
          FROM mock_prices p JOIN broker_connections c ON c.user_id = p.user_id
          WHERE c.id IN ${sql.in(connections)} AND p.symbol IN ${sql.in(symbols)}`
  })

  const setPrice = SqlSchema.single({
    Request: Schema.Struct({ user_id: UserId, symbol: Schema.String, price: Schema.Number, updated_at: Timestamp }),
    Result: PriceRow,
    execute: (price) =>
      sql`INSERT INTO mock_prices ${sql.insert(price)}
          ON CONFLICT (user_id, symbol) DO UPDATE SET price = EXCLUDED.price, updated_at = EXCLUDED.updated_at
          RETURNING symbol, price::text AS price, updated_at`
  })

  const listPrices = SqlSchema.findAll({
    Request: UserId,
    Result: PriceRow,
    execute: (userId) =>
      sql`SELECT symbol, price::text AS price, updated_at FROM mock_prices WHERE user_id = ${userId} ORDER BY symbol`
  })

  const select = SqlSchema.findOne({
    Request: Schema.String,
    Result: Row,
    execute: (clientOrderId) => sql`SELECT ${all} FROM mock_broker_orders WHERE client_order_id = ${clientOrderId}`
  })

  /** The orders of these client order ids. */
  const selectMany = SqlSchema.findAll({
    Request: Schema.NonEmptyArray(Schema.String),
    Result: Row,
    execute: (clientOrderIds) => sql`SELECT ${all} FROM mock_broker_orders WHERE client_order_id IN ${sql.in(clientOrderIds)}`
  })

  /**
   * Places orders once, each of a different client order id: a submission again of the same client
   * order id only counts. Each order is answered with whether it was placed `before` (then the
   * book's row is the order, see `selectMany`); an order placed now is the row sent, which the
   * statement does not send back.
   */
  const place = SqlSchema.findAll({
    Request: Schema.NonEmptyArray(Row),
    Result: Placed,
    execute: (orders) =>
      sql`INSERT INTO mock_broker_orders ${sql.insert(orders)}
          ON CONFLICT (client_order_id) DO UPDATE SET submissions = mock_broker_orders.submissions + 1
          RETURNING ${placedColumns}`
  })

  /**
   * Places orders, each of a different client order id, as `place` does, but each only if its
   * symbol's price for its connection's user (the reference price when none is set) is still the
   * price it was decided at; the others are left out of the answer.
   */
  const placeAt = SqlSchema.findAll({
    Request: Schema.NonEmptyArray(PricedRow),
    Result: Placed,
    execute: (orders) =>
      sql`${sql.literal(PREPARED)} INSERT INTO mock_broker_orders (${sql.literal(columnList)})
          SELECT ${sql.literal(columnList)} FROM json_to_recordset(${JSON.stringify(orders)}::json) AS o(${sql.literal(pricedRecordset)})
          WHERE o.price = COALESCE((
            SELECT p.price FROM mock_prices p JOIN broker_connections c ON c.user_id = p.user_id
            WHERE c.id = o.connection_id AND p.symbol = o.symbol), ${REFERENCE_PRICE})
          ON CONFLICT (client_order_id) DO UPDATE SET submissions = mock_broker_orders.submissions + 1
          RETURNING ${placedColumns}`
  })

  const cancel = SqlSchema.void({
    Request: Row.pick("client_order_id", "updated_at"),
    execute: ({ client_order_id, updated_at }) =>
      sql`UPDATE mock_broker_orders SET status = 'canceled', updated_at = ${updated_at}
          WHERE client_order_id = ${client_order_id} AND status IN ('new', 'partially_filled')`
  })

  /** A user's open orders of a symbol, locked until the transaction ends. */
  const openOrders = SqlSchema.findAll({
    Request: Schema.Struct({ userId: UserId, symbol: Schema.String }),
    Result: Row,
    execute: ({ symbol, userId }) =>
      sql`SELECT ${sql.literal(columns("o."))} FROM mock_broker_orders o
          JOIN broker_connections c ON c.id = o.connection_id
          WHERE c.user_id = ${userId} AND o.symbol = ${symbol} AND o.status IN ('new', 'partially_filled')
          ORDER BY o.placed_at, o.client_order_id
          FOR UPDATE OF o`
  })

  /** Fills orders whole, each at its own quantity and price: one statement whatever their number. */
  const fill = SqlSchema.findAll({
    Request: Schema.NonEmptyArray(FillRow),
    Result: Row,
    execute: (orders) =>
      sql`UPDATE mock_broker_orders m
          SET status = 'filled', triggered = (m.stop_price IS NOT NULL), filled_quantity = o.filled_quantity,
              fill_price = o.fill_price, filled_at = o.updated_at, updated_at = o.updated_at
          FROM json_to_recordset(${JSON.stringify(orders)}::json) AS o(${sql.literal(fillRecordset)})
          WHERE m.client_order_id = o.client_order_id
          RETURNING ${sql.literal(columns("m."))}`
  })

  /** Marks stop orders triggered: one statement whatever their number. */
  const trigger = SqlSchema.void({
    Request: Schema.Struct({ client_order_ids: Schema.NonEmptyArray(Schema.String), updated_at: Timestamp }),
    execute: ({ client_order_ids, updated_at }) =>
      sql`UPDATE mock_broker_orders SET triggered = true, updated_at = ${updated_at}
          WHERE client_order_id IN (SELECT json_array_elements_text(${JSON.stringify(client_order_ids)}::json))`
  })

  return {
    /** The price of each symbol for each connection's user, keyed by {@link priceKey}: only those set. */
    pricesFor: (wanted: ReadonlyArray<{ readonly connectionId: BrokerId; readonly symbol: string }>) => {
      const [first, ...rest] = wanted
      if (first === undefined) return Effect.succeed(new Map<string, number>())
      const connections = new Set(rest.map(({ connectionId }) => connectionId))
      const symbols = new Set(rest.map(({ symbol }) => symbol))
      return Effect.map(
        selectPrices({ connections: [first.connectionId, ...connections], symbols: [first.symbol, ...symbols] }),
        (rows) => new Map(rows.map((row) => [priceKey(row.connection_id, row.symbol), row.price]))
      )
    },
    setPrice,
    listPrices,
    select,
    selectMany,
    place,
    placeAt,
    cancel,
    openOrders,
    fill,
    trigger
  }
})

export type MockBook = Effect.Effect.Success<typeof make>
