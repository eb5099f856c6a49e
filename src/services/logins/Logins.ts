import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Crypto from "node:crypto"
import { type Tier, tierLimits, type User, UserNotFound } from "../../domain/Account.js"
import { Unprocessable } from "../../domain/Errors.js"
import { UserId } from "../../domain/Ids.js"
import { InvalidLogin, LoginThrottled } from "../../domain/Login.js"
import { AccountRepository } from "../accounts/AccountRepository.js"
import { IdGenerator } from "../IdGenerator.js"
import { LoginRepository } from "./LoginRepository.js"
import * as Passwords from "./Passwords.js"
import * as Tracing from "../../Tracing.js"

/** A session ends after this long without use. */
export const SESSION_IDLE = Duration.days(14)

/** How often a session's last use is written. */
const TOUCH_EVERY_MS = 60_000

/** Failed logins are counted in fixed windows of this length. */
const FAILURE_WINDOW_MS = 15 * 60 * 1000
/** Failed logins per window before 429s: per email, per address, and per trusted browser. */
export const FAILURE_LIMITS = { email: 10, address: 50, device: 10 } as const

const sha256 = (value: string) => Crypto.createHash("sha256").update(value).digest("hex")

/** The CSRF token of a session: derived from its token, so it needs no storage of its own. */
export const csrfToken = (sessionToken: string) =>
  Crypto.createHash("sha256").update(`csrf\u0000${sessionToken}`).digest("base64url")

/** A session just opened: the token goes into the cookie, and nowhere else. */
export interface OpenedSession {
  readonly token: string
  readonly user: User
  readonly email: string
  readonly csrfToken: string
}

/** Where a login attempt comes from: its address, and the browser's device token if it has one. */
export interface LoginOrigin {
  readonly address: string
  readonly deviceToken: string | undefined
}

/** The dashboard's accounts: sign-up, login with throttling, sessions and passwords. */
export class Logins extends Effect.Service<Logins>()("Logins", {
  effect: Effect.gen(function*() {
    const logins = yield* LoginRepository
    const accounts = yield* AccountRepository
    const ids = yield* IdGenerator
    const decoy = yield* Effect.cached(Passwords.decoy)

    const open = Effect.fnUntraced(function*(user: User, email: string) {
      const token = yield* ids.base62(43)
      yield* logins.createSession({
        id: yield* ids.uuid,
        token_hash: sha256(token),
        user_id: user.id,
        created_at: yield* DateTime.now
      })
      return { token, user, email, csrfToken: csrfToken(token) } satisfies OpenedSession
    }, Tracing.span("Logins.open"))

    const hashPassword = (password: string) =>
      Effect.flatMap(ids.hex(16), (salt) => Passwords.hash(password, Buffer.from(salt, "hex")))

    /** A new user on the free tier, with a login, signed in (whether sign-up is open is HTTP's setting). */
    const signup = Effect.fnUntraced(function*(input: {
      readonly email: string
      readonly name: string
      readonly password: string
    }) {
      const now = yield* DateTime.now
      const tier: Tier = "free"
      const user = yield* logins.signup({
        id: UserId.make(yield* ids.uuid),
        name: input.name,
        tier,
        requests_per_minute: tierLimits[tier].requestsPerMinute,
        intents_per_month: tierLimits[tier].intentsPerMonth,
        created_at: now
      }, { email: input.email, password_hash: yield* hashPassword(input.password), created_at: now })
      return yield* open(user, input.email)
    }, Tracing.span("Logins.signup"))

    /**
     * Checks an email and password. Failures are counted per email and per client address in
     * fixed windows. Past the email's limit, attempts get 429 until its window ends. Past the
     * address's limit, the password is still checked: a valid login passes (many people share an
     * address behind a NAT or a proxy, and one's failures must not lock the others out), a wrong
     * one gets 429. A browser where this email logged in before (its device token) is counted on
     * its own instead, so failures from elsewhere never lock its owner out of their account.
     */
    const login = Effect.fnUntraced(function*(
      input: { readonly email: string; readonly password: string },
      origin: LoginOrigin
    ) {
      const email = input.email.trim().toLowerCase()
      const now = yield* DateTime.now
      const at = DateTime.toEpochMillis(now)
      const windowStart = DateTime.unsafeMake(at - (at % FAILURE_WINDOW_MS))
      const throttled = LoginThrottled.of(
        Math.max(1, Math.ceil((DateTime.toEpochMillis(windowStart) + FAILURE_WINDOW_MS - at) / 1000))
      )
      const found = yield* logins.findLoginByEmail(email)
      const device = origin.deviceToken === undefined ? undefined : sha256(origin.deviceToken)
      const trusted = device !== undefined && Option.isSome(found) &&
        (yield* logins.isTrustedDevice(device, found.value.user_id))
      const buckets = trusted
        ? { account: `device:${device}`, accountLimit: FAILURE_LIMITS.device, address: undefined }
        : { account: `email:${sha256(email)}`, accountLimit: FAILURE_LIMITS.email, address: `address:${origin.address}` }
      const counted = buckets.address === undefined ? [buckets.account] : [buckets.account, buckets.address]
      const [accountFailures = 0, addressFailures = 0] = yield* logins.failures(counted, windowStart)
      if (accountFailures >= buckets.accountLimit) return yield* throttled

      const valid = Option.isSome(found)
        ? yield* Passwords.verify(input.password, found.value.password_hash)
        : yield* Effect.as(Effect.flatMap(decoy, (hash) => Passwords.verify(input.password, hash)), false)
      if (!valid || Option.isNone(found)) {
        yield* logins.recordFailure(counted, windowStart)
        return yield* (addressFailures >= FAILURE_LIMITS.address ? throttled : new InvalidLogin())
      }
      const user = yield* Effect.flatMap(accounts.findUser(found.value.user_id), Option.match({
        onNone: () => Effect.die(new Error("a login without its user")),
        onSome: Effect.succeed
      }))
      const deviceToken = trusted && origin.deviceToken !== undefined ? origin.deviceToken : yield* ids.base62(43)
      if (!trusted) yield* logins.trustDevice(sha256(deviceToken), user.id, now)
      return { session: yield* open(user, email), deviceToken }
    }, Tracing.span("Logins.login"))

    /** The live session of a token, its idle clock restarted; none if unknown, revoked or idle too long. */
    const authenticate = Effect.fnUntraced(function*(token: string) {
      const now = yield* DateTime.now
      const found = yield* logins.findSession(sha256(token), DateTime.subtractDuration(now, SESSION_IDLE))
      // Idle expiry counts in days: the last use is written at most once a minute, not per request.
      if (Option.isSome(found) && DateTime.distance(found.value.last_seen_at, now) >= TOUCH_EVERY_MS) {
        yield* logins.touchSession(found.value.id, now)
      }
      return found
    }, Tracing.span("Logins.authenticate"))

    /** A new password: every session of the user is revoked, and this browser gets a new one. */
    const changePassword = Effect.fnUntraced(function*(
      account: { readonly user: User; readonly email: string },
      input: { readonly current_password: string; readonly new_password: string }
    ) {
      const stored = yield* logins.findPasswordHash(account.user.id)
      const valid = Option.isSome(stored) && (yield* Passwords.verify(input.current_password, stored.value))
      if (!valid) return yield* new Unprocessable({ detail: "current_password is not the account's password" })
      yield* logins.setPassword(account.user.id, yield* hashPassword(input.new_password), yield* DateTime.now)
      return yield* open(account.user, account.email)
    }, Tracing.span("Logins.changePassword"))

    /** The operator's call: a login for an existing user. */
    const createLogin = Effect.fnUntraced(function*(userId: UserId, input: {
      readonly email: string
      readonly password: string
    }) {
      const user = yield* Effect.filterOrFail(accounts.findUser(userId), Option.isSome, () => new UserNotFound())
      const now = yield* DateTime.now
      yield* logins.createLogin({
        user_id: user.value.id,
        email: input.email,
        password_hash: yield* hashPassword(input.password),
        created_at: now
      })
      return { user_id: user.value.id, email: input.email, created_at: now }
    }, Tracing.span("Logins.createLogin"))

    return {
      signup,
      login,
      authenticate,
      changePassword,
      createLogin,
      logout: Effect.fnUntraced(function*(sessionId: string) {
        return yield* logins.revokeSession(sessionId, yield* DateTime.now)
      }, Tracing.span("Logins.logout")),
      logoutEverywhere: Effect.fnUntraced(function*(userId: UserId) {
        return yield* logins.revokeAllSessions(userId, yield* DateTime.now)
      }, Tracing.span("Logins.logoutEverywhere")),
      rename: Effect.fnUntraced(function*(userId: UserId, name: string) {
        const renamed = yield* accounts.renameUser(userId, name)
        if (Option.isNone(renamed)) return yield* Effect.die(new Error("a session without its user"))
        return renamed.value
      }, Tracing.span("Logins.rename"))
    } as const
  })
}) {}
