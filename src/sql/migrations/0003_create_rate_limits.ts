import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE rate_limits (
      bucket text PRIMARY KEY,
      window_start timestamptz NOT NULL,
      count integer NOT NULL
    )`
})
