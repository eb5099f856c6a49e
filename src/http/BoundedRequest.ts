import type * as Headers from "@effect/platform/Headers"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import { RequestError } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as UrlParams from "@effect/platform/UrlParams"
import * as Chunk from "effect/Chunk"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Inspectable from "effect/Inspectable"
import * as Stream from "effect/Stream"
import { Readable } from "node:stream"
import * as StrictJson from "../domain/StrictJson.js"

/** The body went over the limit: the request is answered 413 once the body has been read to its end. */
export class BodyTooLarge extends Data.TaggedError("BodyTooLarge")<{}> {}

/** The body is JSON, but JSON that must be refused: `detail` names the field and the rule. */
export class BodyRefused extends Data.TaggedError("BodyRefused")<{ readonly detail: string }> {}

/**
 * A request whose body is read once, at most `maxBytes` of it kept, and whose JSON is strict.
 *
 * A body over the limit is still read to its end (and dropped) before the failure: a server that
 * stops reading a body it has not finished resets the connection, and the client never sees the
 * 413. `json` refuses what `JSON.parse` would accept with a loss: a key named twice, a NUL in a
 * string, a number it would round.
 */
class BoundedRequest extends Inspectable.Class implements HttpServerRequest.HttpServerRequest {
  readonly [HttpServerRequest.TypeId]: HttpServerRequest.TypeId = HttpServerRequest.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId

  constructor(
    readonly original: HttpServerRequest.HttpServerRequest,
    readonly body: Effect.Effect<Uint8Array, RequestError>
  ) {
    super()
  }

  get source() {
    return this.original.source
  }
  get url() {
    return this.original.url
  }
  get originalUrl() {
    return this.original.originalUrl
  }
  get method() {
    return this.original.method
  }
  get cookies() {
    return this.original.cookies
  }
  get headers() {
    return this.original.headers
  }
  get remoteAddress() {
    return this.original.remoteAddress
  }
  get multipart() {
    return this.original.multipart
  }
  get multipartStream() {
    return this.original.multipartStream
  }
  get upgrade() {
    return this.original.upgrade
  }

  modify(options: {
    readonly url?: string
    readonly headers?: Headers.Headers
    readonly remoteAddress?: string
  }): HttpServerRequest.HttpServerRequest {
    return new BoundedRequest(this.original.modify(options), this.body)
  }

  get arrayBuffer(): Effect.Effect<ArrayBuffer, RequestError> {
    return Effect.map(this.body, (bytes) => bytes.slice().buffer)
  }

  get stream(): Stream.Stream<Uint8Array, RequestError> {
    return Stream.fromEffect(this.body)
  }

  get text(): Effect.Effect<string, RequestError> {
    return Effect.map(this.body, (bytes) => new TextDecoder().decode(bytes))
  }

  get json(): Effect.Effect<unknown, RequestError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({
        try: (): unknown => {
          if (text === "") return null
          const parsed: unknown = JSON.parse(text)
          const detail = StrictJson.problemOfParsed(text)
          if (detail !== undefined) throw new BodyRefused({ detail })
          return parsed
        },
        catch: (cause) => this.decodeError(cause)
      }))
  }

  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, RequestError> {
    return Effect.map(this.text, (text) => UrlParams.fromInput(new URLSearchParams(text)))
  }

  decodeError(cause: unknown) {
    return new RequestError({ request: this, reason: "Decode", cause })
  }

  /** Never the body: requests show up in logs. */
  toJSON(): unknown {
    return { _id: "@effect/platform/HttpServerRequest", method: this.method, url: this.originalUrl }
  }
}

const decodeError = (request: HttpServerRequest.HttpServerRequest, cause: unknown) =>
  new RequestError({ request, reason: "Decode", cause })

/**
 * Reads a Node request's body from its events, keeping the chunks while they stay within
 * `maxBytes` and dropping the rest. A request closed before its body ends fails the read.
 */
const readNode = (request: HttpServerRequest.HttpServerRequest, source: Readable, maxBytes: number) =>
  Effect.async<Uint8Array, RequestError>((resume) => {
    if (source.destroyed) {
      resume(Effect.fail(decodeError(request, new Error("the request was closed before its body was read"))))
      return
    }
    const chunks: Array<Buffer> = []
    let bytes = 0
    const onData = (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes <= maxBytes) chunks.push(chunk)
      else chunks.length = 0
    }
    const onEnd = () => {
      cleanup()
      resume(
        bytes > maxBytes
          ? Effect.fail(decodeError(request, new BodyTooLarge()))
          : Effect.succeed(Buffer.concat(chunks, bytes))
      )
    }
    const onError = (cause: unknown) => {
      cleanup()
      resume(Effect.fail(decodeError(request, cause)))
    }
    const onClose = () => onError(new Error("the request was closed before its body ended"))
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("close", onClose)
    }
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    source.once("close", onClose)
    return Effect.sync(cleanup)
  })

/** Reads any other request's body as a stream, with the same bound. */
const readStream = (request: HttpServerRequest.HttpServerRequest, maxBytes: number) =>
  Stream.runFold(
    request.stream,
    { chunks: Chunk.empty<Uint8Array>(), bytes: 0 },
    ({ bytes, chunks }, chunk) => {
      const total = bytes + chunk.length
      return { chunks: total > maxBytes ? Chunk.empty() : Chunk.append(chunks, chunk), bytes: total }
    }
  ).pipe(
    Effect.flatMap(({ bytes, chunks }) =>
      bytes > maxBytes
        ? Effect.fail(decodeError(request, new BodyTooLarge()))
        : Effect.succeed(Buffer.concat(Chunk.toReadonlyArray(chunks)))
    )
  )

/**
 * Reads a whole body, keeping it while it stays within `maxBytes`. A Node server's request is read
 * from its events: the same fold as a `Stream` without a stream's fibers per request, which cost a
 * creation a third of its CPU.
 */
const readBounded = (request: HttpServerRequest.HttpServerRequest, maxBytes: number) =>
  request.source instanceof Readable ? readNode(request, request.source, maxBytes) : readStream(request, maxBytes)

/**
 * `self` run at most once: the first run reads, later ones wait for its outcome (an interruption
 * included). `Effect.cached` does the same behind a lock and a clock read on every access, which
 * cost a creation several percent of its CPU.
 */
const once = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<Effect.Effect<A, E>> =>
  Effect.map(Deferred.make<A, E>(), (outcome) => {
    let started = false
    return Effect.suspend(() => {
      if (started) return Deferred.await(outcome)
      started = true
      return Effect.onExit(self, (exit) => Deferred.done(outcome, exit))
    })
  })

/** `request` with its body bounded to `maxBytes` (read lazily, once) and strict JSON. */
export const make = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number
): Effect.Effect<HttpServerRequest.HttpServerRequest> =>
  Effect.map(once(readBounded(request, maxBytes)), (body) => new BoundedRequest(request, body))

/** What a body refusal asks for: a 413, a 400 with a detail, or neither (not one of ours). */
export const refusal = (error: RequestError): BodyTooLarge | BodyRefused | undefined =>
  error.cause instanceof BodyTooLarge || error.cause instanceof BodyRefused ? error.cause : undefined
