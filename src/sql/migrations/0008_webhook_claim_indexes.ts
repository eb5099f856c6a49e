import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The claim takes each endpoint's earliest due deliveries up to its free in-flight slots: an index
 * per endpoint in due order, and one of the leased deliveries that count against the slots, so that
 * a claim costs the endpoints and their first rows, not a scan of the whole backlog.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX webhook_deliveries_endpoint_due_idx ON webhook_deliveries (endpoint_id, next_attempt_at)
             WHERE status = 'pending'`
  yield* sql`CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (endpoint_id, locked_until)
             WHERE status = 'pending' AND locked_until IS NOT NULL`
})
