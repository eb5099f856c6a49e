import * as Cookies from "@effect/platform/Cookies"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { jsonOf, type Reply } from "./TestServer.js"

/** What a dashboard call answers: the raw reply and the cookies it set (with their attributes). */
export interface BrowserReply extends Reply {
  readonly setCookies: ReadonlyArray<Cookies.Cookie>
}

const SessionBody = Schema.Struct({ csrf_token: Schema.String })

/**
 * A browser without JavaScript's restrictions: a cookie jar kept across calls (cookies set with
 * Max-Age 0 are dropped), and the CSRF token of the last session it was given, sent on every
 * call unless told otherwise.
 */
export const make = () => {
  const jar = new Map<string, string>()
  let csrf: string | undefined

  const call = (
    method: "GET" | "POST" | "DELETE" | "PUT" | "PATCH",
    path: string,
    options: {
      readonly json?: unknown
      readonly headers?: Record<string, string>
      /** false: no `X-CSRF-Token`; a string: that token. */
      readonly csrf?: boolean | string
    } = {}
  ) =>
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      const token = options.csrf === false ? undefined : typeof options.csrf === "string" ? options.csrf : csrf
      let request = HttpClientRequest.make(method)(path.startsWith("/") ? path : `/dashboard/api/v1/${path}`).pipe(
        HttpClientRequest.setHeaders({
          ...(jar.size > 0 ? { cookie: [...jar].map(([name, value]) => `${name}=${value}`).join("; ") } : {}),
          ...(token === undefined ? {} : { "x-csrf-token": token }),
          ...options.headers
        })
      )
      if (options.json !== undefined) request = HttpClientRequest.bodyUnsafeJson(request, options.json)
      const response = yield* client.execute(request)
      const text = yield* response.text
      const body = jsonOf(text)
      const setCookies = Object.values(response.cookies.cookies)
      for (const cookie of setCookies) {
        if (cookie.value === "" || cookie.options?.maxAge === 0) jar.delete(cookie.name)
        else jar.set(cookie.name, cookie.value)
      }
      const session = Schema.decodeUnknownOption(SessionBody)(body)
      if (response.status < 300 && Option.isSome(session)) csrf = session.value.csrf_token
      return { status: response.status, headers: response.headers, body, text, setCookies } satisfies BrowserReply
    }).pipe(Effect.scoped, Effect.orDie)

  return {
    call,
    /** The value of a cookie in the jar. */
    cookie: (name: string) => jar.get(name),
    /** Puts a cookie in the jar, as another browser holding it would. */
    setCookie: (name: string, value: string) => void jar.set(name, value),
    get csrf() {
      return csrf
    }
  }
}

export type Browser = ReturnType<typeof make>

let counter = 0

/** A fresh email for a test user. */
export const email = (label = "user") => `${label}-${Date.now()}-${++counter}@example.com`

/** A new browser, signed up as a new user. */
export const signedUp = (label = "user") =>
  Effect.gen(function*() {
    const browser = make()
    const address = email(label)
    const reply = yield* browser.call("POST", "signup", {
      json: { email: address, name: label, password: "correct horse battery" }
    })
    if (reply.status !== 201) return yield* Effect.dieMessage(`sign-up answered ${reply.status}: ${reply.text}`)
    return { browser, email: address, password: "correct horse battery" }
  })
