import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import { RequestError, RouteNotFound } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Api } from "../api/Api.js"
import { malformedPathId } from "../api/ApiErrors.js"
import { ValidationError, WireErrors } from "../domain/Errors.js"
import { isDatabaseUnavailable } from "../sql/Availability.js"
import * as BoundedRequest from "./BoundedRequest.js"
import { hasBody, MAX_BODY_BYTES } from "./Edge.js"
import { errorResponse } from "./ErrorResponse.js"

type Issue = HttpApiDecodeError["issues"][number]

/** A 400's detail: the first issue, named by its field and the rule it breaks. */
export const describeIssue = (issue: Issue | undefined): string => {
  if (issue === undefined || issue.path.length === 0) return "Request body must be a JSON object"
  const field = issue.path.map(String).join(".")
  switch (issue._tag) {
    case "Missing":
      return `${field} is required`
    case "Unexpected":
      return `${field} is not a known field`
    default:
      return `${field} ${issue.message}`
  }
}

/** Whether a URL's path (not its query) holds a NUL, `%00` once decoded. */
export const hasNulInPath = (url: string): boolean => {
  const path = url.split("?")[0] ?? ""
  // Only an escape decodes to a NUL: most paths need no decoding at all.
  if (!path.includes("%")) return path.includes("\u0000")
  try {
    return decodeURIComponent(path).includes("\u0000")
  } catch {
    return /%00/i.test(path)
  }
}

/**
 * Every failure that is not one of the handlers' typed errors becomes the error body: a malformed
 * id in a path the resource's 404, like an unknown id; other decode failures, malformed or refused
 * JSON a 400, a body over the limit a 413, unknown routes a 404, a database that cannot be
 * reached a 503 with `Retry-After`, anything unexpected a 500 that leaks nothing (the cause is
 * logged, never sent). A path holding a NUL names nothing: a 404 like an
 * unknown id, answered before the route runs, so no key check or query ever sees the NUL. The
 * routes read the body through `BoundedRequest`: at most `MAX_BODY_BYTES` of it, as strict JSON.
 */
export const layer = HttpApiBuilder.middleware(Api, (app) =>
  Effect.catchAllCause(
    // The request read from the fiber in the step that chooses: one step, not three.
    Effect.withFiberRuntime((fiber) => {
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      return hasNulInPath(request.url)
        ? errorResponse(WireErrors.NotFound)
        : !hasBody(request.headers)
        ? app // nothing to read: no bounded body to set up (most requests, every lookup)
        : Effect.flatMap(
          BoundedRequest.make(request, MAX_BODY_BYTES),
          (bounded) => Effect.provideService(app, HttpServerRequest.HttpServerRequest, bounded)
        )
    }),
    (cause) => {
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
        const error: unknown = failure.value
        if (error instanceof HttpApiDecodeError) {
          const notFound = malformedPathId(error.issues[0])
          if (notFound !== undefined) return errorResponse(notFound)
          return Effect.fail(new ValidationError({ detail: describeIssue(error.issues[0]) }))
        }
        if (error instanceof RouteNotFound) return errorResponse(WireErrors.NotFound)
        return Effect.failCause(cause)
      }
      const defect = Cause.dieOption(cause)
      if (Option.isNone(defect)) return Effect.failCause(cause)
      if (defect.value instanceof RequestError && defect.value.reason === "Decode") {
        const refused = BoundedRequest.refusal(defect.value)
        if (refused?._tag === "BodyTooLarge") return errorResponse(WireErrors.PayloadTooLarge)
        return Effect.fail(new ValidationError({ detail: refused?.detail ?? "Request body must be valid JSON" }))
      }
      if (isDatabaseUnavailable(defect.value)) {
        return Effect.zipRight(
          Effect.logWarning("database unavailable", cause),
          Effect.map(errorResponse(WireErrors.Unavailable), HttpServerResponse.setHeader("retry-after", "1"))
        )
      }
      return Effect.zipRight(
        Effect.logError("unexpected failure", cause),
        errorResponse(WireErrors.InternalError)
      )
    }
  ))
