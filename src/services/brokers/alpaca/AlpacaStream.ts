import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { type RawData, WebSocket } from "ws"
import { AlpacaCredentialsRefused } from "./AlpacaClient.js"
import * as AlpacaSchemas from "./AlpacaSchemas.js"

/** How an Alpaca account signs in to its `trade_updates` stream. */
export interface StreamCredentials {
  readonly apiKeyId: string
  readonly apiSecretKey: Redacted.Redacted<string>
}

export interface Options {
  /** The first wait before reconnecting; 250 ms unless set. */
  readonly minBackoff?: Duration.DurationInput | undefined
  /** The longest wait before reconnecting; 10 seconds unless set. */
  readonly maxBackoff?: Duration.DurationInput | undefined
  /**
   * How often the connection is pinged; 10 seconds unless set. A connection that shows no sign of life
   * (no pong, no message) for two of these is dropped and made again.
   */
  readonly heartbeat?: Duration.DurationInput | undefined
}

/**
 * What the stream emits: `Connected` each time a connection is listening to `trade_updates` (the first
 * time and after every reconnection: events may have been missed in between), then each update.
 */
export type StreamEvent =
  | { readonly _tag: "Connected" }
  | { readonly _tag: "TradeUpdate"; readonly update: AlpacaSchemas.TradeUpdate }

/** The connection was lost or never made: a reconnection follows. */
class Disconnected extends Data.TaggedError("Disconnected")<{ readonly reason: string }> {}

/** What the socket reports, in order. */
type Signal =
  | { readonly _tag: "Open" }
  | { readonly _tag: "Message"; readonly text: string }
  | { readonly _tag: "Closed"; readonly reason: string }

const Envelope = Schema.parseJson(Schema.Struct({ stream: Schema.String, data: Schema.optional(Schema.Unknown) }))
const Authorization = Schema.Struct({ status: Schema.String })
const Listening = Schema.Struct({ streams: Schema.Array(Schema.String) })
const EventName = Schema.Struct({ event: Schema.String })

const CONNECTED: StreamEvent = { _tag: "Connected" }

/**
 * Messages read from the socket and not yet handled: at `PAUSE_AT` the socket is paused (its data
 * stays in the kernel's buffers and then Alpaca's, as TCP's flow control holds it back), and
 * resumed once they are down to `RESUME_AT`. A consumer slower than Alpaca (a slow database)
 * slows the reading instead of piling messages up in memory.
 */
const PAUSE_AT = 256
const RESUME_AT = 64

/** A WebSocket message's text, whichever way it was framed (text, binary, fragments). */
export const textOf = (data: RawData): string =>
  Array.isArray(data)
    ? Buffer.concat(data).toString("utf8")
    : Buffer.isBuffer(data)
    ? data.toString("utf8")
    : Buffer.from(new Uint8Array(data)).toString("utf8")

/**
 * One connection: authenticates, listens to `trade_updates`, emits `Connected` then the updates; fails
 * with `Disconnected` when the connection ends. Its socket and heartbeat end with the stream.
 */
const connection = (
  url: string,
  credentials: StreamCredentials,
  heartbeat: Duration.Duration
): Stream.Stream<StreamEvent, AlpacaCredentialsRefused | Disconnected> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const signals = yield* Queue.unbounded<Signal>()
    /** Whether the server showed a sign of life since the last heartbeat. */
    const liveness = { seen: true }
    /** Messages read and not yet handled, and whether the socket is paused for them (see `PAUSE_AT`). */
    const backlog = { messages: 0, paused: false }
    const socket = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const socket = new WebSocket(url)
        socket.on("open", () => {
          liveness.seen = true
          signals.unsafeOffer({ _tag: "Open" })
        })
        socket.on("message", (data: RawData) => {
          liveness.seen = true
          signals.unsafeOffer({ _tag: "Message", text: textOf(data) })
          if (++backlog.messages >= PAUSE_AT && !backlog.paused) {
            backlog.paused = true
            socket.pause()
          }
        })
        socket.on("pong", () => {
          liveness.seen = true
        })
        socket.on("ping", () => {
          liveness.seen = true
        })
        socket.on("error", (error: Error) => {
          signals.unsafeOffer({ _tag: "Closed", reason: error.message })
        })
        socket.on("close", (code: number) => {
          signals.unsafeOffer({ _tag: "Closed", reason: `closed (${code})` })
        })
        return socket
      }),
      (socket) =>
        Effect.sync(() => {
          socket.removeAllListeners()
          // A handshake aborted now still reports an error: it must not go unhandled.
          socket.on("error", () => {})
          socket.terminate()
        })
    )

    yield* Effect.forkScoped(Effect.gen(function*() {
      let missed = 0
      while (true) {
        yield* Effect.sleep(heartbeat)
        // A paused socket reads no pong: its silence says nothing about the server.
        if (liveness.seen || backlog.paused) missed = 0
        else missed++
        liveness.seen = false
        if (missed >= 2) {
          signals.unsafeOffer({ _tag: "Closed", reason: "no heartbeat" })
          socket.terminate()
          return
        }
        if (socket.readyState === WebSocket.OPEN) socket.ping()
      }
    }))

    const sendJson = (message: unknown) =>
      Effect.try({
        try: () => socket.send(JSON.stringify(message)),
        catch: () => new Disconnected({ reason: "could not send" })
      })

    const onMessage = (text: string): Effect.Effect<ReadonlyArray<StreamEvent>, AlpacaCredentialsRefused | Disconnected> =>
      Effect.gen(function*() {
        const envelope = Schema.decodeUnknownEither(Envelope)(text)
        if (Either.isLeft(envelope)) {
          yield* Effect.logWarning("Alpaca stream: a message that is not one of Alpaca's was skipped")
          return []
        }
        const { data, stream } = envelope.right
        if (stream === "authorization") {
          const authorization = Schema.decodeUnknownOption(Authorization)(data)
          if (Option.isSome(authorization) && authorization.value.status === "authorized") {
            yield* sendJson({ action: "listen", data: { streams: ["trade_updates"] } })
            return []
          }
          return yield* new AlpacaCredentialsRefused({
            detail: `Alpaca's trade_updates stream refused the credentials of key id ${credentials.apiKeyId}`
          })
        }
        if (stream === "listening") {
          const listening = Schema.decodeUnknownOption(Listening)(data)
          if (Option.isSome(listening) && listening.value.streams.includes("trade_updates")) return [CONNECTED]
          return yield* new Disconnected({ reason: "Alpaca did not listen to trade_updates" })
        }
        if (stream === "trade_updates") {
          const update = Schema.decodeUnknownEither(AlpacaSchemas.TradeUpdate)(data)
          if (Either.isRight(update)) return [{ _tag: "TradeUpdate", update: update.right }]
          const event = Option.match(Schema.decodeUnknownOption(EventName)(data), {
            onNone: () => "(none)",
            onSome: (named) => named.event
          })
          yield* Effect.logWarning("Alpaca stream: a trade update that could not be read was skipped").pipe(
            Effect.annotateLogs("event", event)
          )
          return []
        }
        return []
      })

    return Stream.fromQueue(signals).pipe(
      Stream.mapEffect((signal): Effect.Effect<ReadonlyArray<StreamEvent>, AlpacaCredentialsRefused | Disconnected> => {
        switch (signal._tag) {
          case "Open":
            return Effect.as(
              sendJson({
                action: "authenticate",
                data: { key_id: credentials.apiKeyId, secret_key: Redacted.value(credentials.apiSecretKey) }
              }),
              []
            )
          case "Message":
            if (--backlog.messages <= RESUME_AT && backlog.paused) {
              backlog.paused = false
              socket.resume()
            }
            return onMessage(signal.text)
          case "Closed":
            return Effect.fail(new Disconnected({ reason: signal.reason }))
        }
      }),
      Stream.flattenIterables
    )
  }))

/**
 * The `trade_updates` stream of one Alpaca account at `url` (e.g. `wss://paper-api.alpaca.markets/stream`).
 * A lost connection is made again after a jittered exponential back-off (from `minBackoff`, doubling, up
 * to `maxBackoff`; back to `minBackoff` once a connection listens), and `Connected` is emitted again.
 * Updates that cannot be read are logged (their event name only) and skipped. While more than a few hundred
 * messages wait for the consumer, the socket is not read (see `PAUSE_AT`). The stream fails only when
 * Alpaca refuses the credentials. Ending the stream closes its connection. The secret key is sent to
 * Alpaca and nowhere else.
 */
export const updates = (
  url: string,
  credentials: StreamCredentials,
  options: Options = {}
): Stream.Stream<StreamEvent, AlpacaCredentialsRefused> => {
  const minBackoff = Duration.decode(options.minBackoff ?? "250 millis")
  const maxBackoff = Duration.decode(options.maxBackoff ?? "10 seconds")
  const heartbeat = Duration.decode(options.heartbeat ?? "10 seconds")
  const backoff = Schedule.exponential(minBackoff, 2).pipe(
    Schedule.modifyDelay((_, delay) => Duration.min(delay, maxBackoff)),
    Schedule.jitteredWith({ min: 0.5, max: 1 }),
    Schedule.whileInput((error: AlpacaCredentialsRefused | Disconnected) => error._tag === "Disconnected")
  )
  return connection(url, credentials, heartbeat).pipe(
    Stream.tapError((error) =>
      error._tag === "Disconnected"
        ? Effect.logInfo("Alpaca stream: disconnected; reconnecting").pipe(Effect.annotateLogs("reason", error.reason))
        : Effect.void
    ),
    Stream.retry(backoff),
    Stream.catchTag("Disconnected", (error) => Stream.die(error))
  )
}
