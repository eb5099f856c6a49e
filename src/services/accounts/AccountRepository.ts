import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type {
  ApiKey,
  ApiKeyScope,
  BrokerConnection,
  BrokerEnvironment,
  BrokerKind,
  BrokerStatus,
  Tier,
  User
} from "../../domain/Account.js"
import type { ApiKeyId, BrokerId, Mode, Owner, UserId } from "../../domain/Ids.js"
import * as InMemoryAccountRepository from "./InMemoryAccountRepository.js"
import * as SqlAccountRepository from "./SqlAccountRepository.js"

export interface NewUser {
  readonly id: UserId
  readonly name: string
  readonly tier: Tier
  readonly requests_per_minute: number
  readonly intents_per_month: number
  readonly created_at: DateTime.Utc
}

export interface NewApiKey {
  readonly id: ApiKeyId
  readonly user_id: UserId
  readonly name: string
  readonly mode: Mode
  readonly scopes: ReadonlyArray<ApiKeyScope>
  /** SHA-256 of the key, hex: the key itself is never stored. */
  readonly key_hash: string
  readonly key_hint: string
  readonly created_at: DateTime.Utc
  readonly expires_at: DateTime.Utc | null
}

/** A key that authenticates until it expires: what every instance holds in memory, by hash. */
export interface ActiveApiKey {
  readonly id: ApiKeyId
  readonly key_hash: string
  readonly expires_at: DateTime.Utc | null
}

export interface NewBrokerConnection {
  readonly id: BrokerId
  readonly user_id: UserId
  readonly name: string
  readonly kind: BrokerKind
  readonly mode: Mode
  readonly environment: BrokerEnvironment | null
  /** Encrypted credentials (live brokers), never returned by the API. */
  readonly credentials: string | null
  readonly created_at: DateTime.Utc
}

/** What a broker needs to act for a connection: its environment and encrypted credentials. */
export interface BrokerSecrets {
  readonly id: BrokerId
  readonly kind: BrokerKind
  readonly environment: BrokerEnvironment | null
  readonly status: BrokerStatus
  /** Encrypted; null for the mock broker. */
  readonly credentials: string | null
}

/** Users, their API keys and their broker connections. */
export class AccountRepository extends Context.Tag("AccountRepository")<AccountRepository, {
  readonly createUser: (user: NewUser) => Effect.Effect<User>
  readonly findUser: (id: UserId) => Effect.Effect<Option.Option<User>>
  /** Users, newest first, at most `limit`. */
  readonly listUsers: (limit: number) => Effect.Effect<ReadonlyArray<User>>
  /** The user, renamed; none if there is no such user. */
  readonly renameUser: (id: UserId, name: string) => Effect.Effect<Option.Option<User>>
  readonly createApiKey: (key: NewApiKey) => Effect.Effect<ApiKey>
  readonly listApiKeys: (userId: UserId) => Effect.Effect<ReadonlyArray<ApiKey>>
  /** Revokes a key at once; false when there is no such key (or it was revoked already). */
  readonly revokeApiKey: (id: ApiKeyId, at: DateTime.Utc) => Effect.Effect<boolean>
  /** The key with this hash and its user, revoked and expired keys included. */
  readonly findApiKeyByHash: (hash: string) => Effect.Effect<Option.Option<{ readonly key: ApiKey; readonly user: User }>>
  /** Every key not revoked, expired ones included. */
  readonly listActiveApiKeys: () => Effect.Effect<ReadonlyArray<ActiveApiKey>>
  readonly touchApiKey: (id: ApiKeyId, at: DateTime.Utc) => Effect.Effect<void>
  readonly createBroker: (connection: NewBrokerConnection) => Effect.Effect<BrokerConnection>
  /** A connected (not disconnected) connection of this user; any string may be asked for, only an existing id matches. */
  readonly findBroker: (userId: UserId, id: string) => Effect.Effect<Option.Option<BrokerConnection>>
  /** A connection's environment and credentials, for the broker acting on it (never for a response). */
  readonly findBrokerSecrets: (id: BrokerId) => Effect.Effect<Option.Option<BrokerSecrets>>
  /**
   * The broker refused the connection's credentials `refused` (as stored, encrypted): `invalid`
   * until they are replaced. Credentials replaced meanwhile are not marked.
   */
  readonly markBrokerInvalid: (id: BrokerId, refused: string) => Effect.Effect<void>
  /** New credentials (encrypted) for a connection that has some: `active` again. None if there is no such connection. */
  readonly replaceBrokerCredentials: (id: BrokerId, credentials: string) => Effect.Effect<Option.Option<BrokerConnection>>
  /** The user's connections of one mode, oldest first, disconnected ones left out. */
  readonly listBrokers: (owner: Owner) => Effect.Effect<ReadonlyArray<BrokerConnection>>
  /**
   * Disconnects one of the user's connections: no new intent may name it; its intents keep their
   * history. False when the user has no such connected connection.
   */
  readonly disconnectBroker: (userId: UserId, id: BrokerId, at: DateTime.Utc) => Effect.Effect<boolean>
  /** The user's key with this id, revoked ones included. */
  readonly findApiKey: (userId: UserId, id: ApiKeyId) => Effect.Effect<Option.Option<ApiKey>>
  /**
   * The ids of the active connections of one kind of broker, disconnected ones included while
   * they have intents still open (their orders are followed to the end).
   */
  readonly listActiveBrokers: (kind: BrokerKind) => Effect.Effect<ReadonlyArray<BrokerId>>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** On the `SqlClient` in context. */
  static readonly layerSql = Layer.effect(this, SqlAccountRepository.make)
  /** In memory: no database at all. */
  static readonly layerInMemory = Layer.effect(this, InMemoryAccountRepository.make)
}
