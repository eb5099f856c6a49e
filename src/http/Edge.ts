import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import { CurrentRequestId } from "../api/RequestId.js"
import { WireErrors } from "../domain/Errors.js"
import { IdGenerator } from "../services/IdGenerator.js"
import { AccessLog } from "./AccessLog.js"
import { errorResponse } from "./ErrorResponse.js"
import * as HttpMetrics from "./HttpMetrics.js"

/**
 * Request bodies larger than this are refused with 413: before anything reads them when
 * `Content-Length` says so, once read to their end otherwise (a chunked body).
 */
export const MAX_BODY_BYTES = 64 * 1024

/** Whether a request carries a body: a non-zero `Content-Length`, or a `Transfer-Encoding`. */
export const hasBody = (headers: Readonly<Record<string, string | undefined>>) =>
  (headers["content-length"] !== undefined && headers["content-length"] !== "0") ||
  headers["transfer-encoding"] !== undefined

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && /^application\/json\s*(;|$)/i.test(contentType.trim())

/** What the edge refuses before any parsing: an oversized body, a body that is not JSON. */
const refusal = (request: HttpServerRequest.HttpServerRequest) => {
  const length = Number(request.headers["content-length"] ?? 0)
  if (length > MAX_BODY_BYTES) return WireErrors.PayloadTooLarge
  if (hasBody(request.headers) && !isJson(request.headers["content-type"])) return WireErrors.UnsupportedMediaType
  return undefined
}

/**
 * The outermost middleware, run on each request's own fiber: gives every request an id (the
 * `X-Request-Id` header and the `request_id` of error bodies), applies the edge limits, and logs
 * one line per request through `AccessLog`: method, path, status, duration and request id, never a
 * key or a body. It counts and times the request in the HTTP metrics too, under its route's
 * template. Its services are taken once, when the server starts.
 */
export const make = Effect.gen(function*() {
  const ids = yield* IdGenerator
  const accessLog = yield* AccessLog
  const record = HttpMetrics.recordWith(yield* HttpMetrics.RouteTemplates)
  return <R>(app: HttpApp.Default<never, R>): HttpApp.Default<never, R> =>
    Effect.flatMap(ids.uuid, (uuid) =>
      // The request and the clock read from the fiber in one step of the runtime: each `yield*` of
      // them, and of the clock's readings, was a step or more of every request.
      Effect.withFiberRuntime((fiber) => {
        const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
        const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
        const started = clock.unsafeCurrentTimeMillis()
        const requestId = `req_${uuid.replaceAll("-", "")}`
        const refused = refusal(request)
        // The app's answers get `X-Request-Id` from the server's pre-response handler
        // (`ResponseHeaders.writtenOnEveryAnswer`); an answer the edge makes itself skips that
        // handler, so it carries its own.
        const served = refused !== undefined
          ? Effect.map(errorResponse(refused), HttpServerResponse.setHeader("x-request-id", requestId))
          : app
        // Set, not scoped with `Effect.locally`: the request's fiber ends with it.
        return Effect.zipRight(FiberRef.set(CurrentRequestId, requestId), served).pipe(
          Effect.onExit((exit) => {
            const durationMs = clock.unsafeCurrentTimeMillis() - started
            const status = Exit.isSuccess(exit) ? exit.value.status : 500
            return Effect.zipRight(
              record(request, status, durationMs),
              accessLog.log({ method: request.method, path: request.url.split("?")[0] ?? "", status, durationMs, requestId })
            )
          })
        )
      }))
})
