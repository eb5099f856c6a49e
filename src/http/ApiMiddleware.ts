import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import { RequestError, RouteNotFound } from "@effect/platform/HttpServerError"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Api } from "../api/Api.js"
import { edgeErrors } from "../api/ApiErrors.js"
import { ValidationError } from "../domain/Errors.js"
import { isDatabaseUnavailable } from "../sql/Availability.js"
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

/**
 * Every failure that is not one of the handlers' typed errors becomes the error body: decode
 * failures and malformed JSON a 400, unknown routes a 404, a database that cannot be reached a
 * 503 with `Retry-After`, anything unexpected a 500 that leaks nothing (the cause is logged,
 * never sent).
 */
export const layer = HttpApiBuilder.middleware(Api, (app) =>
  Effect.catchAllCause(app, (cause) => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error: unknown = failure.value
      if (error instanceof HttpApiDecodeError) {
        return Effect.fail(new ValidationError({ detail: describeIssue(error.issues[0]) }))
      }
      if (error instanceof RouteNotFound) return errorResponse(edgeErrors.notFound)
      return Effect.failCause(cause)
    }
    const defect = Cause.dieOption(cause)
    if (Option.isNone(defect)) return Effect.failCause(cause)
    if (defect.value instanceof RequestError && defect.value.reason === "Decode") {
      return Effect.fail(new ValidationError({ detail: "Request body must be valid JSON" }))
    }
    if (isDatabaseUnavailable(defect.value)) {
      return Effect.zipRight(
        Effect.logWarning("database unavailable", cause),
        Effect.map(errorResponse(edgeErrors.unavailable), HttpServerResponse.setHeader("retry-after", "1"))
      )
    }
    return Effect.zipRight(
      Effect.logError("unexpected failure", cause),
      errorResponse(edgeErrors.internal)
    )
  }))
