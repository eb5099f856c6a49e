import * as Database from "../../src/sql/Database.js"
import * as Postgres from "./Postgres.js"

/** A migrated database of each kind the service runs on, by name: every SQL feature is tested on both. */
export const databases = [
  ["PGlite", Database.migrated(Database.pglite(undefined))],
  ["PostgreSQL", Postgres.layerFresh]
] as const
