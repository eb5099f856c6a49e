import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE intents ADD COLUMN cancel_requested_at timestamptz`
  yield* sql`
    CREATE TABLE routing_jobs (
      intent_id uuid NOT NULL REFERENCES intents (id),
      kind text NOT NULL CHECK (kind IN ('submit', 'cancel', 'sync')),
      run_at timestamptz NOT NULL,
      locked_until timestamptz,
      claims integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (intent_id, kind)
    )`
  yield* sql`CREATE INDEX routing_jobs_due_idx ON routing_jobs (run_at)`
  yield* sql`
    CREATE TABLE events (
      id text PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users (id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      intent_id uuid NOT NULL REFERENCES intents (id),
      type text NOT NULL,
      data jsonb NOT NULL,
      created_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX events_owner_idx ON events (user_id, mode, created_at)`
  yield* sql`CREATE INDEX events_intent_idx ON events (intent_id, created_at)`
  yield* sql`
    CREATE TABLE mock_broker_orders (
      client_order_id text PRIMARY KEY,
      broker_order_id text NOT NULL UNIQUE,
      connection_id uuid NOT NULL,
      time_in_force text NOT NULL,
      status text NOT NULL,
      reason text,
      filled_quantity numeric(38, 9) NOT NULL,
      placed_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      submissions integer NOT NULL DEFAULT 1
    )`
})
