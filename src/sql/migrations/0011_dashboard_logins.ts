import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The dashboard's accounts: a login (email and scrypt hash) per user, sessions stored by the
 * SHA-256 of their token, and the browsers where a login succeeded before (by the hash of their
 * device token), which failed logins from elsewhere do not lock out. A broker connection can be
 * disconnected: it keeps its intents' history, and names no new intent.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE logins (
    user_id uuid PRIMARY KEY REFERENCES users (id),
    email text NOT NULL UNIQUE,
    password_hash text NOT NULL,
    created_at timestamptz NOT NULL,
    password_changed_at timestamptz NOT NULL
  )`
  yield* sql`CREATE TABLE sessions (
    id uuid PRIMARY KEY,
    token_hash text NOT NULL UNIQUE,
    user_id uuid NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    revoked_at timestamptz
  )`
  yield* sql`CREATE INDEX sessions_user_idx ON sessions (user_id) WHERE revoked_at IS NULL`
  yield* sql`CREATE TABLE login_devices (
    token_hash text PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL
  )`
  // Failed logins per bucket (an email, an address, a device) in fixed 15-minute windows.
  yield* sql`CREATE UNLOGGED TABLE login_failures (
    bucket text NOT NULL,
    window_start timestamptz NOT NULL,
    count integer NOT NULL,
    PRIMARY KEY (bucket, window_start)
  )`
  yield* sql`ALTER TABLE broker_connections ADD COLUMN disconnected_at timestamptz`
})
