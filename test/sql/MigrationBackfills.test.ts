import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Database from "../../src/sql/Database.js"
import * as Migrations from "../../src/sql/Migrations.js"
import { uuid } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"

const unmigrated = [
  ["PGlite", Database.pglite(undefined)],
  ["PostgreSQL", Layer.unwrapScoped(Effect.map(Postgres.freshDatabaseUrl, ({ url }) => Database.postgres(Redacted.make(url))))]
] as const

/** The migrations before the stored documents and the counts. */
const before = Migrator.fromRecord(Object.fromEntries(Object.entries(Migrations.records).filter(([key]) => key < "0015")))

describe("migrations that derive data from the intents", () => {
  it.live.each(unmigrated)("give the intents that existed before them their documents and counts, on %s", ([, database]) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* Migrator.make({})({ loader: before })
      const userId = uuid()
      const brokerId = uuid()
      const orderId = uuid()
      const [filled, pending] = [uuid(), uuid()]
      yield* sql`INSERT INTO users (id, name, tier, requests_per_minute, intents_per_month, created_at)
                 VALUES (${userId}, 'Ada', 'free', 60, 100, now())`
      yield* sql`INSERT INTO broker_connections (id, user_id, name, kind, mode, created_at)
                 VALUES (${brokerId}, ${userId}, 'mock', 'mock', 'test', now())`
      for (const [id, intentId, status] of [[filled, "old-1", "filled"], [pending, "old-2", "pending"]] as const) {
        yield* sql`INSERT INTO intents (id, user_id, mode, intent_id, symbol, side, quantity, order_type, time_in_force,
                     extended_hours, broker_id, status, created_at, updated_at)
                   VALUES (${id}, ${userId}, 'test', ${intentId}, 'AAPL', 'buy', 10, 'market', 'day', false, ${brokerId},
                     ${status}, now(), now())`
      }
      yield* sql`INSERT INTO orders (id, intent_id, client_order_id, broker_order_id, status, created_at, updated_at)
                 VALUES (${orderId}, ${filled}, 'old-order', 'b-1', 'filled', now(), now())`
      yield* sql`INSERT INTO fills (id, order_id, broker_fill_id, quantity, price, filled_at)
                 VALUES (${uuid()}, ${orderId}, 'f-1', 10, 100, now())`

      yield* Migrations.run

      const [row] = yield* sql<{ readonly document: string }>`SELECT document::text AS document FROM intents WHERE id = ${filled}`
      expect(JSON.parse(row?.document ?? "null")).toMatchObject({
        id: filled,
        intent_id: "old-1",
        status: "filled",
        orders: [{ broker_order_id: "b-1", fills: [{ quantity: 10, price: 100 }] }]
      })
      expect(yield* sql`SELECT id FROM intents WHERE document::text IS DISTINCT FROM intent_document(intents)::text`).toEqual([])
      expect(
        yield* sql<{ readonly status: string; readonly n: number }>`
          SELECT status, sum(n)::int AS n FROM intent_counts WHERE user_id = ${userId} AND mode = 'test'
          GROUP BY status ORDER BY status`
      ).toEqual([{ status: "filled", n: 1 }, { status: "pending", n: 1 }])
    }).pipe(Effect.provide(database), Effect.scoped), 60_000)
})
