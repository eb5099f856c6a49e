import * as Schema from "effect/Schema"
import { User } from "./Account.js"
import { detail, rule, WireErrors } from "./Errors.js"

/** Passwords are at least this long; there is no other composition rule. */
export const MIN_PASSWORD_LENGTH = 10
/** Longer passwords are refused: hashing is deliberately slow, and its cost grows with the input. */
export const MAX_PASSWORD_LENGTH = 200

/** An email address, trimmed and lower-cased: one login per address, however it is typed. */
export const Email = Schema.compose(
  Schema.Trim,
  Schema.Lowercase
).pipe(
  Schema.compose(
    Schema.String.pipe(
      Schema.maxLength(254),
      Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/)
    )
  )
).annotations(rule("must be an email address"))

export const Password = Schema.String.pipe(
  Schema.minLength(MIN_PASSWORD_LENGTH),
  Schema.maxLength(MAX_PASSWORD_LENGTH)
).annotations(rule(`must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`))

/** What the signed-in browser knows of its session: who it is, and the token its changes carry. */
export class Session extends Schema.Class<Session>("Session")({
  user: User,
  email: Schema.String,
  /** Sent back as the `X-CSRF-Token` header of every state-changing call. */
  csrf_token: Schema.String
}) {}

/** The header that carries the session's CSRF token. */
export const CSRF_HEADER = "x-csrf-token"
/** The cookie that carries the session token. */
export const SESSION_COOKIE = "tir_session"
/** The cookie that marks a browser where a login has succeeded before (see {@link LoginThrottled}). */
export const DEVICE_COOKIE = "tir_device"

/** No session, or an expired or revoked one. */
export class SessionRequired extends Schema.TaggedError<SessionRequired>()("SessionRequired", {
  detail: detail(WireErrors.SessionRequired)
}) {}

/** Wrong email or password; which one is never said. */
export class InvalidLogin extends Schema.TaggedError<InvalidLogin>()("InvalidLogin", {
  detail: detail(WireErrors.InvalidLogin)
}) {}

/**
 * Too many failed logins for this email or from this address. A browser where this email has
 * logged in before is not held back by failures from elsewhere: it has its own, smaller count.
 */
export class LoginThrottled extends Schema.TaggedError<LoginThrottled>()("LoginThrottled", {
  retry_after: Schema.Int,
  detail: Schema.String
}) {
  static of(retryAfter: number) {
    return new LoginThrottled({
      retry_after: retryAfter,
      detail: `Too many failed sign-ins. Retry after ${retryAfter} seconds.`
    })
  }
}

/** A state-changing call without the session's CSRF token, or from another origin. */
export class CsrfRejected extends Schema.TaggedError<CsrfRejected>()("CsrfRejected", {
  detail: detail(WireErrors.CsrfRejected)
}) {}

export class SignupClosed extends Schema.TaggedError<SignupClosed>()("SignupClosed", {
  detail: detail(WireErrors.SignupClosed)
}) {}

export class EmailTaken extends Schema.TaggedError<EmailTaken>()("EmailTaken", {
  detail: detail(WireErrors.EmailTaken)
}) {}

/** The operator asked for a login for a user who has one. */
export class LoginExists extends Schema.TaggedError<LoginExists>()("LoginExists", {
  detail: detail(WireErrors.LoginExists)
}) {}
