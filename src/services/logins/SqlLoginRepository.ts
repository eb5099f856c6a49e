import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { User } from "../../domain/Account.js"
import { UserId } from "../../domain/Ids.js"
import { EmailTaken, LoginExists } from "../../domain/Login.js"
import { orDie } from "../../sql/Defects.js"
import type { NewUser } from "../accounts/AccountRepository.js"
import { UserRow } from "../accounts/SqlAccountRepository.js"
import type { LoginRepository, NewLogin, NewSession } from "./LoginRepository.js"
import * as Tracing from "../../Tracing.js"

const Timestamp = Schema.DateTimeUtcFromDate

const SessionRow = Schema.Struct({
  session_id: Schema.String,
  email: Schema.String,
  last_seen_at: Timestamp,
  ...UserRow.fields
})

/** Sessions are touched at most this often: idle expiry is counted in days. */
const TOUCH_EVERY = "1 minute"

/** The repository on the `SqlClient` in context: PostgreSQL or embedded PGlite alike. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // One statement: the user exists only if the email was free (the foreign key is checked at its end).
  const insertSignup = SqlSchema.findOne({
    Request: Schema.Struct({ ...UserRow.fields, email: Schema.String, password_hash: Schema.String }),
    Result: UserRow,
    execute: (u) =>
      sql`WITH login AS (
            INSERT INTO logins (user_id, email, password_hash, created_at, password_changed_at)
            VALUES (${u.id}, ${u.email}, ${u.password_hash}, ${u.created_at}, ${u.created_at})
            ON CONFLICT (email) DO NOTHING
            RETURNING user_id)
          INSERT INTO users (id, name, tier, requests_per_minute, intents_per_month, created_at)
          SELECT ${u.id}, ${u.name}, ${u.tier}, ${u.requests_per_minute}, ${u.intents_per_month}, ${u.created_at}
          FROM login
          RETURNING *`
  })
  const insertLogin = SqlSchema.findAll({
    Request: Schema.Struct({ user_id: UserId, email: Schema.String, password_hash: Schema.String, created_at: Timestamp }),
    Result: Schema.Struct({ user_id: UserId }),
    execute: (l) =>
      sql`INSERT INTO logins (user_id, email, password_hash, created_at, password_changed_at)
          VALUES (${l.user_id}, ${l.email}, ${l.password_hash}, ${l.created_at}, ${l.created_at})
          ON CONFLICT DO NOTHING
          RETURNING user_id`
  })
  const selectLoginByEmail = SqlSchema.findOne({
    Request: Schema.String,
    Result: Schema.Struct({ user_id: UserId, password_hash: Schema.String }),
    execute: (email) => sql`SELECT user_id, password_hash FROM logins WHERE email = ${email}`
  })
  const selectPasswordHash = SqlSchema.findOne({
    Request: UserId,
    Result: Schema.Struct({ password_hash: Schema.String }),
    execute: (userId) => sql`SELECT password_hash FROM logins WHERE user_id = ${userId}`
  })
  const updatePassword = SqlSchema.void({
    Request: Schema.Struct({ user_id: UserId, password_hash: Schema.String, at: Timestamp }),
    execute: ({ at, password_hash, user_id }) =>
      sql`WITH changed AS (
            UPDATE logins SET password_hash = ${password_hash}, password_changed_at = ${at}
            WHERE user_id = ${user_id} RETURNING user_id)
          UPDATE sessions SET revoked_at = ${at}
          WHERE user_id IN (SELECT user_id FROM changed) AND revoked_at IS NULL`
  })
  const insertSession = SqlSchema.void({
    Request: Schema.Struct({ id: Schema.String, token_hash: Schema.String, user_id: UserId, created_at: Timestamp }),
    execute: (s) =>
      sql`INSERT INTO sessions (id, token_hash, user_id, created_at, last_seen_at)
          VALUES (${s.id}, ${s.token_hash}, ${s.user_id}, ${s.created_at}, ${s.created_at})`
  })
  const selectSession = SqlSchema.findOne({
    Request: Schema.Struct({ token_hash: Schema.String, idle_since: Timestamp }),
    Result: SessionRow,
    execute: ({ idle_since, token_hash }) =>
      sql`SELECT s.id AS session_id, l.email, s.last_seen_at, u.*
          FROM sessions s JOIN users u ON u.id = s.user_id JOIN logins l ON l.user_id = s.user_id
          WHERE s.token_hash = ${token_hash} AND s.revoked_at IS NULL AND s.last_seen_at > ${idle_since}`
  })
  const updateSeen = SqlSchema.void({
    Request: Schema.Struct({ id: Schema.String, at: Timestamp }),
    execute: ({ at, id }) =>
      sql`UPDATE sessions SET last_seen_at = ${at}
          WHERE id = ${id} AND revoked_at IS NULL AND last_seen_at < ${at}::timestamptz - ${TOUCH_EVERY}::interval`
  })
  const updateRevoked = SqlSchema.void({
    Request: Schema.Struct({ id: Schema.String, at: Timestamp }),
    execute: ({ at, id }) => sql`UPDATE sessions SET revoked_at = ${at} WHERE id = ${id} AND revoked_at IS NULL`
  })
  const updateAllRevoked = SqlSchema.void({
    Request: Schema.Struct({ user_id: UserId, at: Timestamp }),
    execute: ({ at, user_id }) =>
      sql`UPDATE sessions SET revoked_at = ${at} WHERE user_id = ${user_id} AND revoked_at IS NULL`
  })
  const insertDevice = SqlSchema.void({
    Request: Schema.Struct({ token_hash: Schema.String, user_id: UserId, at: Timestamp }),
    execute: ({ at, token_hash, user_id }) =>
      sql`INSERT INTO login_devices (token_hash, user_id, created_at) VALUES (${token_hash}, ${user_id}, ${at})
          ON CONFLICT (token_hash) DO NOTHING`
  })
  const selectDevice = SqlSchema.findOne({
    Request: Schema.Struct({ token_hash: Schema.String, user_id: UserId }),
    Result: Schema.Struct({ token_hash: Schema.String }),
    execute: ({ token_hash, user_id }) =>
      sql`SELECT token_hash FROM login_devices WHERE token_hash = ${token_hash} AND user_id = ${user_id}`
  })
  const selectFailures = SqlSchema.findAll({
    Request: Schema.Struct({ buckets: Schema.Array(Schema.String), window_start: Timestamp }),
    Result: Schema.Struct({ bucket: Schema.String, count: Schema.Int }),
    execute: ({ buckets, window_start }) =>
      sql`SELECT bucket, count FROM login_failures
          WHERE bucket IN ${sql.in(buckets)} AND window_start = ${window_start}`
  })
  const upsertFailure = SqlSchema.void({
    Request: Schema.Struct({ bucket: Schema.String, window_start: Timestamp }),
    execute: ({ bucket, window_start }) =>
      sql`WITH dropped AS (
            DELETE FROM login_failures WHERE bucket = ${bucket} AND window_start < ${window_start})
          INSERT INTO login_failures (bucket, window_start, count) VALUES (${bucket}, ${window_start}, 1)
          ON CONFLICT (bucket, window_start) DO UPDATE SET count = login_failures.count + 1`
  })

  return identity<Context.Tag.Service<typeof LoginRepository>>({
    signup: Effect.fnUntraced(function*(user: NewUser, login: Omit<NewLogin, "user_id">) {
      const created = yield* insertSignup({ ...user, email: login.email, password_hash: login.password_hash })
      if (Option.isNone(created)) return yield* new EmailTaken()
      return new User(created.value)
    }, orDie, Tracing.span("LoginRepository.signup")),

    createLogin: Effect.fnUntraced(function*(login: NewLogin) {
      if ((yield* insertLogin(login)).length > 0) return
      return Option.isSome(yield* selectPasswordHash(login.user_id))
        ? yield* new LoginExists()
        : yield* new EmailTaken()
    }, orDie, Tracing.span("LoginRepository.createLogin")),

    findLoginByEmail: Effect.fnUntraced(function*(email: string) {
      return yield* selectLoginByEmail(email)
    }, orDie, Tracing.span("LoginRepository.findLoginByEmail")),

    findPasswordHash: Effect.fnUntraced(function*(userId: UserId) {
      return Option.map(yield* selectPasswordHash(userId), (row) => row.password_hash)
    }, orDie, Tracing.span("LoginRepository.findPasswordHash")),

    setPassword: Effect.fnUntraced(function*(userId: UserId, passwordHash: string, at: DateTime.Utc) {
      yield* updatePassword({ user_id: userId, password_hash: passwordHash, at })
    }, orDie, Tracing.span("LoginRepository.setPassword")),

    createSession: Effect.fnUntraced(function*(session: NewSession) {
      yield* insertSession(session)
    }, orDie, Tracing.span("LoginRepository.createSession")),

    findSession: Effect.fnUntraced(function*(tokenHash: string, idleSince: DateTime.Utc) {
      return Option.map(yield* selectSession({ token_hash: tokenHash, idle_since: idleSince }), (row) => ({
        id: row.session_id,
        email: row.email,
        last_seen_at: row.last_seen_at,
        user: new User({
          id: row.id,
          name: row.name,
          tier: row.tier,
          requests_per_minute: row.requests_per_minute,
          intents_per_month: row.intents_per_month,
          created_at: row.created_at
        })
      }))
    }, orDie, Tracing.span("LoginRepository.findSession")),

    touchSession: Effect.fnUntraced(function*(id: string, at: DateTime.Utc) {
      yield* updateSeen({ id, at })
    }, orDie, Tracing.span("LoginRepository.touchSession")),

    revokeSession: Effect.fnUntraced(function*(id: string, at: DateTime.Utc) {
      yield* updateRevoked({ id, at })
    }, orDie, Tracing.span("LoginRepository.revokeSession")),

    revokeAllSessions: Effect.fnUntraced(function*(userId: UserId, at: DateTime.Utc) {
      yield* updateAllRevoked({ user_id: userId, at })
    }, orDie, Tracing.span("LoginRepository.revokeAllSessions")),

    trustDevice: Effect.fnUntraced(function*(tokenHash: string, userId: UserId, at: DateTime.Utc) {
      yield* insertDevice({ token_hash: tokenHash, user_id: userId, at })
    }, orDie, Tracing.span("LoginRepository.trustDevice")),

    isTrustedDevice: Effect.fnUntraced(function*(tokenHash: string, userId: UserId) {
      return Option.isSome(yield* selectDevice({ token_hash: tokenHash, user_id: userId }))
    }, orDie, Tracing.span("LoginRepository.isTrustedDevice")),

    failures: Effect.fnUntraced(function*(buckets: ReadonlyArray<string>, windowStart: DateTime.Utc) {
      const rows = yield* selectFailures({ buckets, window_start: windowStart })
      return buckets.map((bucket) => rows.find((row) => row.bucket === bucket)?.count ?? 0)
    }, orDie, Tracing.span("LoginRepository.failures")),

    recordFailure: Effect.fnUntraced(function*(buckets: ReadonlyArray<string>, windowStart: DateTime.Utc) {
      yield* Effect.forEach(buckets, (bucket) => upsertFailure({ bucket, window_start: windowStart }), { discard: true })
    }, orDie, Tracing.span("LoginRepository.recordFailure"))
  })
})
