import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The monthly quota held by the database: each count of a user's live intents keeps the limit it
 * was last counted against, and a check refuses any count past it. A creation's statement adds
 * the intents it wrote to their users' counts, in batches of many users at once; should two
 * batches race for a user's last intents, the one that would pass the limit fails as a whole,
 * and each of its creations is tried again alone. Counts written before this migration have no
 * limit and pass the check until their next creation sets it.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE intent_usage
      ADD COLUMN monthly_limit integer,
      ADD CONSTRAINT intent_usage_within_limit CHECK (count <= monthly_limit)`
})
