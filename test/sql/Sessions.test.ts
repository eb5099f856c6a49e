import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Postgres from "../support/Postgres.js"

// Every warning of this file's process, from before the pool opens its first connection (pg warns
// once per process about a statement queued on a connection that is still running one).
const warnings: Array<string> = []
process.on("warning", (warning) => warnings.push(`${warning.name}: ${warning.message}`))

// PostgreSQL only: PGlite is one session in-process, built without JIT compilation.
layer(Postgres.layerFresh, { timeout: 60_000 })("the pool's sessions on PostgreSQL", (it) => {
  it.effect("every connection runs without JIT compilation from its first statement, set up before it is handed out", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Held together, the statements take connections of their own (the pool opens up to 10).
      const sessions = yield* Effect.all(
        Array.from({ length: 6 }, () =>
          sql<{ readonly jit: string; readonly pid: number }>`
            SELECT current_setting('jit') AS jit, pg_backend_pid() AS pid FROM pg_sleep(0.2)`),
        { concurrency: "unbounded" }
      )
      const rows = sessions.flat()
      expect(new Set(rows.map((row) => row.pid)).size).toBeGreaterThan(1)
      expect(rows.map((row) => row.jit)).toEqual(rows.map(() => "off"))
      // No statement was queued behind the setup on a connection.
      expect(warnings.filter((warning) => warning.includes("already executing a query"))).toEqual([])
    }))
})
