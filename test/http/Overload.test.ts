import { expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { marketOrder, signUp } from "../support/Scenario.js"
import * as Postgres from "../support/Postgres.js"
import * as TestServer from "../support/TestServer.js"
import { send } from "../support/TestServer.js"

// A database too slow to take creations: a transaction elsewhere holds the intents table.
layer(TestServer.layer(Postgres.layerFresh, { creationQueue: 3 }), { timeout: 60_000, excludeTestServices: true })(
  "creations while the database is stalled, on PostgreSQL",
  (it) => {
    it.effect("item 12: beyond the bounded creation queue, 503 with Retry-After; every 201 is kept", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const user = yield* signUp({ requests_per_minute: 10_000 })
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* sql`LOCK TABLE intents IN EXCLUSIVE MODE`.pipe(
          Effect.zipRight(Deferred.succeed(locked, undefined)),
          Effect.zipRight(Deferred.await(release)),
          sql.withTransaction,
          Effect.fork
        )
        yield* Deferred.await(locked)
        const replies = yield* Effect.fork(Effect.forEach(
          Array.from({ length: 30 }, (_, i) => marketOrder(user.mockId, { intent_id: `stall-${i}` })),
          (order) => send("POST", "/api/v1/intents", { key: user.testKey, json: order }),
          { concurrency: "unbounded" }
        ))
        yield* Effect.sleep("1500 millis")
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        const answers = yield* Fiber.join(replies)
        const refused = answers.filter((reply) => reply.status === 503)
        const created = answers.filter((reply) => reply.status === 201)
        expect(refused.length).toBeGreaterThan(0)
        expect(created.length + refused.length).toBe(answers.length)
        for (const reply of refused) {
          expect(reply.headers["retry-after"]).toBe("1")
          expect(reply.body).toMatchObject({ error_code: "service_unavailable", request_id: reply.headers["x-request-id"] })
        }
        // Nothing refused was written; nothing accepted was lost.
        const [{ count }] = yield* sql<{ count: string }>`SELECT count(*)::text AS count FROM intents`
        expect(Number(count)).toBe(created.length)
      }))
  }
)
