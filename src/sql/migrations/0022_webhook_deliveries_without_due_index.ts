import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Drops `webhook_deliveries_due_idx` (next attempt, pending deliveries of every endpoint). Every read
 * of due deliveries goes endpoint by endpoint, along `webhook_deliveries_endpoint_due_order_idx`
 * (endpoint, next attempt, id): the claim's probes and the next due time. The global index was
 * written for every pending delivery and read only by mistake: planned on statistics taken while
 * few deliveries were pending (a backlog arrives faster than the table is analyzed), a claim read
 * every endpoint's due deliveries through it and sorted them, 20–25 ms a claim with 18,000 pending.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS webhook_deliveries_due_idx`
})
