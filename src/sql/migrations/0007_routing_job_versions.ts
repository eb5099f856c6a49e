import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * A job's `version` moves on each time the job is enqueued again: the worker running it then
 * hands it back to run once more instead of deleting it, and a running job is never released by
 * a new enqueue (its lease holds until its worker lets go).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE routing_jobs ADD COLUMN version integer NOT NULL DEFAULT 0`
})
