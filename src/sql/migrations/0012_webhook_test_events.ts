import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * `webhook.test` events: sent to one endpoint by its owner, they are no intent's event, so they are
 * kept out of `events` (which the events API, its stream and the retention read) in a table of
 * their own, deleted with their endpoint. A delivery carries exactly one event: an intent's
 * (`event_id`) or a test event (`test_event_id`), each under its foreign key.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE webhook_test_events (
      id text PRIMARY KEY,
      endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type = 'webhook.test'),
      data json NOT NULL,
      created_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX webhook_test_events_endpoint_idx ON webhook_test_events (endpoint_id)`
  yield* sql`ALTER TABLE webhook_deliveries ALTER COLUMN event_id DROP NOT NULL`
  yield* sql`ALTER TABLE webhook_deliveries
             ADD COLUMN test_event_id text UNIQUE REFERENCES webhook_test_events (id) ON DELETE CASCADE`
  yield* sql`ALTER TABLE webhook_deliveries
             ADD CONSTRAINT webhook_deliveries_one_event CHECK ((event_id IS NULL) <> (test_event_id IS NULL))`
})
