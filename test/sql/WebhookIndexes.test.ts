import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { databases } from "../support/Databases.js"

for (const [name, database] of databases) {
  layer(database, { timeout: 60_000, excludeTestServices: true })(`the webhook deliveries' indexes on ${name}`, (it) => {
    it.effect("are those its reads use: each endpoint's due order, its leases, its history, each event once, the id", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ readonly indexname: string; readonly indexdef: string }>`
          SELECT indexname, indexdef FROM pg_indexes
          WHERE schemaname = 'public' AND tablename = 'webhook_deliveries' ORDER BY indexname`
        // Due deliveries are read endpoint by endpoint: an index of every endpoint's due deliveries
        // is written for each of them and, when the planner picks it, read whole.
        expect(rows.map((row) => row.indexname)).toEqual([
          "webhook_deliveries_endpoint_due_order_idx",
          "webhook_deliveries_endpoint_id_event_id_key",
          "webhook_deliveries_endpoint_idx",
          "webhook_deliveries_leased_idx",
          "webhook_deliveries_pkey",
          "webhook_deliveries_test_event_id_key"
        ])
        expect(rows.find((row) => row.indexname === "webhook_deliveries_endpoint_due_order_idx")?.indexdef)
          .toContain("(endpoint_id, next_attempt_at, id) WHERE (status = 'pending'::text)")
      }))
  })
}
