import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * A real broker's connection names its environment (paper or live: the deployment, never the user,
 * knows the endpoints of each) and its status (`invalid` once the broker refuses its credentials).
 * `broker_streams` holds the lease on each connection's update stream: one instance at a time
 * listens, since a broker such as Alpaca allows one stream per account.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE broker_connections
    ADD COLUMN environment text CHECK (environment IN ('paper', 'live'))`
  yield* sql`ALTER TABLE broker_connections
    ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'invalid'))`
  // Connections made before environments existed reached Alpaca's live endpoint.
  yield* sql`UPDATE broker_connections SET environment = 'live' WHERE kind = 'alpaca'`
  yield* sql`CREATE TABLE broker_streams (
    connection_id uuid PRIMARY KEY REFERENCES broker_connections (id),
    holder text NOT NULL,
    lease_until timestamptz NOT NULL
  )`
  // Reconciliation reads a connection's open intents every half minute.
  yield* sql`CREATE INDEX intents_open_by_broker_idx ON intents (broker_id)
    WHERE status IN ('pending', 'partially_filled')`
})
