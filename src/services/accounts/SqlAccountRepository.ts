import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  ApiKey,
  ApiKeyScope,
  BrokerConnection,
  BrokerEnvironment,
  BrokerKind,
  BrokerStatus,
  Tier,
  User
} from "../../domain/Account.js"
import { ApiKeyId, BrokerId, Mode, type Owner, UserId } from "../../domain/Ids.js"
import { API_KEYS_CHANNEL, KeyCreated } from "../../sql/Channels.js"
import { orDie } from "../../sql/Defects.js"
import type { AccountRepository, NewApiKey, NewBrokerConnection, NewUser } from "./AccountRepository.js"
import * as Tracing from "../../Tracing.js"

const encodeKeyCreated = Schema.encodeSync(KeyCreated)

const Timestamp = Schema.DateTimeUtcFromDate
const isUuid = Schema.is(Schema.UUID)

/** A row of `users`. */
export const UserRow = Schema.Struct({
  id: UserId,
  name: Schema.String,
  tier: Tier,
  requests_per_minute: Schema.Int,
  intents_per_month: Schema.Int,
  created_at: Timestamp
})

/** A row of `api_keys`. */
const ApiKeyRow = Schema.Struct({
  id: ApiKeyId,
  user_id: UserId,
  name: Schema.String,
  mode: Mode,
  scopes: Schema.Array(ApiKeyScope),
  key_hash: Schema.String,
  key_hint: Schema.String,
  created_at: Timestamp,
  expires_at: Schema.NullOr(Timestamp),
  last_used_at: Schema.NullOr(Timestamp),
  revoked_at: Schema.NullOr(Timestamp)
})

/** A key as it is read back: everything but its hash. */
const ApiKeyView = ApiKeyRow.omit("key_hash")

/** A key with its user's columns, prefixed `user_`. */
const KeyWithUserRow = Schema.Struct({
  ...ApiKeyView.fields,
  user_name: UserRow.fields.name,
  user_tier: UserRow.fields.tier,
  user_requests_per_minute: UserRow.fields.requests_per_minute,
  user_intents_per_month: UserRow.fields.intents_per_month,
  user_created_at: UserRow.fields.created_at
})

/** A row of `broker_connections`. */
const BrokerRow = Schema.Struct({
  id: BrokerId,
  user_id: UserId,
  name: Schema.String,
  kind: BrokerKind,
  mode: Mode,
  environment: Schema.NullOr(BrokerEnvironment),
  status: BrokerStatus,
  credentials: Schema.NullOr(Schema.String),
  created_at: Timestamp
})

/** A connection as it is read back: everything but its credentials. */
const BrokerView = BrokerRow.omit("credentials")

const apiKeyColumns = "id, user_id, name, mode, scopes, key_hint, created_at, expires_at, last_used_at, revoked_at"
const brokerColumns = "id, user_id, name, kind, mode, environment, status, created_at"

const toUser = (row: typeof UserRow.Type) => new User(row)
const toApiKey = (row: typeof ApiKeyView.Type) => new ApiKey(row)
const toBroker = (row: typeof BrokerView.Type) => new BrokerConnection(row)

const MAX_CACHED_BROKERS = 10_000
/** How long a connection found is trusted without asking the database again. */
const BROKER_CACHE_MILLIS = 2_000

/** The repository on the `SqlClient` in context: PostgreSQL or embedded PGlite alike. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const insertUser = SqlSchema.single({
    Request: UserRow,
    Result: UserRow,
    execute: (u) =>
      sql`INSERT INTO users (id, name, tier, requests_per_minute, intents_per_month, created_at)
          VALUES (${u.id}, ${u.name}, ${u.tier}, ${u.requests_per_minute}, ${u.intents_per_month}, ${u.created_at})
          RETURNING *`
  })
  const selectUser = SqlSchema.findOne({
    Request: UserId,
    Result: UserRow,
    execute: (id) => sql`SELECT * FROM users WHERE id = ${id}`
  })
  const insertApiKey = SqlSchema.single({
    Request: ApiKeyRow,
    Result: ApiKeyView,
    execute: (k) =>
      sql`WITH created AS (
            INSERT INTO api_keys (id, user_id, name, mode, scopes, key_hash, key_hint, created_at, expires_at)
            VALUES (${k.id}, ${k.user_id}, ${k.name}, ${k.mode}, ${JSON.stringify(k.scopes)}::jsonb, ${k.key_hash}, ${k.key_hint},
                    ${k.created_at}, ${k.expires_at})
            RETURNING ${sql.literal(apiKeyColumns)})
          SELECT created.*, pg_notify(
            ${API_KEYS_CHANNEL},
            ${encodeKeyCreated({ created: k.id, key_hash: k.key_hash, expires_at: k.expires_at?.getTime() ?? null })}) FROM created`
  })
  const selectActiveKeys = SqlSchema.findAll({
    Request: Schema.Void,
    Result: ApiKeyRow.pick("id", "key_hash", "expires_at"),
    execute: () => sql`SELECT id, key_hash, expires_at FROM api_keys WHERE revoked_at IS NULL`
  })
  const selectApiKeys = SqlSchema.findAll({
    Request: UserId,
    Result: ApiKeyView,
    execute: (userId) =>
      sql`SELECT ${sql.literal(apiKeyColumns)} FROM api_keys WHERE user_id = ${userId} ORDER BY created_at, id`
  })
  const selectKeyByHash = SqlSchema.findOne({
    Request: Schema.String,
    Result: KeyWithUserRow,
    execute: (hash) =>
      sql`SELECT k.id, k.user_id, k.name, k.mode, k.scopes, k.key_hint, k.created_at, k.expires_at,
                 k.last_used_at, k.revoked_at, u.name AS user_name, u.tier AS user_tier,
                 u.requests_per_minute AS user_requests_per_minute,
                 u.intents_per_month AS user_intents_per_month, u.created_at AS user_created_at
          FROM api_keys k JOIN users u ON u.id = k.user_id
          WHERE k.key_hash = ${hash}`
  })
  const updateRevoked = SqlSchema.findOne({
    Request: Schema.Struct({ id: ApiKeyId, at: Timestamp }),
    Result: ApiKeyRow.pick("id"),
    execute: ({ at, id }) =>
      sql`WITH revoked AS (
            UPDATE api_keys SET revoked_at = ${at}
            WHERE id = ${id} AND revoked_at IS NULL RETURNING id)
          SELECT id, pg_notify(${API_KEYS_CHANNEL}, id::text) FROM revoked`
  })
  const updateLastUsed = SqlSchema.void({
    Request: Schema.Struct({ id: ApiKeyId, at: Timestamp }),
    execute: ({ at, id }) =>
      sql`UPDATE api_keys SET last_used_at = ${at}
          WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < ${at})`
  })
  const insertBroker = SqlSchema.single({
    Request: BrokerRow.omit("status"),
    Result: BrokerView,
    execute: (b) =>
      sql`INSERT INTO broker_connections (id, user_id, name, kind, mode, environment, credentials, created_at)
          VALUES (${b.id}, ${b.user_id}, ${b.name}, ${b.kind}, ${b.mode}, ${b.environment}, ${b.credentials}, ${b.created_at})
          RETURNING ${sql.literal(brokerColumns)}`
  })
  const selectSecrets = SqlSchema.findOne({
    Request: BrokerId,
    Result: BrokerRow.pick("id", "kind", "environment", "status", "credentials"),
    execute: (id) =>
      sql`SELECT id, kind, environment, status, credentials FROM broker_connections WHERE id = ${id}`
  })
  const updateInvalid = SqlSchema.void({
    Request: Schema.Struct({ id: BrokerId, refused: Schema.String }),
    execute: ({ id, refused }) =>
      sql`UPDATE broker_connections SET status = 'invalid' WHERE id = ${id} AND credentials = ${refused}`
  })
  const updateCredentials = SqlSchema.findOne({
    Request: Schema.Struct({ id: BrokerId, credentials: Schema.String }),
    Result: BrokerView,
    execute: ({ credentials, id }) =>
      sql`UPDATE broker_connections SET credentials = ${credentials}, status = 'active'
          WHERE id = ${id} AND credentials IS NOT NULL
          RETURNING ${sql.literal(brokerColumns)}`
  })
  const selectActive = SqlSchema.findAll({
    Request: BrokerKind,
    Result: BrokerRow.pick("id"),
    execute: (kind) =>
      sql`SELECT c.id FROM broker_connections c
          WHERE c.kind = ${kind} AND c.status = 'active'
            AND (c.disconnected_at IS NULL OR EXISTS (
              SELECT 1 FROM intents i WHERE i.broker_id = c.id AND i.status IN ('pending', 'partially_filled')))
          ORDER BY c.id`
  })
  const selectBroker = SqlSchema.findOne({
    Request: BrokerRow.pick("user_id", "id"),
    Result: BrokerView,
    execute: ({ id, user_id }) =>
      sql`SELECT ${sql.literal(brokerColumns)} FROM broker_connections
          WHERE id = ${id} AND user_id = ${user_id} AND disconnected_at IS NULL`
  })
  const selectBrokers = SqlSchema.findAll({
    Request: BrokerRow.pick("user_id", "mode"),
    Result: BrokerView,
    execute: ({ mode, user_id }) =>
      sql`SELECT ${sql.literal(brokerColumns)} FROM broker_connections
          WHERE user_id = ${user_id} AND mode = ${mode} AND disconnected_at IS NULL
          ORDER BY created_at, id`
  })
  const updateDisconnected = SqlSchema.findOne({
    Request: Schema.Struct({ user_id: UserId, id: BrokerId, at: Timestamp }),
    Result: BrokerRow.pick("id"),
    execute: ({ at, id, user_id }) =>
      sql`UPDATE broker_connections SET disconnected_at = ${at}
          WHERE id = ${id} AND user_id = ${user_id} AND disconnected_at IS NULL RETURNING id`
  })
  const selectApiKey = SqlSchema.findOne({
    Request: Schema.Struct({ user_id: UserId, id: ApiKeyId }),
    Result: ApiKeyView,
    execute: ({ id, user_id }) =>
      sql`SELECT ${sql.literal(apiKeyColumns)} FROM api_keys WHERE id = ${id} AND user_id = ${user_id}`
  })
  const selectUsers = SqlSchema.findAll({
    Request: Schema.Int,
    Result: UserRow,
    execute: (limit) => sql`SELECT * FROM users ORDER BY created_at DESC, id DESC LIMIT ${limit}`
  })
  const updateUserName = SqlSchema.findOne({
    Request: Schema.Struct({ id: UserId, name: Schema.String }),
    Result: UserRow,
    execute: ({ id, name }) => sql`UPDATE users SET name = ${name} WHERE id = ${id} RETURNING *`
  })

  /**
   * Broker connections found, by user and id, for a short while: a creation mostly needs no
   * lookup. A connection disconnected here is dropped at once; one disconnected by another
   * instance is refused here within `BROKER_CACHE_MILLIS`. Its status may be stale: routing reads
   * the status afresh (`findBrokerSecrets`).
   */
  const brokers = new Map<string, { readonly connection: BrokerConnection; readonly until: number }>()

  return identity<Context.Tag.Service<typeof AccountRepository>>({
    createUser: Effect.fnUntraced(function*(user: NewUser) {
      return toUser(yield* insertUser(user))
    }, orDie, Tracing.span("AccountRepository.createUser")),

    findUser: Effect.fnUntraced(function*(id: UserId) {
      return Option.map(yield* selectUser(id), toUser)
    }, orDie, Tracing.span("AccountRepository.findUser")),

    createApiKey: Effect.fnUntraced(function*(key: NewApiKey) {
      return toApiKey(yield* insertApiKey({ ...key, last_used_at: null, revoked_at: null }))
    }, orDie, Tracing.span("AccountRepository.createApiKey")),

    listApiKeys: Effect.fnUntraced(function*(userId: UserId) {
      return (yield* selectApiKeys(userId)).map(toApiKey)
    }, orDie, Tracing.span("AccountRepository.listApiKeys")),

    revokeApiKey: Effect.fnUntraced(function*(id: ApiKeyId, at: DateTime.Utc) {
      return Option.isSome(yield* updateRevoked({ id, at }))
    }, orDie, Tracing.span("AccountRepository.revokeApiKey")),

    findApiKeyByHash: Effect.fnUntraced(function*(hash: string) {
      return Option.map(yield* selectKeyByHash(hash), (row) => ({
        key: toApiKey(row),
        user: new User({
          id: row.user_id,
          name: row.user_name,
          tier: row.user_tier,
          requests_per_minute: row.user_requests_per_minute,
          intents_per_month: row.user_intents_per_month,
          created_at: row.user_created_at
        })
      }))
    }, orDie, Tracing.span("AccountRepository.findApiKeyByHash")),

    listActiveApiKeys: Effect.fnUntraced(function*() {
      return yield* selectActiveKeys(undefined)
    }, orDie, Tracing.span("AccountRepository.listActiveApiKeys")),

    touchApiKey: Effect.fnUntraced(function*(id: ApiKeyId, at: DateTime.Utc) {
      yield* updateLastUsed({ id, at })
    }, orDie, Tracing.span("AccountRepository.touchApiKey")),

    createBroker: Effect.fnUntraced(function*(connection: NewBrokerConnection) {
      return toBroker(yield* insertBroker(connection))
    }, orDie, Tracing.span("AccountRepository.createBroker")),

    findBroker: Effect.fnUntraced(function*(userId: UserId, id: string) {
      if (!isUuid(id)) return Option.none<BrokerConnection>()
      const key = `${userId}/${id}`
      const now = yield* Clock.currentTimeMillis
      const known = brokers.get(key)
      if (known !== undefined && known.until > now) return Option.some(known.connection)
      const found = Option.map(yield* selectBroker({ user_id: userId, id: BrokerId.make(id) }), toBroker)
      brokers.delete(key)
      if (Option.isSome(found)) {
        if (brokers.size >= MAX_CACHED_BROKERS) brokers.clear()
        brokers.set(key, { connection: found.value, until: now + BROKER_CACHE_MILLIS })
      }
      return found
    }, orDie, Tracing.span("AccountRepository.findBroker")),

    listBrokers: Effect.fnUntraced(function*(owner: Owner) {
      return (yield* selectBrokers({ user_id: owner.userId, mode: owner.mode })).map(toBroker)
    }, orDie, Tracing.span("AccountRepository.listBrokers")),

    disconnectBroker: Effect.fnUntraced(
      function*(userId: UserId, id: BrokerId, at: DateTime.Utc) {
        brokers.delete(`${userId}/${id}`)
        return Option.isSome(yield* updateDisconnected({ user_id: userId, id, at }))
      },
      orDie,
      Tracing.span("AccountRepository.disconnectBroker")
    ),

    findApiKey: Effect.fnUntraced(function*(userId: UserId, id: ApiKeyId) {
      return Option.map(yield* selectApiKey({ user_id: userId, id }), toApiKey)
    }, orDie, Tracing.span("AccountRepository.findApiKey")),

    listUsers: Effect.fnUntraced(function*(limit: number) {
      return (yield* selectUsers(limit)).map(toUser)
    }, orDie, Tracing.span("AccountRepository.listUsers")),

    renameUser: Effect.fnUntraced(function*(id: UserId, name: string) {
      return Option.map(yield* updateUserName({ id, name }), toUser)
    }, orDie, Tracing.span("AccountRepository.renameUser")),

    findBrokerSecrets: Effect.fnUntraced(function*(id: BrokerId) {
      return yield* selectSecrets(id)
    }, orDie, Tracing.span("AccountRepository.findBrokerSecrets")),

    markBrokerInvalid: Effect.fnUntraced(function*(id: BrokerId, refused: string) {
      yield* updateInvalid({ id, refused })
    }, orDie, Tracing.span("AccountRepository.markBrokerInvalid")),

    replaceBrokerCredentials: Effect.fnUntraced(
      function*(id: BrokerId, credentials: string) {
        return Option.map(yield* updateCredentials({ id, credentials }), toBroker)
      },
      orDie,
      Tracing.span("AccountRepository.replaceBrokerCredentials")
    ),

    listActiveBrokers: Effect.fnUntraced(function*(kind: BrokerKind) {
      return (yield* selectActive(kind)).map((row) => row.id)
    }, orDie, Tracing.span("AccountRepository.listActiveBrokers"))
  })
})
