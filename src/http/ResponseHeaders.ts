import * as Headers from "@effect/platform/Headers"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as GlobalValue from "effect/GlobalValue"

/**
 * Headers that every answer to the request carries, whatever writes it (a handler, an error the API
 * encodes, a defect turned into a 500): added by middlewares on the request's fiber, and written
 * by one pre-response handler that the edge installs with the request's own headers. Hot paths add
 * their headers here rather than with a pre-response handler of their own: a second handler on the
 * same fiber makes the runtime compare the two handlers by hash, which keeps an entry for each
 * handler in a global weak map (about 4% of a lookup's CPU, and a third more of its memory lived
 * long enough to be promoted).
 */
export const CurrentResponseHeaders: FiberRef.FiberRef<Headers.Headers> = GlobalValue.globalValue(
  Symbol.for("trade-intent-router/CurrentResponseHeaders"),
  () => FiberRef.unsafeMake(Headers.empty)
)

/** Adds headers to whatever answer the request gets. */
export const add = (headers: Headers.Input): Effect.Effect<void> =>
  FiberRef.update(CurrentResponseHeaders, Headers.setAll(headers))

/**
 * The request's one pre-response handler: `own` (the edge's headers, known when the request
 * starts), then those added meanwhile with {@link add}, read as the answer is written.
 */
export const writeAll = (own: Headers.Input): Effect.Effect<void> =>
  HttpApp.appendPreResponseHandler((_, response) =>
    Effect.withFiberRuntime((fiber) =>
      Effect.succeed(HttpServerResponse.setHeaders(
        HttpServerResponse.setHeaders(response, own),
        fiber.getFiberRef(CurrentResponseHeaders)
      ))
    )
  )
