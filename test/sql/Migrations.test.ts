import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { readdirSync } from "node:fs"
import * as Database from "../../src/sql/Database.js"
import * as Migrations from "../../src/sql/Migrations.js"
import * as Postgres from "../support/Postgres.js"

/** The migrations recorded in the database at `url`, read after every instance has started. */
const recorded = (url: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ readonly name: string }>`SELECT name FROM effect_sql_migrations ORDER BY migration_id`).pipe(
    Effect.map((rows) => rows.map((row) => row.name)),
    Effect.provide(Database.postgres(Redacted.make(url)))
  )

describe("migrations on PostgreSQL", () => {
  it.live("three instances starting at once on a fresh database all start, and each migration runs once", () =>
    Effect.gen(function*() {
      // Each round is a fresh database: the race was in creating the migrations table itself.
      for (let round = 0; round < 3; round++) {
        yield* Effect.scoped(Effect.gen(function*() {
          const { url } = yield* Postgres.freshDatabaseUrl
          const instance = Layer.build(Database.migrated(Database.postgres(Redacted.make(url))))
          const started = yield* Effect.all([instance, instance, instance], { concurrency: "unbounded", mode: "either" })
          expect(started.filter((result) => result._tag === "Left")).toEqual([])
          const expected = (yield* Migrations.loader).map(([, name]) => name)
          // Every migration file is in the loader's record, once.
          expect(expected).toHaveLength(readdirSync(new URL("../../src/sql/migrations", import.meta.url)).length)
          expect(yield* recorded(url)).toEqual(expected)
        }))
      }
    }), 60_000)
})
