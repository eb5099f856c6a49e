import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { databases } from "../support/Databases.js"

for (const [name, database] of databases) {
  layer(database, { timeout: 60_000, excludeTestServices: true })(`the fills table's indexes on ${name}`, (it) => {
    it.effect("are those its reads and its one-record-per-execution rule use: the order's fills, the id", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ readonly indexname: string; readonly indexdef: string }>`
          SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'fills' ORDER BY indexname`
        // Every recorded fill pays for each index: one that no read walks is pure cost.
        expect(rows.map((row) => row.indexname)).toEqual(["fills_once", "fills_pkey"])
        // Reads find an order's fills by the order's id: the index must lead with it.
        expect(rows.find((row) => row.indexname === "fills_once")?.indexdef).toContain("(order_id, broker_fill_id)")
      }))
  })
}
