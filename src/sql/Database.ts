import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Stream from "effect/Stream"
import type { SqlError } from "@effect/sql/SqlError"
import { AppConfig } from "../Config.js"
import * as Migrations from "./Migrations.js"
import * as PgLite from "./PgLite.js"

/** Which database the service runs on. */
export class DatabaseInfo extends Context.Tag("DatabaseInfo")<DatabaseInfo, {
  readonly kind: "postgres" | "pglite"
  /** The embedded database's folder (PGlite only). */
  readonly dataDir: string | undefined
}>() {}

/**
 * `LISTEN` on the database: a commit's `pg_notify` reaches every instance. The payload must not be
 * empty: both drivers drop notifications without one.
 */
export class Notifications extends Context.Tag("Notifications")<Notifications, {
  readonly listen: (channel: string) => Stream.Stream<string, SqlError>
}>() {}

/** PostgreSQL at `url`; the pool is shared by requests and workers. */
export const postgres = (url: PgClient.PgClientConfig["url"]) =>
  Layer.mergeAll(
    Layer.effect(Notifications, Effect.map(PgClient.PgClient, (client) => ({ listen: client.listen }))),
    Layer.succeed(DatabaseInfo, { kind: "postgres", dataDir: undefined })
  ).pipe(Layer.provideMerge(PgClient.layer({ url, maxConnections: 10, applicationName: "trade-intent-router" })))

/** Embedded PGlite in `dataDir` (in memory when undefined). */
export const pglite = (dataDir: string | undefined) =>
  Layer.mergeAll(
    Layer.effect(Notifications, Effect.map(PgLite.PgLiteClient, (client) => ({ listen: client.listen }))),
    Layer.succeed(DatabaseInfo, { kind: "pglite", dataDir })
  ).pipe(Layer.provideMerge(PgLite.layer({ dataDir })))

/** From the configuration: `DATABASE_URL` when set, otherwise PGlite in `DATA_DIR`; migrated. */
export const layerConfig = Layer.unwrapEffect(
  Effect.gen(function*() {
    const url = yield* AppConfig.databaseUrl
    const dataDir = yield* AppConfig.dataDir
    return Option.match(url, { onSome: postgres, onNone: () => pglite(dataDir) })
  })
)

/** A database Layer with the migrations run on it before anything else uses it. */
export const migrated = <A, E, R>(database: Layer.Layer<A, E, R>) => Layer.provideMerge(Migrations.layer, database)
