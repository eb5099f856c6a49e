import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Drops `events_owner_idx` (user, mode, creation time). Since events became a feed read in commit
 * order, every read of an owner's events goes along `events_feed_idx` (user, mode, transaction,
 * number): pages, a stream's next events, the feed's head. The retention reads
 * `events_created_idx`, an intent's timeline `events_timeline_idx`, one event its primary key. The
 * owner index was only written: one more entry per event, about a sixth of the events' index space,
 * and a plan that could pick it for a page with a recent creation bound and then sort the owner's
 * events in the feed's order, instead of walking that order off its own index.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS events_owner_idx`
})
