import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { liveCreator } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"
import { heldOpen } from "../support/Transactions.js"
import { databases } from "../support/Databases.js"

const repositories = Layer.mergeAll(IntentRepository.layerSql(), AccountRepository.layerSql)

const usageOf = (userId: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ count: number; monthly_limit: number }>`SELECT count, monthly_limit FROM intent_usage WHERE user_id = ${userId}`
  )

for (const [name, database] of databases) {
  layer(repositories.pipe(Layer.provideMerge(database)), { timeout: 60_000, excludeTestServices: true })(
    `monthly quota on ${name}`,
    (it) => {
      it.effect("the database refuses a count past the limit it was counted against", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const { create, user } = yield* liveCreator(2)
          yield* create("a")
          yield* create("b")
          expect(yield* usageOf(user.id)).toEqual([{ count: 2, monthly_limit: 2 }])
          const refused = yield* Effect.flip(sql`UPDATE intent_usage SET count = count + 1 WHERE user_id = ${user.id}`)
          // The repository tells a creation over quota from any other failure by this code and name.
          expect(refused.cause).toMatchObject({ code: "23514", constraint: "intent_usage_within_limit" })
          expect(yield* usageOf(user.id)).toEqual([{ count: 2, monthly_limit: 2 }])
        }))
    }
  )
}

layer(repositories.pipe(Layer.provideMerge(Postgres.layerFresh)), { timeout: 60_000, excludeTestServices: true })(
  "monthly quota on PostgreSQL, racing",
  (it) => {
    it.effect("a count moved past the creation's snapshot fails its statement, and the creation alone is refused", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { create, user, written } = yield* liveCreator(3)
        yield* create("a")
        yield* create("b")
        // Another batch counts the user's last intent, and holds the count until it commits.
        const commit = yield* heldOpen(sql`UPDATE intent_usage SET count = count + 1 WHERE user_id = ${user.id}`)
        // This creation's statement sees the count before that batch's, finds room, and waits for the count's lock.
        const creation = yield* Effect.fork(Effect.flip(create("c")))
        yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`.pipe(
          Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: ([row]) => row?.n === 1 }),
          Effect.timeout("10 seconds")
        )
        yield* commit
        expect(yield* Fiber.join(creation)).toMatchObject({ _tag: "QuotaExceeded", retry_after: 60 })
        expect(yield* written).toBe(2)
        expect(yield* usageOf(user.id)).toEqual([{ count: 3, monthly_limit: 3 }])
      }))
  }
)
