import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Crypto from "node:crypto"
import { AdminAuth, ApiKeyAuth } from "../api/Security.js"
import { apiKeyMode } from "../domain/ApiKeyFormat.js"
import { Forbidden, RateLimited, tooManyFailures, Unauthorized } from "../domain/Auth.js"
import type { ApiKeyId } from "../domain/Ids.js"
import type { RateDecision } from "../domain/Limits.js"
import { AccountRepository } from "../services/accounts/AccountRepository.js"
import { ApiKeyCache } from "../services/accounts/ApiKeyCache.js"
import { hashApiKey } from "../services/accounts/Operators.js"
import { RateLimiter } from "../services/RateLimiter.js"

/** `Bearer <token>`, read from the raw header: the security decoder accepts any prefix. */
const bearerToken = (request: HttpServerRequest.HttpServerRequest): string | undefined =>
  /^Bearer +(\S+) *$/i.exec(request.headers["authorization"] ?? "")?.[1]

const rateLimitHeaders = (decision: RateDecision) =>
  HttpApp.appendPreResponseHandler((_, response) =>
    Effect.succeed(HttpServerResponse.setHeaders(response, {
      "x-ratelimit-limit": String(decision.limit),
      "x-ratelimit-remaining": String(decision.remaining),
      "x-ratelimit-reset": String(decision.reset),
      ...(decision.allowed ? {} : { "retry-after": String(decision.retryAfter) })
    }))
  )

const retryAfterHeader = (seconds: number) =>
  HttpApp.appendPreResponseHandler((_, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, "retry-after", String(seconds)))
  )

/** `last_used_at` is written at most once a minute per key, off the request's path. */
const LAST_USED_EVERY_MS = 60_000

export interface ApiKeyAuthOptions {
  /** Failed authentications allowed per client address and minute, across instances; then 429. */
  readonly authFailuresPerMinute: number
}

/**
 * Bearer API keys: looked up by hash, refused when revoked or expired, then counted against the
 * key's per-minute limit (headers on every authenticated response) and checked for scope. Failed
 * attempts are counted per client address; past the limit the address gets 429 without its key
 * even being looked up, until the window ends.
 */
export const ApiKeyAuthLive = (options: ApiKeyAuthOptions) => Layer.scoped(
  ApiKeyAuth,
  Effect.gen(function*() {
    const accounts = yield* AccountRepository
    const keys = yield* ApiKeyCache
    const limiter = yield* RateLimiter
    const touches = yield* FiberSet.make()
    const lastTouched = yield* Ref.make(new Map<string, number>())
    /** Addresses over their failure limit, until (Unix seconds) their window ends: no lookups meanwhile. */
    const blocked = yield* Ref.make(new Map<string, number>())

    const refuseIfBlocked = (address: string, now: DateTime.Utc) =>
      Effect.gen(function*() {
        const until = (yield* Ref.get(blocked)).get(address)
        if (until === undefined) return
        const seconds = until - Math.floor(DateTime.toEpochMillis(now) / 1000)
        if (seconds <= 0) {
          return yield* Ref.update(blocked, (map) => new Map([...map].filter(([blockedAddress]) => blockedAddress !== address)))
        }
        yield* retryAfterHeader(seconds)
        return yield* tooManyFailures(seconds)
      })

    const failed = (address: string) =>
      Effect.gen(function*() {
        const decision = yield* limiter.consume(`auth:${address}`, options.authFailuresPerMinute)
        if (decision.allowed) return yield* new Unauthorized()
        yield* Ref.update(blocked, (map) => new Map(map).set(address, decision.reset))
        yield* retryAfterHeader(decision.retryAfter)
        return yield* tooManyFailures(decision.retryAfter)
      })

    const touch = (keyId: ApiKeyId, now: DateTime.Utc) =>
      Effect.gen(function*() {
        const at = DateTime.toEpochMillis(now)
        const due = yield* Ref.modify(lastTouched, (map) => {
          const last = map.get(keyId)
          return last !== undefined && at - last < LAST_USED_EVERY_MS
            ? [false, map]
            : [true, new Map(map).set(keyId, at)]
        })
        if (due) yield* FiberSet.run(touches, accounts.touchApiKey(keyId, now))
      })

    return ApiKeyAuth.of({
      apiKey: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const address = Option.getOrElse(request.remoteAddress, () => "unknown")
          const now = yield* DateTime.now
          yield* refuseIfBlocked(address, now)
          const token = bearerToken(request)
          if (token === undefined || apiKeyMode(token) === undefined) return yield* failed(address)
          const found = yield* keys.lookup(hashApiKey(token))
          if (Option.isNone(found)) return yield* failed(address)
          const { key, user } = found.value
          if (key.revoked_at !== null || (key.expires_at !== null && !DateTime.lessThan(now, key.expires_at))) {
            return yield* failed(address)
          }
          const decision = yield* limiter.consume(`key:${key.id}`, user.requests_per_minute)
          yield* rateLimitHeaders(decision)
          if (!decision.allowed) return yield* RateLimited.of(decision.retryAfter)
          const needed = request.method === "GET" || request.method === "HEAD" ? "intents:read" : "intents:write"
          if (!key.scopes.includes(needed)) return yield* new Forbidden()
          yield* touch(key.id, now)
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

/** The operator API: `Bearer $ADMIN_TOKEN`, compared in constant time; without a token it is closed. */
export const AdminAuthLive = (adminToken: Option.Option<Redacted.Redacted<string>>) =>
  Layer.succeed(
    AdminAuth,
    AdminAuth.of({
      adminToken: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          if (Option.isNone(adminToken)) {
            return yield* new Unauthorized({ detail: "The operator API is disabled: set ADMIN_TOKEN to enable it" })
          }
          const token = bearerToken(request)
          if (token === undefined || !Crypto.timingSafeEqual(digest(token), digest(Redacted.value(adminToken.value)))) {
            return yield* new Unauthorized({ detail: "Invalid admin token" })
          }
        })
    })
  )
