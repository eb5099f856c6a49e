import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The mock broker's prices, set per user and symbol by the test helper (100 where none is set),
 * and what its book needs to fill a resting order when the price moves: the order itself, whether
 * its stop has triggered, and the price and time of its fill. Orders placed before this migration
 * have no order columns: they keep resting, as they did.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE mock_prices (
      user_id uuid NOT NULL REFERENCES users (id),
      symbol text NOT NULL,
      price numeric(38, 9) NOT NULL CHECK (price > 0),
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (user_id, symbol)
    )`
  yield* sql`
    ALTER TABLE mock_broker_orders
      ADD COLUMN symbol text,
      ADD COLUMN side text,
      ADD COLUMN order_type text,
      ADD COLUMN quantity numeric(38, 9),
      ADD COLUMN limit_price numeric(38, 9),
      ADD COLUMN stop_price numeric(38, 9),
      ADD COLUMN triggered boolean NOT NULL DEFAULT false,
      ADD COLUMN fill_price numeric(38, 9),
      ADD COLUMN filled_at timestamptz`
  // The orders a price move may fill: the open ones of a connection, by symbol.
  yield* sql`
    CREATE INDEX mock_broker_orders_open_idx ON mock_broker_orders (connection_id, symbol)
    WHERE status IN ('new', 'partially_filled')`
})
