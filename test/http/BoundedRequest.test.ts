import { describe, expect, layer } from "@effect/vitest"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Http from "node:http"
import * as BoundedRequest from "../../src/http/BoundedRequest.js"

const MAX_BYTES = 16

/** How each request's read ended on the server: its text, or why it failed. */
class Outcomes extends Effect.Service<Outcomes>()("test/BoundedRequest/Outcomes", {
  effect: Queue.unbounded<string>()
}) {}

/** Reads each body through `BoundedRequest` and answers with its text, 413 or 400. */
const app = Effect.gen(function*() {
  const outcomes = yield* Outcomes
  const request = yield* HttpServerRequest.HttpServerRequest
  const bounded = yield* BoundedRequest.make(request, MAX_BYTES)
  // At `/twice` the body is read twice: the second read gets what the first read.
  const read = request.url === "/twice"
    ? Effect.zipWith(bounded.text, bounded.text, (first, second) => `${first}|${second}`)
    : bounded.text
  return yield* read.pipe(
    Effect.tap((text) => Queue.offer(outcomes, `read ${text}`)),
    Effect.map((text) => HttpServerResponse.text(text)),
    Effect.catchAll((error) => {
      const refused = BoundedRequest.refusal(error)
      return Effect.as(
        Queue.offer(outcomes, refused?._tag ?? `failed ${error.reason}`),
        HttpServerResponse.empty({ status: refused?._tag === "BodyTooLarge" ? 413 : 400 })
      )
    })
  )
})

const ServerLive = HttpServer.serve(app).pipe(
  Layer.provideMerge(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" })),
  Layer.provideMerge(Outcomes.Default)
)

const portOf = Effect.map(HttpServer.HttpServer, (server) => server.address._tag === "TcpAddress" ? server.address.port : 0)

/** A chunked POST of `chunks`; the status, or `closed` when the client gives up after `abortAfter` chunks. */
const post = (port: number, chunks: ReadonlyArray<string>, abortAfter?: number, path = "/") =>
  Effect.async<number | "closed">((resume) => {
    const request = Http.request(
      { host: "127.0.0.1", port, path, method: "POST", headers: { "transfer-encoding": "chunked" } },
      (response) => {
        response.resume()
        response.on("end", () => resume(Effect.succeed(response.statusCode ?? 0)))
      }
    )
    request.on("error", () => resume(Effect.succeed("closed")))
    chunks.forEach((chunk, i) => {
      if (i === abortAfter) return
      if (abortAfter === undefined || i < abortAfter) request.write(chunk)
    })
    if (abortAfter === undefined) request.end()
    else setTimeout(() => request.destroy(), 50)
  })

layer(ServerLive, { timeout: 30_000 })("BoundedRequest on a Node server", (it) => {
  describe("reading a body", () => {
    it.effect("a body within the limit, in chunks, is read whole", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const port = yield* portOf
        expect(yield* post(port, ["hello ", "world"])).toBe(200)
        expect(yield* Queue.take(outcomes)).toBe("read hello world")
      }))

    it.effect("a body read twice is read from the request once: both reads get it", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const port = yield* portOf
        expect(yield* post(port, ["once"], undefined, "/twice")).toBe(200)
        expect(yield* Queue.take(outcomes)).toBe("read once|once")
      }))

    it.effect("a body over the limit is read to its end, then refused: the client gets the 413", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const port = yield* portOf
        expect(yield* post(port, ["0123456789", "0123456789", "0123456789"])).toBe(413)
        expect(yield* Queue.take(outcomes)).toBe("BodyTooLarge")
      }))

    it.effect("a client that closes halfway through its body fails the read; the server goes on serving", () =>
      Effect.gen(function*() {
        const outcomes = yield* Outcomes
        const port = yield* portOf
        expect(yield* post(port, ["hello ", "world"], 1)).toBe("closed")
        // The read ends as a failure instead of waiting for a body that never comes.
        expect(yield* Queue.take(outcomes).pipe(Effect.timeout("5 seconds"))).toBe("failed Decode")
        expect(yield* post(port, ["again"])).toBe(200)
        expect(yield* Queue.take(outcomes)).toBe("read again")
      }))
  })
})
