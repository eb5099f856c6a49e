import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // `json` keeps the intent's keys in the order GET shows them; `jsonb` would reorder them.
  yield* sql`ALTER TABLE events ALTER COLUMN data TYPE json USING data::json`
  yield* sql`
    CREATE TABLE webhook_endpoints (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users (id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      url text NOT NULL,
      events jsonb NOT NULL,
      secret text NOT NULL,
      created_at timestamptz NOT NULL,
      disabled_at timestamptz
    )`
  yield* sql`CREATE INDEX webhook_endpoints_owner_idx ON webhook_endpoints (user_id, mode)`
  yield* sql`
    CREATE TABLE webhook_deliveries (
      id uuid PRIMARY KEY,
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      event_id text NOT NULL REFERENCES events (id),
      status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
      attempts integer NOT NULL DEFAULT 0,
      failures integer NOT NULL DEFAULT 0,
      claims integer NOT NULL DEFAULT 0,
      last_status_code integer,
      next_attempt_at timestamptz,
      locked_until timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      UNIQUE (endpoint_id, event_id)
    )`
  yield* sql`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`
  yield* sql`CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at)`
  yield* sql`
    CREATE TABLE webhook_attempts (
      delivery_id uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
      number integer NOT NULL,
      attempted_at timestamptz NOT NULL,
      status_code integer,
      error text,
      duration_ms integer NOT NULL,
      PRIMARY KEY (delivery_id, number)
    )`
})
