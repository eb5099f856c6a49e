import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import {
  allScopes,
  ApiKeyNotFound,
  type ApiKeyScope,
  BrokerCredentialsInvalid,
  type BrokerEnvironment,
  BrokerNotFound,
  type BrokerKind,
  brokerKindMode,
  BrokerUnreachable,
  type Tier,
  tierLimits,
  UserNotFound
} from "../../domain/Account.js"
import { apiKeyHint, hashApiKey } from "../../domain/ApiKeyFormat.js"
import { ValidationError } from "../../domain/Errors.js"
import { ApiKeyId, BrokerId, type Mode, type Owner, UserId } from "../../domain/Ids.js"
import { BrokerGateway } from "../brokers/BrokerGateway.js"
import { CredentialsCipher } from "../CredentialsCipher.js"
import { IdGenerator } from "../IdGenerator.js"
import { AccountRepository } from "./AccountRepository.js"
import { ApiKeyCache } from "./ApiKeyCache.js"
import * as Tracing from "../../Tracing.js"

/** The dashboard's use cases: users, API keys, broker connections. */
export class Operators extends Effect.Service<Operators>()("Operators", {
  effect: Effect.gen(function*() {
    const accounts = yield* AccountRepository
    const ids = yield* IdGenerator
    const cipher = yield* CredentialsCipher
    const keyCache = yield* ApiKeyCache
    const brokers = yield* BrokerGateway

    const requireUser = (id: UserId) =>
      Effect.filterOrFail(
        accounts.findUser(id),
        Option.isSome,
        () => new UserNotFound()
      ).pipe(Effect.map((user) => user.value))

    const createUser = Effect.fnUntraced(function*(input: {
      readonly name: string
      readonly tier: Tier
      readonly requests_per_minute?: number | undefined
      readonly intents_per_month?: number | undefined
    }) {
      const defaults = tierLimits[input.tier]
      return yield* accounts.createUser({
        id: UserId.make(yield* ids.uuid),
        name: input.name,
        tier: input.tier,
        requests_per_minute: input.requests_per_minute ?? defaults.requestsPerMinute,
        intents_per_month: input.intents_per_month ?? defaults.intentsPerMonth,
        created_at: yield* DateTime.now
      })
    }, Tracing.span("Operators.createUser"))

    /** Creates a key; the returned `key` is the only time it is ever shown. */
    const createApiKey = Effect.fnUntraced(function*(userId: UserId, input: {
      readonly name: string
      readonly mode: Mode
      readonly scopes?: ReadonlyArray<ApiKeyScope> | undefined
      readonly expires_at?: DateTime.Utc | undefined
    }) {
      const user = yield* requireUser(userId)
      const now = yield* DateTime.now
      if (input.expires_at !== undefined && !DateTime.greaterThan(input.expires_at, now)) {
        return yield* new ValidationError({ detail: "expires_at must be in the future" })
      }
      const key = `sk_${input.mode}_${yield* ids.base62(32)}`
      const created = yield* accounts.createApiKey({
        id: ApiKeyId.make(yield* ids.uuid),
        user_id: user.id,
        name: input.name,
        mode: input.mode,
        scopes: [...new Set(input.scopes ?? allScopes)],
        key_hash: hashApiKey(key),
        key_hint: apiKeyHint(key),
        created_at: now,
        expires_at: input.expires_at ?? null
      })
      yield* keyCache.created({ id: created.id, key_hash: hashApiKey(key), expires_at: created.expires_at })
      return { ...created, key }
    }, Tracing.span("Operators.createApiKey"))

    /**
     * Alpaca credentials encrypted for storage, once Alpaca has accepted them in `environment`:
     * refused, they are `BrokerCredentialsInvalid`; unchecked (Alpaca unreachable), `BrokerUnreachable`.
     */
    const checkedAlpaca = (environment: BrokerEnvironment, input: {
      readonly api_key_id: string
      readonly api_secret_key: string
    }) =>
      Effect.gen(function*() {
        const credentials = yield* cipher.encrypt(
          JSON.stringify({ api_key_id: input.api_key_id, api_secret_key: input.api_secret_key })
        )
        yield* brokers.verify("alpaca", environment, {
          apiKeyId: input.api_key_id,
          apiSecretKey: Redacted.make(input.api_secret_key)
        }).pipe(Effect.catchTags({
          BrokerCredentialsRefused: () => new BrokerCredentialsInvalid(),
          BrokerUnavailable: (error) =>
            Effect.zipRight(
              Effect.logWarning("Alpaca could not verify new credentials").pipe(
                Effect.annotateLogs({ environment, reason: error.detail })
              ),
              new BrokerUnreachable()
            )
        }))
        return { environment, credentials }
      })

    /**
     * Creates a connection. An Alpaca connection's credentials are checked with Alpaca (in the
     * connection's environment, at the endpoint the deployment configures) before anything is
     * stored, then stored encrypted; they are never returned. A mock connection calls nothing.
     */
    const createBroker = Effect.fnUntraced(function*(userId: UserId, input: {
      readonly name: string
      readonly kind: BrokerKind
      readonly mode: Mode
      readonly environment?: BrokerEnvironment | undefined
      readonly credentials?: {
        readonly api_key_id: string
        readonly api_secret_key: string
      } | undefined
    }) {
      const user = yield* requireUser(userId)
      if (brokerKindMode[input.kind] !== input.mode) {
        return yield* new ValidationError({
          detail: `kind ${input.kind} is only available in ${brokerKindMode[input.kind]} mode`
        })
      }
      if (input.kind === "mock" && input.credentials !== undefined) {
        return yield* new ValidationError({ detail: "credentials are not accepted for kind mock" })
      }
      if (input.kind === "mock" && input.environment !== undefined) {
        return yield* new ValidationError({ detail: "environment is not accepted for kind mock" })
      }
      if (input.kind === "alpaca" && input.credentials === undefined) {
        return yield* new ValidationError({ detail: "credentials are required for kind alpaca" })
      }
      // Only an Alpaca connection gets this far with credentials.
      const { credentials, environment } = input.credentials === undefined
        ? { environment: null, credentials: null }
        : yield* checkedAlpaca(input.environment ?? "paper", input.credentials)
      return yield* accounts.createBroker({
        id: BrokerId.make(yield* ids.uuid),
        user_id: user.id,
        name: input.name,
        kind: input.kind,
        mode: input.mode,
        environment,
        credentials,
        created_at: yield* DateTime.now
      })
    }, Tracing.span("Operators.createBroker"))

    /**
     * New credentials for an Alpaca connection (after Alpaca refused the old ones, or to rotate
     * them): checked with Alpaca in the connection's environment first, then stored encrypted and
     * the connection `active` again. Nothing changes if Alpaca refuses them or cannot be reached.
     */
    const replaceBrokerCredentials = Effect.fnUntraced(function*(
      brokerId: BrokerId,
      input: { readonly api_key_id: string; readonly api_secret_key: string },
      /** When given, another user's connection (or a disconnected one) is not found. */
      userId?: UserId
    ) {
      if (userId !== undefined && Option.isNone(yield* accounts.findBroker(userId, brokerId))) {
        return yield* new BrokerNotFound()
      }
      const current = yield* accounts.findBrokerSecrets(brokerId)
      if (Option.isNone(current) || current.value.credentials === null) return yield* new BrokerNotFound()
      const { credentials } = yield* checkedAlpaca(current.value.environment ?? "paper", input)
      return yield* Effect.flatMap(
        accounts.replaceBrokerCredentials(brokerId, credentials),
        Option.match({ onNone: () => Effect.fail(new BrokerNotFound()), onSome: Effect.succeed })
      )
    }, Tracing.span("Operators.replaceBrokerCredentials"))

    return {
      createUser,
      getUser: Effect.fnUntraced(function*(id: UserId) {
        return yield* requireUser(id)
      }, Tracing.span("Operators.getUser")),
      createApiKey,
      listApiKeys: Effect.fnUntraced(function*(userId: UserId) {
        const user = yield* requireUser(userId)
        return yield* accounts.listApiKeys(user.id)
      }, Tracing.span("Operators.listApiKeys")),
      /** Revokes a key at once; when `userId` is given, another user's key is not found. */
      revokeApiKey: Effect.fnUntraced(function*(keyId: ApiKeyId, userId?: UserId) {
        if (userId !== undefined && Option.isNone(yield* accounts.findApiKey(userId, keyId))) {
          return yield* new ApiKeyNotFound()
        }
        if (!(yield* accounts.revokeApiKey(keyId, yield* DateTime.now))) return yield* new ApiKeyNotFound()
        yield* keyCache.invalidate(keyId)
      }, Tracing.span("Operators.revokeApiKey")),
      listBrokers: Effect.fnUntraced(function*(owner: Owner) {
        return yield* accounts.listBrokers(owner)
      }, Tracing.span("Operators.listBrokers")),
      listUsers: Effect.fnUntraced(function*(limit: number) {
        return yield* accounts.listUsers(limit)
      }, Tracing.span("Operators.listUsers")),
      /** The user's connected brokers, test mode's first. */
      listAllBrokers: Effect.fnUntraced(function*(userId: UserId) {
        const user = yield* requireUser(userId)
        const [test, live] = yield* Effect.all([
          accounts.listBrokers({ userId: user.id, mode: "test" }),
          accounts.listBrokers({ userId: user.id, mode: "live" })
        ])
        return [...test, ...live]
      }, Tracing.span("Operators.listAllBrokers")),
      /** Disconnects one of the user's connections: its intents keep their history, new ones naming it get 404. */
      disconnectBroker: Effect.fnUntraced(function*(userId: UserId, brokerId: BrokerId) {
        if (!(yield* accounts.disconnectBroker(userId, brokerId, yield* DateTime.now))) return yield* new BrokerNotFound()
      }, Tracing.span("Operators.disconnectBroker")),
      createBroker,
      replaceBrokerCredentials
    } as const
  })
}) {}
