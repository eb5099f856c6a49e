import * as Headers from "@effect/platform/Headers"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as GlobalValue from "effect/GlobalValue"

/**
 * Headers that the request's answer carries, whatever writes it (a handler, an error the API
 * encodes, a defect turned into a 500): added on the request's fiber by middlewares and handlers,
 * and written by the one pre-response handler that the edge installs ({@link writeAll}). Not a
 * pre-response handler each: a second handler on the same fiber makes the runtime compare the two
 * by hash, which puts the handler functions of every request in a global weak map. Undefined
 * where the edge does not run (a route served without it): there each {@link add} installs a
 * pre-response handler of its own.
 */
export const CurrentResponseHeaders: FiberRef.FiberRef<Headers.Headers | undefined> = GlobalValue.globalValue(
  Symbol.for("trade-intent-router/CurrentResponseHeaders"),
  () => FiberRef.unsafeMake<Headers.Headers | undefined>(undefined)
)

const setHeaders = (headers: Headers.Input) =>
  HttpApp.appendPreResponseHandler((_, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))

/** Adds headers to whatever answer the request gets (a header added twice keeps the later value). */
export const add = (headers: Headers.Input): Effect.Effect<void> =>
  FiberRef.getWith(CurrentResponseHeaders, (gathered) =>
    gathered === undefined
      ? setHeaders(headers)
      : FiberRef.set(CurrentResponseHeaders, Headers.setAll(gathered, headers)))

/**
 * Installs the request's one pre-response handler, starting from `own` (the edge's headers, known
 * when the request starts); it writes them with those added meanwhile, as the answer is written.
 */
export const writeAll = (own: Headers.Input): Effect.Effect<void> =>
  Effect.zipRight(
    FiberRef.set(CurrentResponseHeaders, Headers.fromInput(own)),
    HttpApp.appendPreResponseHandler((_, response) =>
      FiberRef.getWith(CurrentResponseHeaders, (gathered) =>
        Effect.succeed(gathered === undefined ? response : HttpServerResponse.setHeaders(response, gathered))))
  )
