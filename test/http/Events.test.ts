import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import { EventFeedPage, EventTimeline } from "../../src/api/EventsApi.js"
import { IntentEvent } from "../../src/domain/Event.js"
import { IntentId } from "../../src/domain/Ids.js"
import { marketOrder, signUp } from "../support/Scenario.js"
import { bodyOf, client, ErrorBody, type Reply, send, WithId } from "../support/TestServer.js"
import { waitFor } from "../support/Waiting.js"
import { servers } from "./Backends.js"

const expectError = (reply: Reply, status: number, error_code: string, detail: string | RegExp) => {
  expect(reply.status).toBe(status)
  const body = bodyOf(ErrorBody, reply)
  expect(body.error_code).toBe(error_code)
  if (typeof detail === "string") expect(body.detail).toBe(detail)
  else expect(body.detail).toMatch(detail)
}

const get = (key: string, path: string) => send("GET", path, { key })

const page = (key: string, query = "") =>
  Effect.map(get(key, `/api/v1/events${query}`), (reply) => {
    expect(reply.status).toBe(200)
    return bodyOf(Schema.encodedSchema(EventFeedPage), reply)
  })

/** Every event readable now, page by page from `after` (`limit` a page): the events and the last cursor. */
const readAll = (key: string, after?: string, limit = 2) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    let cursor = after
    for (;;) {
      const next = yield* page(key, `?limit=${limit}${cursor === undefined ? "" : `&after=${cursor}`}`)
      ids.push(...next.items.map((event) => event.id))
      cursor = next.next_cursor
      if (!next.has_more) return { ids, cursor }
    }
  })

/**
 * `readAll` until it lists at least `count` events (25 s at most): a transaction in flight anywhere
 * on the PostgreSQL server, other tests' included, holds events back until it ends.
 */
const readUntil = (key: string, after: string | undefined, count: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1250; i++) {
      const read = yield* readAll(key, after, 2)
      if (read.ids.length >= count) return read
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`fewer than ${count} events listed after 25 s`)
  })

/** Creates a test intent on the mock that rests (symbol HOLD): one `intent.created` event. */
const resting = (key: string, brokerId: string, intentId: string) =>
  Effect.map(
    send("POST", "/api/v1/intents", { key, json: marketOrder(brokerId, { intent_id: intentId, symbol: "HOLD" }) }),
    (reply) => bodyOf(WithId, reply).id
  )

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`events API on ${name}`, (it) => {
    describe("GET /api/v1/events", () => {
      it.effect("every event of the caller's intents, oldest first, as webhooks deliver them; paged by cursor", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const created = bodyOf(WithId, yield* send("POST", "/api/v1/intents", { key: testKey, json: marketOrder(mockId) }))
          yield* waitFor(testKey, IntentId.make(created.id), (intent) => intent.status === "filled")
          yield* readUntil(testKey, undefined, 2)
          const first = yield* page(testKey)
          expect(first.items.map((event) => [event.type, event.data.id])).toEqual([
            ["intent.created", created.id],
            ["intent.filled", created.id]
          ])
          expect(first.has_more).toBe(false)
          expect(Object.keys(first.items[0] ?? {}).sort()).toEqual(["created_at", "data", "id", "type"])
          expect(first.items[1]?.data.status).toBe("filled")
          expect(first.items[0]?.data.status).toBe("pending")
          // Read one at a time: the same events, each once; then nothing new after the last cursor.
          const one = yield* page(testKey, "?limit=1")
          expect(one.items.map((event) => event.type)).toEqual(["intent.created"])
          expect(one.has_more).toBe(true)
          const two = yield* page(testKey, `?limit=1&after=${one.next_cursor}`)
          expect(two.items.map((event) => event.type)).toEqual(["intent.filled"])
          const none = yield* page(testKey, `?after=${first.next_cursor}`)
          expect(none).toEqual({ items: [], next_cursor: first.next_cursor, has_more: false })
          // The typed client reads the same pages, the timeline and one event, decoded.
          const { events } = yield* client(testKey)
          const typed = yield* events.listEvents({ urlParams: { limit: 1 } })
          expect(typed.items.map((event) => event.id)).toEqual([first.items[0]?.id])
          expect(typed.has_more).toBe(true)
          const timeline = yield* events.intentEvents({ path: { id: IntentId.make(created.id) } })
          expect(timeline.items.map((event) => event.type)).toEqual(["intent.created", "intent.filled"])
          const fetched = yield* events.getEvent({ path: { event_id: first.items[1]?.id ?? "" } })
          expect(fetched.data.status).toBe("filled")
        }))

      it.effect("paging while intents are created concurrently yields every event exactly once", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp({ tier: "enterprise" })
          const creating = yield* Effect.fork(
            Effect.forEach(
              Array.from({ length: 30 }, (_, i) => `concurrent-${i}`),
              (intentId) => resting(testKey, mockId, intentId),
              { concurrency: 5 }
            )
          )
          const seen: Array<string> = []
          let cursor: string | undefined
          while (seen.length < 30) {
            const next = yield* readAll(testKey, cursor, 3)
            seen.push(...next.ids)
            cursor = next.cursor
          }
          const ids = yield* Fiber.join(creating)
          expect(new Set(seen).size).toBe(seen.length)
          expect(seen).toHaveLength(30)
          const again = yield* readAll(testKey, undefined, 100)
          expect(again.ids).toEqual(seen)
          const timelines = yield* Effect.forEach(ids, (id) =>
            Effect.map(get(testKey, `/api/v1/intents/${id}/events`), (reply) => bodyOf(Schema.encodedSchema(EventTimeline), reply)))
          expect(timelines.flatMap((timeline) => timeline.items.map((event) => event.id)).sort()).toEqual([...seen].sort())
        }))

      it.effect("filters by type and by intent; another user's and the other mode's events are never listed", () =>
        Effect.gen(function*() {
          const ada = yield* signUp()
          const bob = yield* signUp()
          const filled = bodyOf(WithId, yield* send("POST", "/api/v1/intents", { key: ada.testKey, json: marketOrder(ada.mockId) }))
          const held = yield* resting(ada.testKey, ada.mockId, "held-one")
          yield* waitFor(ada.testKey, IntentId.make(filled.id), (intent) => intent.status === "filled")
          yield* readUntil(ada.testKey, undefined, 3)
          const created = yield* page(ada.testKey, "?type=intent.created")
          expect(created.items.map((event) => event.data.id)).toEqual([filled.id, held])
          const ofHeld = yield* page(ada.testKey, `?intent_id=${held}`)
          expect(ofHeld.items.map((event) => event.type)).toEqual(["intent.created"])
          expect((yield* page(bob.testKey)).items).toEqual([])
          expect((yield* page(ada.liveKey)).items).toEqual([])
          expect((yield* get(bob.testKey, `/api/v1/intents/${held}/events`)).status).toBe(404)
          const eventId = created.items[0]?.id ?? ""
          expect((yield* get(ada.testKey, `/api/v1/events/${eventId}`)).body).toEqual(created.items[0])
          expectError(yield* get(bob.testKey, `/api/v1/events/${eventId}`), 404, "not_found", "Event not found")
          expectError(yield* get(ada.liveKey, `/api/v1/events/${eventId}`), 404, "not_found", "Event not found")
        }))

      it.effect("400 for a bad cursor, limit, type or intent_id; 404 for an unknown event or intent; 401 without a key", () =>
        Effect.gen(function*() {
          const { testKey } = yield* signUp()
          const cursorRule = "after must be a cursor the events API returned (next_cursor, or an event's stream id)"
          expectError(yield* get(testKey, "/api/v1/events?after=abc"), 400, "validation_error", cursorRule)
          expectError(yield* get(testKey, `/api/v1/events?after=1_${"9".repeat(19)}`), 400, "validation_error", cursorRule)
          expectError(
            yield* get(testKey, "/api/v1/events?limit=101"),
            400,
            "validation_error",
            "limit must be an integer from 1 to 100"
          )
          expectError(
            yield* get(testKey, "/api/v1/events?type=intent.exploded"),
            400,
            "validation_error",
            /^type must be one of: intent\.created, /
          )
          expectError(
            yield* get(testKey, "/api/v1/events?intent_id=nope"),
            400,
            "validation_error",
            "intent_id must be a Trade Intent's id (a UUID)"
          )
          expectError(yield* get(testKey, "/api/v1/events/evt_unknown"), 404, "not_found", "Event not found")
          expectError(
            yield* get(testKey, `/api/v1/intents/${crypto.randomUUID()}/events`),
            404,
            "not_found",
            "Trade Intent not found"
          )
          expect((yield* send("GET", "/api/v1/events")).status).toBe(401)
        }))
    })
  })
}

// A transaction held open while later ones commit: only PostgreSQL runs transactions side by side.
const [, postgres] = servers
layer(postgres[1], { timeout: 60_000, excludeTestServices: true })("events API on PostgreSQL, commit order", (it) => {
  it.effect("an event whose transaction commits after later-numbered ones were listed is still listed after the cursor", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { mockId, testKey } = yield* signUp({ tier: "enterprise" })
      const first = yield* resting(testKey, mockId, "before-the-held-one")
      const before = yield* readUntil(testKey, undefined, 1)
      const heldId = `evt_held_${crypto.randomUUID().replaceAll("-", "")}`
      const inserted = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      // An event written, its transaction left open.
      const holding = yield* Effect.fork(
        sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO events (id, user_id, mode, intent_id, type, data, created_at)
                     SELECT ${heldId}, user_id, mode, intent_id, type, data, now() FROM events
                     WHERE intent_id = ${first} AND type = 'intent.created'`
          yield* Deferred.succeed(inserted, undefined)
          yield* Deferred.await(release)
        })).pipe(Effect.orDie)
      )
      yield* Deferred.await(inserted)
      const later = yield* Effect.forEach(["after-1", "after-2", "after-3"], (id) => resting(testKey, mockId, id))
      const whileHeld = yield* readAll(testKey, before.cursor, 100)
      // The later events committed, but wait behind the open transaction: the cursor stays before them.
      expect(whileHeld.ids).toEqual([])
      expect(whileHeld.cursor).toBe(before.cursor)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holding)
      const afterwards = yield* readUntil(testKey, whileHeld.cursor, 4)
      expect(afterwards.ids).toContain(heldId)
      expect(afterwards.ids).toHaveLength(4)
      const all = [...before.ids, ...afterwards.ids]
      expect(new Set(all).size).toBe(5)
      const timeline = yield* Effect.forEach(later, (id) =>
        Effect.map(get(testKey, `/api/v1/intents/${id}/events`), (reply) => bodyOf(Schema.encodedSchema(EventTimeline), reply)))
      expect(timeline.flatMap((t) => t.items.map((event) => event.id)).every((id) => afterwards.ids.includes(id))).toBe(true)
      expect(Schema.decodeUnknownSync(IntentEvent)((yield* get(testKey, `/api/v1/events/${heldId}`)).body).id).toBe(heldId)
    }))
})
