import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { EVENT_RETENTION, type EventCursor, FEED_START, TAIL_PAGE } from "../../src/domain/Event.js"
import type { Owner } from "../../src/domain/Ids.js"
import * as Services from "../../src/Services.js"
import { EventRepository } from "../../src/services/events/EventRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { batchesOf } from "../support/Batches.js"
import { eventId, newIntent, seedUser } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"
import { besideOthers, heldOpen } from "../support/Transactions.js"
import { databases } from "../support/Databases.js"

const retained = Effect.map(DateTime.now, DateTime.subtractDuration(EVENT_RETENTION))

/** An intent of `owner` created, which writes its `intent.created` event. */
const createIntent = (owner: Owner, brokerId: Parameters<typeof newIntent>[1]) =>
  Effect.flatMap(IntentRepository, (intents) =>
    Effect.flatMap(DateTime.now, (now) => intents.create(newIntent(owner, brokerId), { now, quota: undefined, eventId: eventId() })))

/**
 * The tail after `after` once it lists `count` events (at least one): a transaction in flight
 * anywhere on the server (another test's) holds events back meanwhile.
 */
const tailOnceListed = (owner: Owner, after: EventCursor, count = 1) =>
  Effect.flatMap(EventRepository, (events) =>
    events.tail(owner, after).pipe(
      Effect.filterOrFail((tail) => tail.items.length >= count, () => "not listed yet"),
      Effect.retry(Schedule.spaced("20 millis")),
      Effect.timeout("20 seconds")
    ))

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`the event feed on ${name}`, (it) => {
    it.effect("a tail lists the owner's events after the cursor, none past the retention, and nothing once read", () =>
      Effect.gen(function*() {
        const events = yield* EventRepository
        const sql = yield* SqlClient.SqlClient
        const { testBroker, user } = yield* seedUser
        const owner: Owner = { userId: user.id, mode: "test" }
        expect(yield* events.tail(owner, FEED_START)).toMatchObject({ items: [], hasMore: false, held: false })
        yield* createIntent(owner, testBroker.id)
        // An event of the same intent written after it but dated past the retention: left out.
        const old = DateTime.subtractDuration(yield* retained, Duration.days(1))
        yield* sql`INSERT INTO events (id, user_id, mode, intent_id, type, data, created_at)
                   SELECT ${eventId()}, user_id, mode, intent_id, type, data, ${DateTime.toDate(old)}
                   FROM events WHERE user_id = ${user.id}`
        const tail = yield* tailOnceListed(owner, FEED_START)
        expect(tail.items).toHaveLength(1)
        expect(JSON.parse(tail.items[0]!.json)).toMatchObject({ type: "intent.created", data: { broker_id: testBroker.id } })
        expect(tail.nextCursor).toEqual(tail.items[0]!.cursor)
        expect(yield* events.tail(owner, tail.nextCursor)).toMatchObject({ items: [], held: false })
        // Another user's events are not this one's.
        const other = yield* seedUser
        yield* createIntent({ userId: other.user.id, mode: "test" }, other.testBroker.id)
        expect(yield* events.tail(owner, tail.nextCursor)).toMatchObject({ items: [], held: false })
      }))

    it.effect("tails asked for at once share statements, and each gets its own reader's events", () =>
      Effect.gen(function*() {
        const events = yield* EventRepository
        const owners = yield* Effect.forEach(Array.from({ length: 10 }, (_, index) => index), () =>
          Effect.map(seedUser, ({ testBroker, user }) => ({ owner: { userId: user.id, mode: "test" } as const, brokerId: testBroker.id })))
        for (const [index, { brokerId, owner }] of owners.entries()) {
          yield* Effect.repeatN(createIntent(owner, brokerId), index % 3)
        }
        yield* Effect.forEach(owners, ({ owner }, index) => tailOnceListed(owner, FEED_START, index % 3 + 1))
        const { batches, calls, result: tails } = yield* batchesOf(
          "event_tail",
          Effect.forEach(owners, ({ owner }) => events.tail(owner, FEED_START), { concurrency: "unbounded" })
        )
        expect(calls).toBe(10)
        expect(batches).toBeLessThan(10)
        expect(tails.map((tail) => tail.items.length)).toEqual(owners.map((_, index) => index % 3 + 1))
        tails.forEach((tail, index) => {
          for (const item of tail.items) expect(JSON.parse(item.json).data.broker_id).toBe(owners[index]!.brokerId)
          expect(tail.nextCursor).toEqual(tail.items.at(-1)!.cursor)
        })
      }))

    it.effect("a tail takes at most a page and says there is more", () =>
      Effect.gen(function*() {
        const events = yield* EventRepository
        const { testBroker, user } = yield* seedUser
        const owner: Owner = { userId: user.id, mode: "test" }
        yield* Effect.repeatN(createIntent(owner, testBroker.id), TAIL_PAGE)
        // Once the last is listable too, the first tail takes a page and says there is more.
        const first = yield* events.tail(owner, FEED_START).pipe(
          Effect.filterOrFail((tail) => tail.hasMore, () => "not all listed yet"),
          Effect.retry(Schedule.spaced("20 millis")),
          Effect.timeout("20 seconds")
        )
        expect(first.items).toHaveLength(TAIL_PAGE)
        const rest = yield* tailOnceListed(owner, first.nextCursor)
        expect(rest).toMatchObject({ hasMore: false })
        expect(rest.items).toHaveLength(1)
      }))
  })
}

besideOthers(
  "the event feed on PostgreSQL, behind a transaction in flight",
  (it) => {
    it.effect("an event held back behind an older transaction is not listed but held, and listed once that one commits", () =>
      Effect.gen(function*() {
        const events = yield* EventRepository
        const sql = yield* SqlClient.SqlClient
        const { testBroker, user } = yield* seedUser
        const owner: Owner = { userId: user.id, mode: "test" }
        const cursor = yield* events.head(owner)
        // An older transaction, its id taken, left open: it writes nothing for this user, so its
        // commit wakes none of this user's readers.
        const endOlder = yield* heldOpen(sql`SELECT pg_current_xact_id()`)
        yield* createIntent(owner, testBroker.id)
        const held = yield* events.tail(owner, cursor)
        expect(held).toMatchObject({ items: [], nextCursor: cursor, held: true })
        const page = yield* events.page(owner, { after: cursor, limit: 10, since: yield* retained })
        expect(page.items).toEqual([])
        yield* endOlder
        // Listable now, or soon (other tests' transactions).
        const tail = yield* tailOnceListed(owner, cursor)
        expect(tail.items).toHaveLength(1)
        expect(yield* events.tail(owner, tail.nextCursor)).toMatchObject({ items: [], held: false })
      }))
  }
)
