/**
 * `@effect/sql` client backed by embedded PGlite (PostgreSQL compiled to WASM, in-process).
 *
 * Repositories written against `SqlClient.SqlClient` with PostgreSQL SQL run unchanged on this
 * client and on `@effect/sql-pg`'s `PgClient`: statements are compiled with PgClient's own
 * compiler, parameters are prepared like `pg` prepares them, and result values are parsed like
 * `pg`'s default type parsers do.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { makeCompiler } from "@effect/sql-pg/PgClient"
import { PGlite, types, type ParserOptions, type Results } from "@electric-sql/pglite"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** Options for {@link make} and {@link layer}. */
export interface PgLiteOptions {
  /** Directory holding the database files; `undefined` keeps the database in memory. */
  readonly dataDir?: string | undefined
}

/** A `SqlClient` backed by PGlite, plus the PGlite instance and PgClient-style LISTEN/NOTIFY. */
export interface PgLiteSqlClient extends SqlClient.SqlClient {
  /** The underlying PGlite instance. Statements sent to it directly bypass transaction serialization. */
  readonly db: PGlite
  /** A jsonb parameter fragment, like `PgClient.json`. */
  readonly json: (value: unknown) => Statement.Fragment
  /**
   * Payloads (non-empty, like PgClient) notified on `channel`. The LISTEN is issued on the
   * connection in use (inside a transaction it takes effect at commit) and stays active for the
   * client's lifetime.
   */
  readonly listen: (channel: string) => Stream.Stream<string, SqlError>
  /** `pg_notify(channel, payload)`; inside a transaction the notification is delivered at commit. */
  readonly notify: (channel: string, payload: string) => Effect.Effect<void, SqlError>
}

/**
 * Creates `dataDir` for its owner alone (mode 0700), and tightens an existing one that is empty or
 * holds a database already (`PG_VERSION`): PGlite writes its files world-writable, so the folder is
 * what keeps other users out. A folder holding anything else is the operator's and is left as is.
 */
const ownerOnlyFolder = (dataDir: string) =>
  Effect.try({
    try: () => {
      if (!Fs.existsSync(dataDir)) {
        Fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
        Fs.chmodSync(dataDir, 0o700)
      } else if (Fs.readdirSync(dataDir).length === 0 || Fs.existsSync(Path.join(dataDir, "PG_VERSION"))) {
        Fs.chmodSync(dataDir, 0o700)
      }
    },
    catch: (cause) => new SqlError({ cause, message: `PgLite: cannot prepare the data folder ${dataDir}` })
  })

/** Service tag for the PGlite-backed client. */
export class PgLiteClient extends Context.Tag("app/PgLiteClient")<PgLiteClient, PgLiteSqlClient>() {}

/**
 * Opens PGlite (in memory unless `dataDir` is given) and closes it when the scope closes.
 *
 * PGlite is a single connection: a semaphore serializes work so that a plain statement holds it for
 * that statement and a transaction (or `reserve`) holds it for its whole scope; statements inside
 * the transaction run on the transaction connection without re-acquiring it.
 */
export const make = (options: PgLiteOptions): Effect.Effect<PgLiteSqlClient, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const lock = yield* Effect.makeSemaphore(1)
    if (options.dataDir !== undefined) yield* ownerOnlyFolder(options.dataDir)
    const db = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          PGlite.create(options.dataDir === undefined ? { parsers } : { dataDir: options.dataDir, parsers }),
        catch: (cause) => new SqlError({ cause, message: "PgLite: failed to start" })
      }),
      (db) => Effect.ignoreLogged(lock.withPermits(1)(Effect.tryPromise(() => db.close())))
    )

    const transactionConnection = makeConnection(db, identity)
    const client = yield* SqlClient.make({
      acquirer: Effect.succeed(makeConnection(db, lock.withPermits(1))),
      transactionAcquirer: Effect.as(
        Effect.acquireRelease(lock.take(1), () => lock.release(1)),
        transactionConnection
      ),
      compiler: makeCompiler(),
      spanAttributes: [["db.system.name", "postgresql"]]
    }).pipe(Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make))

    return Object.assign(client, {
      db,
      json: (value: unknown) => PgJson(value),
      listen: (channel: string) =>
        Stream.asyncPush<string, SqlError>(
          (emit) =>
            Effect.acquireRelease(
              Effect.sync(() =>
                db.onNotification((name, payload) => {
                  if (name === channel && payload) emit.single(payload)
                })
              ),
              (unsubscribe) => Effect.sync(unsubscribe)
            ).pipe(Effect.zipRight(client.unsafe(`LISTEN ${escapeIdentifier(channel)}`))),
          { bufferSize: "unbounded" }
        ),
      notify: (channel: string, payload: string) =>
        Effect.asVoid(client.unsafe("SELECT pg_notify($1, $2)", [channel, payload]))
    })
  })

/** Layer providing both `SqlClient.SqlClient` and {@link PgLiteClient} from one PGlite instance. */
export const layer = (options: PgLiteOptions): Layer.Layer<SqlClient.SqlClient | PgLiteClient, SqlError> =>
  Layer.scopedContext(
    Effect.map(make(options), (client) =>
      Context.make(PgLiteClient, client).pipe(
        Context.add(SqlClient.SqlClient, client)
      ))
  )

// -----------------------------------------------------------------------------
// connection
// -----------------------------------------------------------------------------

type RowsTransform = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

const makeConnection = (
  db: PGlite,
  serialize: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
): Connection => {
  // The statement always runs to completion once started, so the permit is held until it has.
  const run = <A>(f: () => Promise<A>) =>
    serialize(Effect.uninterruptible(Effect.tryPromise({
      try: f,
      catch: (cause) => new SqlError({ cause, message: "Failed to execute statement" })
    })))

  // Like `pg`: without parameters the simple protocol is used, so multi-statement text works.
  const raw = (sql: string, params: ReadonlyArray<unknown>, rowMode?: "array") =>
    run((): Promise<Results | ReadonlyArray<Results>> =>
      params.length === 0
        ? db.exec(sql, rowMode ? { rowMode } : undefined).then((results) => results.length === 1 ? results[0] : results)
        : db.query(sql, params.map(prepareValue), rowMode ? { rowMode } : undefined)
    )

  // Multi-statement text yields one row list per statement, like `pg`.
  const rows = (sql: string, params: ReadonlyArray<unknown>) =>
    Effect.map(
      raw(sql, params),
      (result): ReadonlyArray<object> => isResultList(result) ? result.map((r) => r.rows) : result.rows
    )

  const execute = (sql: string, params: ReadonlyArray<unknown>, transformRows: RowsTransform) =>
    transformRows ? Effect.map(rows(sql, params), transformRows) : rows(sql, params)

  return {
    execute,
    executeRaw: raw,
    executeValues: (sql, params) =>
      Effect.map(
        raw(sql, params, "array"),
        // `rowMode: "array"` rows; multi-statement text yields the last statement's rows.
        (result) => (isResultList(result) ? result[result.length - 1]?.rows ?? [] : result.rows).filter(isValues)
      ),
    executeUnprepared: execute,
    executeStream: (sql, params, transformRows) =>
      Stream.unwrap(Effect.map(execute(sql, params, transformRows), Stream.fromIterable))
  }
}

const isResultList = (result: Results | ReadonlyArray<Results>): result is ReadonlyArray<Results> =>
  Array.isArray(result)

const isValues = (row: unknown): row is ReadonlyArray<unknown> => Array.isArray(row)

interface PgJson extends Statement.Custom<"PgJson", unknown> {}
const PgJson = Statement.custom<PgJson>("PgJson")

const escapeIdentifier = (name: string): string => `"${name.replace(/"/g, "\"\"")}"`

// -----------------------------------------------------------------------------
// parameters, as `pg`'s `prepareValue`
// -----------------------------------------------------------------------------

const prepareValue = (value: unknown): unknown => {
  if (value === null || value === undefined) return null
  if (typeof value === "bigint") return value.toString()
  if (typeof value !== "object") return value
  if (value instanceof Uint8Array) return value
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
  if (value instanceof Date) return dateToString(value)
  if (Array.isArray(value)) return value.map(prepareValue)
  return JSON.stringify(value)
}

const pad = (n: number, width: number) => String(n).padStart(width, "0")

/** Local time with its UTC offset, exactly as `pg` sends a `Date`. */
const dateToString = (date: Date): string => {
  const year = date.getFullYear()
  const offset = -date.getTimezoneOffset()
  const abs = Math.abs(offset)
  return `${pad(year < 1 ? 1 - year : year, 4)}-${pad(date.getMonth() + 1, 2)}-${pad(date.getDate(), 2)}` +
    `T${pad(date.getHours(), 2)}:${pad(date.getMinutes(), 2)}:${pad(date.getSeconds(), 2)}` +
    `.${pad(date.getMilliseconds(), 3)}${offset < 0 ? "-" : "+"}${pad(Math.floor(abs / 60), 2)}:${pad(abs % 60, 2)}` +
    (year < 1 ? " BC" : "")
}

// -----------------------------------------------------------------------------
// result parsing, as `pg`'s default parsers (pg-types 2 / postgres-date)
// -----------------------------------------------------------------------------

const DATE_TIME = /(\d{1,})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(\.\d{1,})?.*?( BC)?$/
const DATE = /^(\d{1,})-(\d{2})-(\d{2})( BC)?$/
const TIME_ZONE = /([Z+-])(\d{2})?:?(\d{2})?:?(\d{2})?/

const toYear = (digits: string, bc: string | undefined) => bc ? 1 - Number(digits) : Number(digits)

/** Offset in milliseconds, `undefined` for a value without a time zone. */
const timeZoneOffset = (text: string): number | undefined => {
  if (text.endsWith("+00")) return 0
  const zone = TIME_ZONE.exec(text.split(" ")[1] ?? "")
  if (zone === null) return undefined
  if (zone[1] === "Z") return 0
  const seconds = Number(zone[2]) * 3600 + Number(zone[3] ?? 0) * 60 + Number(zone[4] ?? 0)
  return (zone[1] === "-" ? -1 : 1) * seconds * 1000
}

/** date, timestamp and timestamptz: values without a zone are local time; ±infinity become numbers. */
const parseDate = (text: string): Date | number | null => {
  if (text === "infinity") return Infinity
  if (text === "-infinity") return -Infinity
  const m = DATE_TIME.exec(text)
  if (m === null) {
    const d = DATE.exec(text)
    if (d === null) return null
    const year = toYear(d[1], d[4])
    const date = new Date(year, Number(d[2]) - 1, Number(d[3]))
    if (year >= 0 && year < 100) date.setFullYear(year)
    return date
  }
  const year = toYear(m[1], m[8])
  const fields = [year, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])] as const
  const ms = m[7] ? 1000 * Number(m[7]) : 0
  const offset = timeZoneOffset(text)
  if (offset === undefined) {
    const date = new Date(...fields, ms)
    if (year >= 0 && year < 100) date.setFullYear(year)
    return date
  }
  const date = new Date(Date.UTC(...fields, ms))
  if (year >= 0 && year < 100) date.setUTCFullYear(year)
  return offset === 0 ? date : new Date(date.getTime() - offset)
}

/**
 * Overrides of PGlite's defaults where they differ from `pg`: int8 is a string (PGlite: number,
 * or bigint beyond 2^53), dates honour BC/local-time like postgres-date (PGlite: `new Date(text)`,
 * Invalid Date for BC, UTC for a bare date), bytea is a Buffer (PGlite: Uint8Array).
 * Array types are parsed element-wise with these parsers.
 */
const parsers: ParserOptions = {
  [types.INT8]: identity,
  [types.DATE]: parseDate,
  [types.TIMESTAMP]: parseDate,
  [types.TIMESTAMPTZ]: parseDate,
  [types.BYTEA]: (text) => Buffer.from(text.slice(2), "hex")
}
