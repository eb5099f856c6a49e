import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import { AdminAuth, ApiKeyAuth } from "../api/Security.js"
import type { ApiKey } from "../domain/Account.js"
import { apiKeyMode } from "../domain/ApiKeyFormat.js"
import { Forbidden, RateLimited, tooManyFailures, Unauthorized } from "../domain/Auth.js"
import type { ApiKeyId } from "../domain/Ids.js"
import type { RateDecision } from "../domain/Limits.js"
import { AccountRepository } from "../services/accounts/AccountRepository.js"
import { ApiKeyCache } from "../services/accounts/ApiKeyCache.js"
import { hashApiKey } from "../domain/ApiKeyFormat.js"
import { RateLimiter } from "../services/RateLimiter.js"
import * as AuthFailures from "./AuthFailures.js"
import * as ResponseHeaders from "./ResponseHeaders.js"

/** `Bearer <token>`, read from the raw header: the security decoder accepts any prefix. */
const bearerToken = (request: HttpServerRequest.HttpServerRequest): string | undefined =>
  /^Bearer +(\S+) *$/i.exec(request.headers["authorization"] ?? "")?.[1]

/** On every answer to an authenticated request, whatever it is. */
const rateLimitHeaders = (decision: RateDecision) =>
  ResponseHeaders.add({
    "x-ratelimit-limit": String(decision.limit),
    "x-ratelimit-remaining": String(decision.remaining),
    "x-ratelimit-reset": String(decision.reset),
    ...(decision.allowed ? {} : { "retry-after": String(decision.retryAfter) })
  })

/** `last_used_at` is written at most once a minute per key, off the request's path. */
const LAST_USED_EVERY_MS = 60_000

export interface ApiKeyAuthOptions {
  /** Failed authentications allowed per client address and minute, counted per instance; then 429. */
  readonly authFailuresPerMinute: number
}

/** A failure counted against `address`: 401 while within the limit, then 429 with `Retry-After`. */
const refuse = (failures: AuthFailures.AuthFailures, address: string, unauthorized: Unauthorized) =>
  Effect.gen(function*() {
    const decision = yield* failures.fail(address)
    if (decision.allowed) return yield* unauthorized
    yield* ResponseHeaders.retryAfter(decision.retryAfter)
    return yield* tooManyFailures(decision.retryAfter)
  })

/**
 * The request and the time, read from the fiber in one step of the runtime: every authenticated
 * request needs both, and reading each with its own `yield*` cost three steps more.
 */
const requestAndNow = Effect.withFiberRuntime<{
  readonly request: HttpServerRequest.HttpServerRequest
  readonly now: DateTime.Utc
}>((fiber) =>
  Effect.succeed({
    request: Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest),
    now: DateTime.unsafeMake(Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis())
  })
)

/** A key neither revoked nor expired at `now`. */
const isUsable = (key: Pick<ApiKey, "revoked_at" | "expires_at">, now: DateTime.Utc) =>
  key.revoked_at === null && (key.expires_at === null || DateTime.lessThan(now, key.expires_at))

const clientAddress = (request: HttpServerRequest.HttpServerRequest) =>
  Option.getOrElse(request.remoteAddress, () => "unknown")

/**
 * Bearer API keys: refused when unknown, revoked or expired, then counted against the key's
 * per-minute limit (headers on every authenticated response) and checked for scope. Failed
 * attempts are counted per client address, in memory: past the limit the address's failures get
 * 429 instead of 401, but a valid key from it is served as ever, since many clients may share it.
 */
export const ApiKeyAuthLive = (options: ApiKeyAuthOptions) => Layer.scoped(
  ApiKeyAuth,
  Effect.gen(function*() {
    const accounts = yield* AccountRepository
    const keys = yield* ApiKeyCache
    const limiter = yield* RateLimiter
    const failures = yield* AuthFailures.make({ perMinute: options.authFailuresPerMinute })
    const touches = yield* FiberSet.make()
    // When each key was last written: the keys used in the last minute, swept at most once a
    // minute, by the first touch after it. A key is written again once a minute has passed.
    let lastTouched = new Map<string, number>()
    let swept = 0
    /** Whether the key's `last_used_at` is due to be written (and, if so, counts it as written). */
    const touchDue = (keyId: ApiKeyId, now: DateTime.Utc) => {
      const at = DateTime.toEpochMillis(now)
      if (at - swept >= LAST_USED_EVERY_MS) {
        lastTouched = new Map([...lastTouched].filter(([, last]) => at - last < LAST_USED_EVERY_MS))
        swept = at
      }
      const last = lastTouched.get(keyId)
      if (last !== undefined && at - last < LAST_USED_EVERY_MS) return false
      lastTouched.set(keyId, at)
      return true
    }

    return ApiKeyAuth.of({
      // Made once, not a generator per request (see "Hot paths" in docs/development.md).
      apiKey: Effect.fnUntraced(function*() {
        const { now, request } = yield* requestAndNow
        const token = bearerToken(request)
        const found = token === undefined || apiKeyMode(token) === undefined
          ? Option.none()
          : yield* keys.lookup(hashApiKey(token))
        if (Option.isNone(found) || !isUsable(found.value.key, now)) {
          return yield* refuse(failures, clientAddress(request), new Unauthorized())
        }
        const { key, user } = found.value
        const decision = yield* limiter.consume(`key:${key.id}`, user.requests_per_minute)
        yield* rateLimitHeaders(decision)
        if (!decision.allowed) return yield* RateLimited.of(decision.retryAfter)
        const needed = request.method === "GET" || request.method === "HEAD" ? "intents:read" : "intents:write"
        if (!key.scopes.includes(needed)) return yield* new Forbidden()
        if (touchDue(key.id, now)) yield* FiberSet.run(touches, accounts.touchApiKey(key.id, now))
        return {
          user,
          keyId: key.id,
          mode: key.mode,
          scopes: key.scopes,
          owner: { userId: user.id, mode: key.mode }
        }
      })
    })
  })
)

const digest = (value: string) => Crypto.createHash("sha256").update(value).digest()

export interface AdminAuthOptions {
  /** Wrong tokens allowed per client address and minute, counted per instance; then 429. */
  readonly failuresPerMinute: number
}

/**
 * The operator API: `Bearer $ADMIN_TOKEN`, compared in constant time; without a token it is closed.
 * Wrong tokens are counted per client address (429 past the limit); the right one always passes.
 */
export const AdminAuthLive = (adminToken: Option.Option<Redacted.Redacted<string>>, options: AdminAuthOptions) =>
  Layer.scoped(
    AdminAuth,
    Effect.gen(function*() {
      const failures = yield* AuthFailures.make({ perMinute: options.failuresPerMinute })
      return AdminAuth.of({
        adminToken: () =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            if (Option.isNone(adminToken)) {
              return yield* new Unauthorized({ detail: "The operator API is disabled: set ADMIN_TOKEN to enable it" })
            }
            const token = bearerToken(request)
            if (token === undefined || !Crypto.timingSafeEqual(digest(token), digest(Redacted.value(adminToken.value)))) {
              return yield* refuse(failures, clientAddress(request), new Unauthorized({ detail: "Invalid admin token" }))
            }
          })
      })
    })
  )
