import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { AppConfig } from "../Config.js"
import * as Migrations from "./Migrations.js"
import * as GuardedPool from "./GuardedPool.js"
import * as PgListen from "./PgListen.js"
import * as PgLite from "./PgLite.js"

/** Which database the service runs on. */
export class DatabaseInfo extends Context.Tag("DatabaseInfo")<DatabaseInfo, {
  readonly kind: "postgres" | "pglite"
  /** The embedded database's folder (PGlite only). */
  readonly dataDir: string | undefined
}>() {}

/**
 * `LISTEN` on the database: a commit's `pg_notify` reaches every instance. The payload must not be
 * empty: both drivers drop notifications without one. A stream that loses its connection fails
 * (on PostgreSQL within a few seconds): repeat it to listen again.
 */
export class Notifications extends Context.Tag("Notifications")<Notifications, {
  readonly listen: (channel: string) => Stream.Stream<string, SqlError>
}>() {}

/** The payload of the probes {@link supervised} sends; no real notification carries it. */
export const PROBE = "listen-probe"

export interface Probing {
  /** How long a listening stream goes between probes. */
  readonly interval: Duration.DurationInput
  /** How long a probe may take to come back before the connection counts as lost. */
  readonly timeout: Duration.DurationInput
}

/**
 * `listen` that fails once its connection has stopped hearing. The PostgreSQL driver's LISTEN
 * connection does not report its own end: after a database restart its streams fall silent for
 * ever. So every `interval` a probe goes out on the channel (through the pool) and a notification
 * must arrive within `timeout`; the consumer repeating the stream then listens on a new connection.
 * Probes are not passed on.
 */
export const supervised = (
  listen: (channel: string) => Stream.Stream<string, SqlError>,
  notify: (channel: string, payload: string) => Effect.Effect<void, SqlError>,
  probing: Probing = { interval: "2 seconds", timeout: "3 seconds" }
) =>
(channel: string): Stream.Stream<string, SqlError> =>
  // One stage between the connection and the consumer: each notification is passed on by a plain
  // callback, and the watchdog ends the stream by failing it. (Marking, filtering and merging with
  // the watchdog as stream stages cost about 130 runtime steps per notification.)
  Stream.asyncPush<string, SqlError>((emit) =>
    Effect.gen(function*() {
      // Any notification, a probe from another instance too, shows the connection still hears.
      let heard = false
      yield* listen(channel).pipe(
        Stream.runForEach((payload) =>
          Effect.sync(() => {
            heard = true
            if (payload !== PROBE) emit.single(payload)
          })
        ),
        Effect.onExit((exit) => Effect.sync(() => Exit.isSuccess(exit) ? emit.end() : emit.halt(exit.cause))),
        Effect.forkScoped
      )
      const probe = Effect.gen(function*() {
        heard = false
        yield* notify(channel, PROBE)
        yield* Effect.sleep(probing.timeout)
        if (!heard) {
          return yield* new SqlError({
            message: `LISTEN ${channel}: no probe came back within ${Duration.format(Duration.decode(probing.timeout))}`
          })
        }
      })
      yield* Effect.sleep(probing.interval).pipe(
        Effect.zipRight(probe),
        Effect.forever,
        Effect.catchAll((error) => Effect.sync(() => emit.fail(error))),
        Effect.forkScoped
      )
    })
  )

const APPLICATION_NAME = "trade-intent-router"

/** PostgreSQL at `url`; the pool is shared by requests and workers, LISTEN has a connection of its own. */
export const postgres = (url: PgClient.PgClientConfig["url"]) =>
  Layer.mergeAll(
    Layer.scoped(
      Notifications,
      // Probes through `pg_notify`: the client's own `notify` sends `NOTIFY channel, $1`, which
      // PostgreSQL refuses (NOTIFY takes no parameters).
      Effect.gen(function*() {
        const client = yield* PgClient.PgClient
        const listen = yield* PgListen.make({
          connectionString: url === undefined ? undefined : Redacted.value(url),
          application_name: APPLICATION_NAME
        })
        return {
          listen: supervised(listen, (channel, payload) => Effect.asVoid(client`SELECT pg_notify(${channel}, ${payload})`))
        }
      })
    ),
    Layer.succeed(DatabaseInfo, { kind: "postgres", dataDir: undefined })
  ).pipe(Layer.provideMerge(PgClient.layerFromPool({ acquire: guardedPool(url), applicationName: APPLICATION_NAME })))

/**
 * What each of the pool's sessions sets first. JIT compilation off: PostgreSQL compiles a
 * statement whose estimated cost passes `jit_above_cost` on every run of it, and the statement
 * that reads pages of the listing (planned for a tenth of the user's intents, since its limit is a
 * parameter) passed it once a user had a few thousand intents (about 5,000 in a test): each page
 * then spent 15 to 40 ms compiling, the statement itself well under a millisecond. None of the
 * service's statements runs long enough to gain from it.
 */
const SESSION_SETTINGS = "SET jit = off"

/**
 * The pool of 10 connections (see `GuardedPool`), each session set up with `SESSION_SETTINGS`
 * before it is first used, checked with a first statement before anything uses it (a database
 * that cannot be reached stops the start), and ended with the Layer.
 */
const guardedPool = (url: PgClient.PgClientConfig["url"]) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      GuardedPool.make({
        connectionString: url === undefined ? undefined : Redacted.value(url),
        max: 10,
        application_name: APPLICATION_NAME
      }, SESSION_SETTINGS)
    ),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(1000))
  ).pipe(
    Effect.tap((pool) =>
      Effect.tryPromise({
        try: () => pool.query("SELECT 1"),
        catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(
        Effect.timeoutFail({
          duration: "5 seconds",
          onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
        })
      )
    )
  )

/** Embedded PGlite in `dataDir` (in memory when undefined): one connection in-process, never lost. */
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

/**
 * A database Layer with the migrations run on it before anything else uses it; on PostgreSQL under
 * a lock, so that instances starting together migrate one at a time.
 */
export const migrated = <A, E, R>(database: Layer.Layer<A, E, R>) =>
  Layer.provideMerge(
    Layer.unwrapEffect(
      Effect.map(DatabaseInfo, (info) => info.kind === "postgres" ? Migrations.layerExclusive : Migrations.layer)
    ),
    database
  )
