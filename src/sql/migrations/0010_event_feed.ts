import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Events become a feed clients page through in commit order. Each event keeps the id of the
 * transaction that wrote it (`xid`) and a number in the order it was written (`seq`); a page lists
 * only events of transactions older than every one still in flight, ordered by (`xid`, `seq`), so
 * an event committed late never lands behind a cursor already handed out. Existing events all
 * take this migration's transaction id, in the order they are numbered.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE events ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`
  yield* sql`ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id()`
  yield* sql`CREATE INDEX events_feed_idx ON events (user_id, mode, xid, seq)`
  yield* sql`CREATE INDEX events_timeline_idx ON events (intent_id, seq)`
  yield* sql`DROP INDEX events_intent_idx`
  // The 30-day retention deletes by age.
  yield* sql`CREATE INDEX events_created_idx ON events (created_at)`
})
