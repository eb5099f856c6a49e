import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ApiKey, ApiKeyScope, BrokerConnection, BrokerKind, Tier, User } from "../../domain/Account.js"
import { ApiKeyId, BrokerId, Mode, UserId } from "../../domain/Ids.js"
import { API_KEYS_CHANNEL, KeyCreated } from "../../sql/Channels.js"
import { AccountRepository } from "./AccountRepository.js"

const encodeKeyCreated = Schema.encodeSync(KeyCreated)

const Timestamp = Schema.DateTimeUtcFromDate
const isUuid = Schema.is(Schema.UUID)

const UserRow = Schema.Struct({
  id: UserId,
  name: Schema.String,
  tier: Tier,
  requests_per_minute: Schema.Int,
  intents_per_month: Schema.Int,
  created_at: Timestamp
})

const ApiKeyRow = Schema.Struct({
  id: ApiKeyId,
  user_id: UserId,
  name: Schema.String,
  mode: Mode,
  scopes: Schema.Array(ApiKeyScope),
  key_hint: Schema.String,
  created_at: Timestamp,
  expires_at: Schema.NullOr(Timestamp),
  last_used_at: Schema.NullOr(Timestamp),
  revoked_at: Schema.NullOr(Timestamp)
})
const NewApiKeyRow = Schema.Struct({ ...ApiKeyRow.fields, key_hash: Schema.String })

const KeyWithUserRow = Schema.Struct({
  ...ApiKeyRow.fields,
  user_name: Schema.String,
  user_tier: Tier,
  user_requests_per_minute: Schema.Int,
  user_intents_per_month: Schema.Int,
  user_created_at: Timestamp
})

const BrokerRow = Schema.Struct({
  id: BrokerId,
  user_id: UserId,
  name: Schema.String,
  kind: BrokerKind,
  mode: Mode,
  created_at: Timestamp
})
const NewBrokerRow = Schema.Struct({ ...BrokerRow.fields, credentials: Schema.NullOr(Schema.String) })

const apiKeyColumns = "id, user_id, name, mode, scopes, key_hint, created_at, expires_at, last_used_at, revoked_at"

/** SQL and decoding errors are defects here: no caller can act on them (they become 500s). */
const orDie = Effect.orDie

const MAX_CACHED_BROKERS = 10_000

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
    Request: NewApiKeyRow,
    Result: ApiKeyRow,
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
    Result: Schema.Struct({ id: ApiKeyId, key_hash: Schema.String, expires_at: Schema.NullOr(Timestamp) }),
    execute: () => sql`SELECT id, key_hash, expires_at FROM api_keys WHERE revoked_at IS NULL`
  })
  const selectApiKeys = SqlSchema.findAll({
    Request: UserId,
    Result: ApiKeyRow,
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
  const insertBroker = SqlSchema.single({
    Request: NewBrokerRow,
    Result: BrokerRow,
    execute: (b) =>
      sql`INSERT INTO broker_connections (id, user_id, name, kind, mode, credentials, created_at)
          VALUES (${b.id}, ${b.user_id}, ${b.name}, ${b.kind}, ${b.mode}, ${b.credentials}, ${b.created_at})
          RETURNING id, user_id, name, kind, mode, created_at`
  })
  const selectBroker = SqlSchema.findOne({
    Request: Schema.Struct({ user_id: UserId, id: BrokerId }),
    Result: BrokerRow,
    execute: ({ id, user_id }) =>
      sql`SELECT id, user_id, name, kind, mode, created_at
          FROM broker_connections WHERE id = ${id} AND user_id = ${user_id}`
  })

  /**
   * Broker connections found, by user and id: a connection is never updated or deleted, so one
   * found stays true, and a creation needs no lookup (only the found ones are kept).
   */
  const brokers = new Map<string, BrokerConnection>()

  return AccountRepository.of({
    createUser: (user) =>
      insertUser(user).pipe(Effect.map((row) => new User(row)), orDie, Effect.withSpan("AccountRepository.createUser")),
    findUser: (id) =>
      selectUser(id).pipe(
        Effect.map(Option.map((row) => new User(row))),
        orDie,
        Effect.withSpan("AccountRepository.findUser")
      ),
    createApiKey: (key) =>
      insertApiKey({ ...key, last_used_at: null, revoked_at: null }).pipe(
        Effect.map((row) => new ApiKey(row)),
        orDie,
        Effect.withSpan("AccountRepository.createApiKey")
      ),
    listApiKeys: (userId) =>
      selectApiKeys(userId).pipe(
        Effect.map((rows) => rows.map((row) => new ApiKey(row))),
        orDie,
        Effect.withSpan("AccountRepository.listApiKeys")
      ),
    revokeApiKey: (id, at) =>
      sql<{ id: string }>`WITH revoked AS (
                            UPDATE api_keys SET revoked_at = ${DateTime.toDate(at)}
                            WHERE id = ${id} AND revoked_at IS NULL RETURNING id)
                          SELECT id, pg_notify(${API_KEYS_CHANNEL}, id::text) FROM revoked`.pipe(
        Effect.map((rows) => rows.length > 0),
        orDie,
        Effect.withSpan("AccountRepository.revokeApiKey")
      ),
    findApiKeyByHash: (hash) =>
      selectKeyByHash(hash).pipe(
        Effect.map(Option.map((row) => ({
          key: new ApiKey(row),
          user: new User({
            id: row.user_id,
            name: row.user_name,
            tier: row.user_tier,
            requests_per_minute: row.user_requests_per_minute,
            intents_per_month: row.user_intents_per_month,
            created_at: row.user_created_at
          })
        }))),
        orDie,
        Effect.withSpan("AccountRepository.findApiKeyByHash")
      ),
    listActiveApiKeys: () =>
      selectActiveKeys(undefined).pipe(orDie, Effect.withSpan("AccountRepository.listActiveApiKeys")),
    touchApiKey: (id, at) =>
      sql`UPDATE api_keys SET last_used_at = ${DateTime.toDate(at)}
          WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < ${DateTime.toDate(at)})`.pipe(
        Effect.asVoid,
        orDie,
        Effect.withSpan("AccountRepository.touchApiKey")
      ),
    createBroker: (connection) =>
      insertBroker(connection).pipe(
        Effect.map((row) => new BrokerConnection(row)),
        orDie,
        Effect.withSpan("AccountRepository.createBroker")
      ),
    findBroker: (userId, id) => {
      if (!isUuid(id)) return Effect.succeed(Option.none())
      const key = `${userId}/${id}`
      const known = brokers.get(key)
      if (known !== undefined) return Effect.succeed(Option.some(known))
      return selectBroker({ user_id: userId, id: BrokerId.make(id) }).pipe(
        Effect.map(Option.map((row) => new BrokerConnection(row))),
        Effect.tap((found) =>
          Effect.sync(() => {
            if (Option.isNone(found)) return
            if (brokers.size >= MAX_CACHED_BROKERS) brokers.clear()
            brokers.set(key, found.value)
          })
        ),
        orDie,
        Effect.withSpan("AccountRepository.findBroker")
      )
    }
  })
})

/** The repository on the `SqlClient` in context: PostgreSQL or embedded PGlite alike. */
