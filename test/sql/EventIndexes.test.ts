import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { databases } from "../support/Databases.js"

for (const [name, database] of databases) {
  layer(database, { timeout: 60_000, excludeTestServices: true })(`the events table's indexes on ${name}`, (it) => {
    it.effect("are those its reads use: the feed's order, an intent's timeline, the retention's age, the id", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ readonly indexname: string; readonly indexdef: string }>`
          SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'events' ORDER BY indexname`
        // Every write of an event pays for each index: one that no read walks is pure cost.
        expect(rows.map((row) => row.indexname)).toEqual([
          "events_created_idx",
          "events_feed_idx",
          "events_pkey",
          "events_timeline_idx"
        ])
        expect(rows.find((row) => row.indexname === "events_feed_idx")?.indexdef).toContain("(user_id, mode, xid, seq)")
      }))
  })
}
