import * as Database from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"
import * as TestServer from "../support/TestServer.js"

/** The service on each database it runs on: every SQL feature is tested on both. */
export const servers = [
  ["PGlite", TestServer.layer(Database.migrated(Database.pglite(undefined)))],
  ["PostgreSQL", TestServer.layer(Postgres.layerFresh)]
] as const
