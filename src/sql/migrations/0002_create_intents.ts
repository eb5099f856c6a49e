import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE intents (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users (id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      intent_id text NOT NULL,
      symbol text NOT NULL,
      side text NOT NULL CHECK (side IN ('buy', 'sell')),
      quantity numeric(38, 9) NOT NULL CHECK (quantity > 0),
      order_type text NOT NULL CHECK (order_type IN ('market', 'limit', 'stop', 'stop_limit')),
      limit_price numeric(38, 9) CHECK (limit_price > 0),
      stop_price numeric(38, 9) CHECK (stop_price > 0),
      time_in_force text NOT NULL CHECK (time_in_force IN ('day', 'gtc', 'ioc', 'fok')),
      extended_hours boolean NOT NULL,
      status text NOT NULL
        CHECK (status IN ('pending', 'partially_filled', 'filled', 'canceled', 'rejected', 'failed')),
      status_reason text,
      broker_id uuid NOT NULL REFERENCES broker_connections (id),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      CONSTRAINT intents_idempotency UNIQUE (user_id, mode, intent_id)
    )`
  yield* sql`CREATE INDEX intents_listing_idx ON intents (user_id, mode, created_at DESC, id DESC)`
  yield* sql`
    CREATE TABLE orders (
      id uuid PRIMARY KEY,
      intent_id uuid NOT NULL REFERENCES intents (id),
      client_order_id text NOT NULL UNIQUE,
      broker_order_id text NOT NULL,
      status text NOT NULL
        CHECK (status IN ('new', 'partially_filled', 'filled', 'canceled', 'expired', 'rejected')),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX orders_intent_idx ON orders (intent_id, created_at)`
  yield* sql`
    CREATE TABLE fills (
      id uuid PRIMARY KEY,
      order_id uuid NOT NULL REFERENCES orders (id),
      broker_fill_id text NOT NULL,
      quantity numeric(38, 9) NOT NULL CHECK (quantity > 0),
      price numeric(38, 9) NOT NULL CHECK (price > 0),
      filled_at timestamptz NOT NULL,
      CONSTRAINT fills_once UNIQUE (order_id, broker_fill_id)
    )`
  yield* sql`CREATE INDEX fills_order_idx ON fills (order_id, filled_at)`
  yield* sql`
    CREATE TABLE intent_usage (
      user_id uuid NOT NULL REFERENCES users (id),
      period_start date NOT NULL,
      count integer NOT NULL,
      PRIMARY KEY (user_id, period_start)
    )`
})
