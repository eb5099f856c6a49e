import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE users (
      id uuid PRIMARY KEY,
      name text NOT NULL,
      tier text NOT NULL CHECK (tier IN ('free', 'pro', 'enterprise')),
      requests_per_minute integer NOT NULL CHECK (requests_per_minute > 0),
      intents_per_month integer NOT NULL CHECK (intents_per_month > 0),
      created_at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE api_keys (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users (id),
      name text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      scopes jsonb NOT NULL,
      key_hash text NOT NULL UNIQUE,
      key_hint text NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz,
      last_used_at timestamptz,
      revoked_at timestamptz
    )`
  yield* sql`CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at)`
  yield* sql`
    CREATE TABLE broker_connections (
      id uuid PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users (id),
      name text NOT NULL,
      kind text NOT NULL CHECK (kind IN ('mock', 'alpaca')),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      credentials text,
      created_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX broker_connections_user_idx ON broker_connections (user_id)`
})
