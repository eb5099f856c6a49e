import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import { inject } from "vitest"
import * as Database from "../../src/sql/Database.js"

const adminUrl = () => inject("postgresAdminUrl")

const urlOf = (url: string, name: string) => {
  const parsed = new URL(url)
  parsed.pathname = `/${name}`
  return parsed.toString()
}

/** The admin connection that creates and drops the test databases. */
const admin = PgClient.layer({ url: Redacted.make(adminUrl()), maxConnections: 1 })

/** A fresh, empty PostgreSQL database for one test file; dropped when the Layer is released. */
export const freshDatabaseUrl = Effect.acquireRelease(
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const name = `tir_test_${Crypto.randomBytes(6).toString("hex")}`
    yield* sql.unsafe(`CREATE DATABASE ${name}`)
    return { name, url: urlOf(adminUrl(), name) }
  }).pipe(Effect.provide(admin), Effect.orDie),
  ({ name }) =>
    Effect.flatMap(PgClient.PgClient, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).pipe(
      Effect.provide(admin),
      Effect.ignoreLogged
    )
)

/** `Database.postgres` on a fresh database, migrated. */
export const layerFresh = Layer.unwrapScoped(
  Effect.map(freshDatabaseUrl, ({ url }) => Database.migrated(Database.postgres(Redacted.make(url))))
)

/** Runs `body` with the URL of a fresh PostgreSQL database, dropped afterwards (for process tests). */
export const withDatabase = (body: (url: string) => Promise<void>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(freshDatabaseUrl, ({ url }) => Effect.promise(() => body(url)))))
