import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import { DashboardAuth, sessionCookie } from "../api/DashboardApi.js"
import { CSRF_HEADER, CsrfRejected, DEVICE_COOKIE, SessionRequired } from "../domain/Login.js"
import { csrfToken, Logins, SESSION_IDLE } from "../services/logins/Logins.js"

/** The URL customers reach the service at (`PUBLIC_URL`): cookies are `Secure` when it is https. */
export class PublicUrl extends Context.Reference<PublicUrl>()("PublicUrl", {
  defaultValue: (): Option.Option<URL> => Option.none()
}) {}

/** Whether anyone may sign up (`SIGNUP=open`), or only the operator creates accounts (`closed`). */
export class SignupPolicy extends Context.Reference<SignupPolicy>()("SignupPolicy", {
  defaultValue: (): "open" | "closed" => "open"
}) {}

const SAFE_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS"])

/**
 * A browser's `Origin` must be the service's own: `PUBLIC_URL`'s origin when set, else the
 * request's `Host`. Requests without one (same-origin GETs, non-browser clients) pass: the CSRF
 * token guards them.
 */
export const sameOrigin = (publicUrl: Option.Option<URL>) => Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const origin = request.headers["origin"]
  if (origin === undefined) return true
  let host: string
  try {
    host = new URL(origin).host
  } catch {
    return false
  }
  return Option.match(publicUrl, {
    onNone: () => host === request.headers["host"],
    onSome: (url) => origin === url.origin
  })
})

/** Refuses a browser request from another site: sign-up and login have no session to hold a token yet. */
export const requireSameOrigin = (publicUrl: Option.Option<URL>) =>
  Effect.flatMap(sameOrigin(publicUrl), (same) => same ? Effect.void : new CsrfRejected())

const tokensEqual = (a: string, b: string) => {
  const left = Crypto.createHash("sha256").update(a).digest()
  const right = Crypto.createHash("sha256").update(b).digest()
  return Crypto.timingSafeEqual(left, right)
}

const cookieOptions = (publicUrl: Option.Option<URL>, path: string, maxAge: Duration.Duration) => ({
  path,
  httpOnly: true,
  sameSite: "lax" as const,
  secure: Option.exists(publicUrl, (url) => url.protocol === "https:"),
  maxAge
})

/** The dashboard's cookies, `Secure` when the public URL is https. */
export const cookies = (publicUrl: Option.Option<URL>) => ({
  /** Sets the session cookie (the token itself appears nowhere else). */
  setSession: (token: string) =>
    HttpApiBuilder.securitySetCookie(
      sessionCookie,
      Redacted.make(token),
      cookieOptions(publicUrl, "/dashboard", SESSION_IDLE)
    ),
  clearSession: HttpApiBuilder.securitySetCookie(sessionCookie, "", cookieOptions(publicUrl, "/dashboard", Duration.zero)),
  /** Marks this browser as one where the login succeeded: only the login call ever reads it. */
  setDevice: (token: string) =>
    HttpApiBuilder.securitySetCookie(
      { ...sessionCookie, key: DEVICE_COOKIE },
      Redacted.make(token),
      cookieOptions(publicUrl, "/dashboard/api/v1/login", Duration.days(365))
    )
})

/**
 * The session cookie's session, live (401 otherwise), and on every state-changing call its CSRF
 * token in `X-CSRF-Token` from the service's own origin (403 otherwise).
 */
export const DashboardAuthLive = Layer.effect(
  DashboardAuth,
  Effect.gen(function*() {
    const logins = yield* Logins
    const publicUrl = yield* PublicUrl
    return DashboardAuth.of({
      session: (token) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const value = Redacted.value(token)
          const found = value === "" ? Option.none() : yield* logins.authenticate(value)
          if (Option.isNone(found)) return yield* new SessionRequired()
          if (!SAFE_METHODS.has(request.method)) {
            const sent = request.headers[CSRF_HEADER]
            if (sent === undefined || !tokensEqual(sent, csrfToken(value)) || !(yield* sameOrigin(publicUrl))) {
              return yield* new CsrfRejected()
            }
          }
          return {
            user: found.value.user,
            email: found.value.email,
            sessionId: found.value.id,
            csrfToken: csrfToken(value)
          }
        })
    })
  })
)
