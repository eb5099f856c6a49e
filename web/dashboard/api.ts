import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import { DashboardApi } from "../../src/api/DashboardApi.js"
import { CSRF_HEADER } from "../../src/domain/Login.js"

/** The session's CSRF token: sent on every call once signed in (the server ignores it on reads). */
let csrfToken = ""

export const setCsrfToken = (token: string) => {
  csrfToken = token
}

const makeClient = HttpApiClient.make(DashboardApi, {
  baseUrl: location.origin,
  transformClient: HttpClient.mapRequest((request) =>
    csrfToken === "" ? request : HttpClientRequest.setHeader(request, CSRF_HEADER, csrfToken)
  )
})

export type DashboardClient = Effect.Effect.Success<typeof makeClient>

const client: DashboardClient = Effect.runSync(Effect.provide(makeClient, FetchHttpClient.layer))

/** Why a call failed, as a person reads it: the API's `detail` whenever there is one. */
export interface Problem {
  readonly tag: string
  readonly detail: string
}

const tagOf = (error: unknown): string =>
  Predicate.hasProperty(error, "_tag") && Predicate.isString(error._tag) ? error._tag : "Error"

export const problemOf = (error: unknown): Problem => {
  if (Predicate.hasProperty(error, "detail") && Predicate.isString(error.detail)) {
    return { tag: tagOf(error), detail: error.detail }
  }
  if (Predicate.isTagged(error, "ResponseError") && Predicate.hasProperty(error, "response")) {
    const response = error.response
    const status = Predicate.hasProperty(response, "status") && Predicate.isNumber(response.status) ? response.status : 0
    if (status === 401) return { tag: "SessionRequired", detail: "Sign in to continue" }
    return { tag: "ResponseError", detail: `The service answered with an unexpected status (${status}). Try again.` }
  }
  if (Predicate.isTagged(error, "RequestError")) {
    return { tag: "RequestError", detail: "The service cannot be reached. Check your connection and try again." }
  }
  return { tag: tagOf(error), detail: "Something went wrong. Try again." }
}

let onSessionLost: () => void = () => {}

/** What to do when a call answers 401: the app sends the browser to the sign-in page. */
export const whenSessionLost = (f: () => void) => {
  onSessionLost = f
}

/** One call of the typed client: its value, or the problem to show next to the form or page. */
export const run = <A, E>(
  f: (client: DashboardClient) => Effect.Effect<A, E>
): Promise<Either.Either<A, Problem>> =>
  f(client).pipe(
    Effect.mapError(problemOf),
    Effect.catchAllDefect((defect) => Effect.fail(problemOf(defect))),
    Effect.either,
    Effect.runPromise
  ).then((result) => {
    if (Either.isLeft(result) && result.left.tag === "SessionRequired") onSessionLost()
    return result
  })

/** What a `ConfirmDialog` confirms with: the call's problem, or null once `onDone` has had its value. */
export const doneOrProblem = async <A>(
  call: Promise<Either.Either<A, Problem>>,
  onDone: (value: A) => void
): Promise<Problem | null> => {
  const result = await call
  if (Either.isLeft(result)) return result.left
  onDone(result.right)
  return null
}
