import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { databases } from "../support/Databases.js"

/** A table's indexes by name, with their definitions. */
const indexesOf = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly indexname: string; readonly indexdef: string }>`
      SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = ${table} ORDER BY indexname`)

// Every write of a row pays for each index of its table: one that no read walks is pure cost.
for (const [name, database] of databases) {
  layer(database, { timeout: 60_000, excludeTestServices: true })(`table indexes on ${name}`, (it) => {
    it.effect("the events' are those its reads use: the feed's order, an intent's timeline, the retention's age, the id", () =>
      Effect.gen(function*() {
        const rows = yield* indexesOf("events")
        expect(rows.map((row) => row.indexname)).toEqual([
          "events_created_idx",
          "events_feed_idx",
          "events_pkey",
          "events_timeline_idx"
        ])
        expect(rows.find((row) => row.indexname === "events_feed_idx")?.indexdef).toContain("(user_id, mode, xid, seq)")
      }))

    it.effect("the fills' are those its reads and its one-record-per-execution rule use: the order's fills, the id", () =>
      Effect.gen(function*() {
        const rows = yield* indexesOf("fills")
        expect(rows.map((row) => row.indexname)).toEqual(["fills_once", "fills_pkey"])
        // Reads find an order's fills by the order's id: the index must lead with it.
        expect(rows.find((row) => row.indexname === "fills_once")?.indexdef).toContain("(order_id, broker_fill_id)")
      }))
  })
}
