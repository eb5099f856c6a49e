import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type { User } from "../../domain/Account.js"
import type { UserId } from "../../domain/Ids.js"
import type { EmailTaken, LoginExists } from "../../domain/Login.js"
import type { NewUser } from "../accounts/AccountRepository.js"
import * as InMemoryLoginRepository from "./InMemoryLoginRepository.js"
import * as SqlLoginRepository from "./SqlLoginRepository.js"

export interface NewLogin {
  readonly user_id: UserId
  /** Normalised (trimmed, lower-case): unique. */
  readonly email: string
  /** `scrypt$…`: the password itself is never stored. */
  readonly password_hash: string
  readonly created_at: DateTime.Utc
}

export interface NewSession {
  readonly id: string
  /** SHA-256 of the session token, hex: the token itself is never stored. */
  readonly token_hash: string
  readonly user_id: UserId
  readonly created_at: DateTime.Utc
}

/** A live session with its user and login. */
export interface FoundSession {
  readonly id: string
  readonly user: User
  readonly email: string
  readonly last_seen_at: DateTime.Utc
}

/** The dashboard's logins, sessions, trusted browsers and failed-login counts. */
export class LoginRepository extends Context.Tag("LoginRepository")<LoginRepository, {
  /** A user and their login at once: nothing is created if the email is taken. */
  readonly signup: (user: NewUser, login: Omit<NewLogin, "user_id">) => Effect.Effect<User, EmailTaken>
  /** A login for an existing user (the operator's call). */
  readonly createLogin: (login: NewLogin) => Effect.Effect<void, EmailTaken | LoginExists>
  readonly findLoginByEmail: (email: string) => Effect.Effect<Option.Option<{ readonly user_id: UserId; readonly password_hash: string }>>
  readonly findPasswordHash: (userId: UserId) => Effect.Effect<Option.Option<string>>
  /** A new password hash; every session of the user is revoked in the same transaction. */
  readonly setPassword: (userId: UserId, passwordHash: string, at: DateTime.Utc) => Effect.Effect<void>
  readonly createSession: (session: NewSession) => Effect.Effect<void>
  /** The session with this token hash, unless revoked or last seen before `idleSince`. */
  readonly findSession: (tokenHash: string, idleSince: DateTime.Utc) => Effect.Effect<Option.Option<FoundSession>>
  /** Records that the session was used at `at` (idle expiry counts from the last use). */
  readonly touchSession: (id: string, at: DateTime.Utc) => Effect.Effect<void>
  readonly revokeSession: (id: string, at: DateTime.Utc) => Effect.Effect<void>
  readonly revokeAllSessions: (userId: UserId, at: DateTime.Utc) => Effect.Effect<void>
  /** Remembers a browser where the user's login succeeded, by the hash of its device token. */
  readonly trustDevice: (tokenHash: string, userId: UserId, at: DateTime.Utc) => Effect.Effect<void>
  readonly isTrustedDevice: (tokenHash: string, userId: UserId) => Effect.Effect<boolean>
  /** The failures counted in each bucket's window starting at `windowStart` (0 for none). */
  readonly failures: (buckets: ReadonlyArray<string>, windowStart: DateTime.Utc) => Effect.Effect<ReadonlyArray<number>>
  /** Counts one failure in each bucket's window starting at `windowStart`, dropping their older windows. */
  readonly recordFailure: (buckets: ReadonlyArray<string>, windowStart: DateTime.Utc) => Effect.Effect<void>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** On the `SqlClient` in context. */
  static readonly layerSql = Layer.effect(this, SqlLoginRepository.make)
  /** In memory: no database at all. */
  static readonly layerInMemory = Layer.effect(this, InMemoryLoginRepository.make)
}
