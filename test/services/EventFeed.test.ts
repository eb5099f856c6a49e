import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { EVENT_RETENTION, type EventCursor, FEED_START } from "../../src/domain/Event.js"
import type { Owner } from "../../src/domain/Ids.js"
import * as Services from "../../src/Services.js"
import { EventRepository } from "../../src/services/events/EventRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import * as Database from "../../src/sql/Database.js"
import { eventId, newIntent, seedUser } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"
import * as TestServer from "../support/TestServer.js"

const backends = [
  ["PGlite", Database.migrated(Database.pglite(undefined))],
  ["PostgreSQL", Postgres.layerFresh]
] as const

const retained = Effect.map(DateTime.now, DateTime.subtractDuration(EVENT_RETENTION))

/** An intent of `owner` created, which writes its `intent.created` event. */
const createIntent = (owner: Owner, brokerId: Parameters<typeof newIntent>[1]) =>
  Effect.flatMap(IntentRepository, (intents) =>
    Effect.flatMap(DateTime.now, (now) => intents.create(newIntent(owner, brokerId), { now, quota: undefined, eventId: eventId() })))

/**
 * The page after `after` once it lists something: a transaction in flight anywhere on the server
 * (another test's) holds events back meanwhile.
 */
const pageOnceListed = (owner: Owner, after: EventCursor) =>
  Effect.flatMap(EventRepository, (events) =>
    Effect.flatMap(retained, (since) => events.page(owner, { after, limit: 10, since })).pipe(
      Effect.filterOrFail((page) => page.items.length > 0, () => "nothing listed yet"),
      Effect.retry(Schedule.spaced("20 millis")),
      Effect.timeout("20 seconds")
    ))

for (const [name, database] of backends) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`the event feed on ${name}`, (it) => {
    it.effect("an event after the cursor is unread until a page lists it; one written before `since` is not unread", () =>
      Effect.gen(function*() {
        const events = yield* EventRepository
        const { testBroker, user } = yield* seedUser
        const owner: Owner = { userId: user.id, mode: "test" }
        expect(yield* events.unread(owner, FEED_START, yield* retained)).toBe(false)
        yield* createIntent(owner, testBroker.id)
        expect(yield* events.unread(owner, FEED_START, yield* retained)).toBe(true)
        const later = DateTime.addDuration(yield* DateTime.now, Duration.minutes(1))
        expect(yield* events.unread(owner, FEED_START, later)).toBe(false)
        const page = yield* pageOnceListed(owner, FEED_START)
        expect(page.items).toHaveLength(1)
        expect(yield* events.unread(owner, page.nextCursor, yield* retained)).toBe(false)
        // Another user's events are not this one's.
        const other = yield* seedUser
        yield* createIntent({ userId: other.user.id, mode: "test" }, other.testBroker.id)
        expect(yield* events.unread(owner, page.nextCursor, yield* retained)).toBe(false)
      }))
  })
}

layer(Services.ports(TestServer.options).pipe(Layer.provideMerge(Postgres.layerFresh)), { timeout: 60_000, excludeTestServices: true })(
  "the event feed on PostgreSQL, behind a transaction in flight",
  (it) => {
    it.effect("an event held back behind an older transaction stays unread once that one commits, until a page lists it", () =>
      Effect.gen(function*() {
        const events = yield* EventRepository
        const sql = yield* SqlClient.SqlClient
        const { testBroker, user } = yield* seedUser
        const owner: Owner = { userId: user.id, mode: "test" }
        const cursor = yield* events.head(owner)
        // An older transaction, its id taken, left open: it writes nothing for this user, so its
        // commit wakes none of this user's readers.
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const older = yield* Effect.fork(
          sql.withTransaction(Effect.gen(function*() {
            yield* sql`SELECT pg_current_xact_id()`
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(release)
          })).pipe(Effect.orDie)
        )
        yield* Deferred.await(started)
        yield* createIntent(owner, testBroker.id)
        const held = yield* events.page(owner, { after: cursor, limit: 10, since: yield* retained })
        expect(held.items).toEqual([])
        expect(yield* events.unread(owner, cursor, yield* retained)).toBe(true)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(older)
        // Listable now, or soon (other tests' transactions): either way not read yet.
        expect(yield* events.unread(owner, cursor, yield* retained)).toBe(true)
        const page = yield* pageOnceListed(owner, cursor)
        expect(page.items).toHaveLength(1)
        expect(yield* events.unread(owner, page.nextCursor, yield* retained)).toBe(false)
      }))
  }
)
