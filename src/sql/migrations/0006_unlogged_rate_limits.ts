import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Rate-limit counts are bumped on every request and matter for one minute: kept out of the WAL,
 * each bump costs no log flush. A crash empties the table, which only forgives the current minute.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE rate_limits SET UNLOGGED`
})
