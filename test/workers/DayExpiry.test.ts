import { expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import type { IntentId } from "../../src/domain/Ids.js"
import * as Services from "../../src/Services.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import * as Database from "../../src/sql/Database.js"
import * as RoutingWorker from "../../src/workers/RoutingWorker.js"
import { eventId, newIntent, seedUser } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"

const database = Database.migrated(Database.pglite(undefined))
const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

/** Real time passes (the database answers), test time stands still unless the test moves it. */
const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 150)))

layer(ports, { timeout: 60_000 })("day orders under TestClock", (it) => {
  it.scoped("a resting day order is canceled at the end of its UTC day, not a moment before", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2026-11-20T10:00:00.000Z"))
      // Long polls and leases: moving the clock hours ahead must not replay thousands of idle ticks.
      yield* Layer.build(
        RoutingWorker.layer({ retryDelays: [Duration.millis(10)], pollInterval: "6 hours", lease: "1 hour" })
      )
      const intents = yield* IntentRepository
      const { testBroker, user } = yield* seedUser
      const owner = { userId: user.id, mode: "test" as const }
      const input = newIntent(owner, testBroker.id, { order_type: "limit", limit_price: 90, time_in_force: "day" })
      yield* intents.create(input, { now: yield* DateTime.now, quota: undefined, eventId: eventId() })

      const current = (id: IntentId) => Effect.map(intents.findById(owner, id), Option.getOrThrow)
      const waitUntil = (predicate: (status: string, orders: number) => boolean) =>
        Effect.gen(function*() {
          for (let i = 0; i < 50; i++) {
            const intent = yield* current(input.id)
            if (predicate(intent.status, intent.orders.length)) return intent
            yield* TestClock.adjust("1 second")
            yield* settle
          }
          return yield* Effect.dieMessage("routing did not settle")
        })

      const resting = yield* waitUntil((_, orders) => orders > 0)
      expect(resting.status).toBe("pending")
      expect(resting.orders[0]?.status).toBe("new")

      yield* TestClock.setTime(Date.parse("2026-11-20T23:59:59.000Z"))
      yield* settle
      expect((yield* current(input.id)).status).toBe("pending")

      yield* TestClock.setTime(Date.parse("2026-11-21T00:00:00.500Z"))
      const expired = yield* waitUntil((status) => status === "canceled")
      expect(expired.status_reason).toBe("Order expired at the end of the day")
      expect(expired.orders[0]?.status).toBe("expired")
      // The worker slept until the sync job was due: the order expires at midnight exactly.
      expect(DateTime.formatIso(expired.updated_at)).toBe("2026-11-21T00:00:00.000Z")
    }))
})
