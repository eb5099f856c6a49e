import * as Headers from "@effect/platform/Headers"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as GlobalValue from "effect/GlobalValue"
import * as Option from "effect/Option"
import { CurrentRequestId } from "../api/RequestId.js"

/**
 * Headers that the request's answer carries, whatever writes it (a handler, an error the API
 * encodes, a defect turned into a 500): added on the request's fiber by middlewares and handlers,
 * and written by one pre-response handler that every request of the server inherits
 * ({@link writtenOnEveryAnswer}), with the request's id. Not a pre-response handler each: a second
 * handler on the same fiber makes the runtime compare the two by hash, which puts the handler
 * functions of every request in a global weak map. Undefined where that server does not run (a
 * route served on a server of its own): there each {@link add} installs a pre-response handler.
 */
export const CurrentResponseHeaders: FiberRef.FiberRef<Headers.Headers | undefined> = GlobalValue.globalValue(
  Symbol.for("trade-intent-router/CurrentResponseHeaders"),
  () => FiberRef.unsafeMake<Headers.Headers | undefined>(undefined)
)

/** Adds headers to whatever answer the request gets (a header added twice keeps the later value). */
export const add = (headers: Headers.Input): Effect.Effect<void> =>
  // Read and chosen in one step, then one update: every authenticated request adds its headers.
  Effect.withFiberRuntime((fiber) =>
    fiber.getFiberRef(CurrentResponseHeaders) === undefined
      ? HttpApp.appendPreResponseHandler((_, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))
      : FiberRef.update(CurrentResponseHeaders, (gathered) => gathered === undefined ? gathered : Headers.setAll(gathered, headers))
  )

/** `Retry-After` on whatever answer the request gets: when to ask again, in seconds. */
export const retryAfter = (seconds: number): Effect.Effect<void> => add({ "retry-after": String(seconds) })

/** The request's id (`X-Request-Id`, once the edge has given it one), then the headers added. */
const writeGathered: HttpApp.PreResponseHandler = (_, response) =>
  Effect.withFiberRuntime((fiber) => {
    const requestId = fiber.getFiberRef(CurrentRequestId)
    const identified = requestId === "" ? response : HttpServerResponse.setHeader(response, "x-request-id", requestId)
    const gathered = fiber.getFiberRef(CurrentResponseHeaders)
    return Effect.succeed(gathered === undefined ? identified : HttpServerResponse.setHeaders(identified, gathered))
  })

/**
 * Runs `serving` (an effect that starts a server, whose requests inherit its fiber's FiberRefs)
 * with the headers of each request gathered and written on its answer, after any pre-response
 * handler already in place: installed once for the server, nothing per request.
 */
export const writtenOnEveryAnswer = <A, E, R>(serving: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  serving.pipe(
    Effect.locally(CurrentResponseHeaders, Headers.empty),
    Effect.locallyWith(HttpApp.currentPreResponseHandlers, (before) =>
      Option.some(Option.match(before, {
        onNone: () => writeGathered,
        onSome: (handler): HttpApp.PreResponseHandler => (request, response) =>
          Effect.flatMap(handler(request, response), (handled) => writeGathered(request, handled))
      })))
  )
