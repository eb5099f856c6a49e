import { describe, expect, layer } from "@effect/vitest"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { IntentEvent } from "../../src/domain/Event.js"
import { StreamHeartbeat } from "../../src/services/events/EventStreams.js"
import * as Database from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"
import { marketOrder, signUp } from "../support/Scenario.js"
import { bodyOf, ErrorBody, send, WithId } from "../support/TestServer.js"
import * as TestServer from "../support/TestServer.js"

/** The test servers, their idle streams sending a heartbeat every 300 ms instead of 15 s. */
const HEARTBEAT = Duration.millis(300)
const streaming = [
  ["PGlite", Database.migrated(Database.pglite(undefined))],
  ["PostgreSQL", Postgres.layerFresh]
] as const

/** One Server-Sent Event as the client reads it: a comment, or an event with its id. */
type Frame =
  | { readonly _tag: "Comment"; readonly text: string }
  | { readonly _tag: "Event"; readonly id: string; readonly event: IntentEvent }

const decodeEvent = Schema.decodeUnknownSync(Schema.parseJson(IntentEvent))

const parseFrame = (block: string): Frame => {
  const lines = block.split("\n")
  const field = (name: string) => lines.find((line) => line.startsWith(`${name}: `))?.slice(name.length + 2)
  const data = field("data")
  return data === undefined
    ? { _tag: "Comment", text: lines.join("\n").replace(/^: ?/, "") }
    : { _tag: "Event", id: field("id") ?? "", event: decodeEvent(data) }
}

/**
 * Opens the stream for `key` and reads its frames into a queue until the returned fiber is
 * interrupted (which closes the connection). Fails if the answer is not a 200.
 */
const open = (key: string, options: { readonly headers?: Record<string, string>; readonly query?: string } = {}) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(
      HttpClientRequest.get(`/api/v1/events/stream${options.query ?? ""}`).pipe(
        HttpClientRequest.bearerToken(key),
        HttpClientRequest.setHeaders(options.headers ?? {})
      )
    )
    if (response.status !== 200) return yield* Effect.fail(new Error(`the stream answered ${response.status}`))
    expect(response.headers["content-type"]).toMatch(/^text\/event-stream/)
    const frames = yield* Queue.unbounded<Frame>()
    let buffer = ""
    const reader = yield* response.stream.pipe(
      Stream.decodeText(),
      Stream.runForEach((text) =>
        Effect.gen(function*() {
          buffer += text
          let end = buffer.indexOf("\n\n")
          while (end !== -1) {
            yield* Queue.offer(frames, parseFrame(buffer.slice(0, end)))
            buffer = buffer.slice(end + 2)
            end = buffer.indexOf("\n\n")
          }
        })
      ),
      Effect.fork
    )
    // The stream says it is open before anything else.
    expect(yield* Queue.take(frames)).toEqual({ _tag: "Comment", text: "connected" })
    return { frames, reader }
  })

/**
 * The next `count` events, comments skipped (25 s at most: a transaction in flight anywhere on the
 * PostgreSQL server, other tests' included, holds events back until it ends).
 */
const nextEvents = (frames: Queue.Queue<Frame>, count: number) =>
  Effect.gen(function*() {
    const events: Array<{ readonly id: string; readonly event: IntentEvent }> = []
    while (events.length < count) {
      const frame = yield* Queue.take(frames)
      if (frame._tag === "Event") events.push(frame)
    }
    return events
  }).pipe(Effect.timeoutFail({ duration: "25 seconds", onTimeout: () => new Error(`fewer than ${count} events came`) }), Effect.orDie)

/** The events among the frames that arrive within `wait`. */
const eventsWithin = (frames: Queue.Queue<Frame>, wait: Duration.DurationInput) =>
  Effect.zipRight(
    Effect.sleep(wait),
    Effect.map(Queue.takeAll(frames), (all) => [...all].filter((frame) => frame._tag === "Event"))
  )

const createMarket = (key: string, brokerId: string, intentId: string) =>
  Effect.map(send("POST", "/api/v1/intents", { key, json: marketOrder(brokerId, { intent_id: intentId }) }), (reply) => {
    expect(reply.status).toBe(201)
    return bodyOf(WithId, reply).id
  })

for (const [name, database] of streaming) {
  const server = TestServer.layer(database).pipe(Layer.provide(Layer.succeed(StreamHeartbeat, HEARTBEAT)))
  layer(server, { timeout: 60_000, excludeTestServices: true })(`event stream on ${name}`, (it) => {
    describe("GET /api/v1/events/stream", () => {
      it.scoped("each new event once, in commit order, its cursor as id; another user's stream sees none of them", () =>
        Effect.gen(function*() {
          const ada = yield* signUp()
          const bob = yield* signUp()
          const stream = yield* open(ada.testKey)
          const other = yield* open(bob.testKey)
          const id = yield* createMarket(ada.testKey, ada.mockId, "streamed-1")
          const events = yield* nextEvents(stream.frames, 2)
          expect(events.map((e) => [e.event.type, e.event.data.id])).toEqual([
            ["intent.created", id],
            ["intent.filled", id]
          ])
          expect(events[0]?.id).toMatch(/^\d+_\d+$/)
          expect(events[0]?.id).not.toBe(events[1]?.id)
          // What the stream sent is what GET /api/v1/events/{id} answers.
          const fetched = yield* send("GET", `/api/v1/events/${events[1]?.event.id}`, { key: ada.testKey })
          expect(Schema.decodeUnknownSync(IntentEvent)(fetched.body)).toEqual(events[1]?.event)
          expect(yield* eventsWithin(stream.frames, "400 millis")).toEqual([])
          expect(yield* eventsWithin(other.frames, "10 millis")).toEqual([])
          yield* Fiber.interrupt(stream.reader)
          yield* Fiber.interrupt(other.reader)
        }))

      it.scoped("resumes from Last-Event-ID, or ?after=, with exactly the events missed", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const first = yield* open(testKey)
          const x = yield* createMarket(testKey, mockId, "before-the-outage")
          const seen = yield* nextEvents(first.frames, 2)
          yield* Fiber.interrupt(first.reader)
          // While disconnected:
          const y = yield* createMarket(testKey, mockId, "during-the-outage")
          const resumed = yield* open(testKey, { headers: { "last-event-id": seen[1]?.id ?? "" } })
          const missed = yield* nextEvents(resumed.frames, 2)
          expect(missed.map((e) => [e.event.type, e.event.data.id])).toEqual([["intent.created", y], ["intent.filled", y]])
          expect(yield* eventsWithin(resumed.frames, "300 millis")).toEqual([])
          const fromQuery = yield* open(testKey, { query: `?after=${seen[0]?.id}` })
          const fromFirst = yield* nextEvents(fromQuery.frames, 3)
          expect(fromFirst.map((e) => [e.event.type, e.event.data.id])).toEqual([
            ["intent.filled", x],
            ["intent.created", y],
            ["intent.filled", y]
          ])
          yield* Fiber.interrupt(resumed.reader)
          yield* Fiber.interrupt(fromQuery.reader)
          const bad = yield* send("GET", "/api/v1/events/stream", { key: testKey, headers: { "last-event-id": "nope" } })
          expect(bad.status).toBe(400)
        }))

      it.scoped("an idle stream sends heartbeat comments", () =>
        Effect.gen(function*() {
          const { testKey } = yield* signUp()
          const stream = yield* open(testKey)
          const first = yield* Queue.take(stream.frames).pipe(Effect.timeout("2 seconds"))
          const second = yield* Queue.take(stream.frames).pipe(Effect.timeout("2 seconds"))
          expect([first, second]).toEqual([{ _tag: "Comment", text: "heartbeat" }, { _tag: "Comment", text: "heartbeat" }])
          yield* Fiber.interrupt(stream.reader)
        }))

      it.scoped("a key's 6th open stream gets 429; a closed one frees its place", () =>
        Effect.gen(function*() {
          const { testKey } = yield* signUp()
          const five = yield* Effect.forEach(Array.from({ length: 5 }), () => open(testKey))
          const sixth = yield* send("GET", "/api/v1/events/stream", { key: testKey })
          expect(sixth.status).toBe(429)
          expect(bodyOf(ErrorBody, sixth)).toMatchObject({
            error_code: "rate_limit_exceeded",
            detail: "At most 5 event streams may be open at once per API key"
          })
          const [closed, ...open4] = five
          if (closed !== undefined) yield* Fiber.interrupt(closed.reader)
          const again = yield* open(testKey).pipe(Effect.retry({ times: 50, schedule: Schedule.spaced("20 millis") }))
          yield* Effect.forEach([again, ...open4], (stream) => Fiber.interrupt(stream.reader))
        }))
    })
  })
}
