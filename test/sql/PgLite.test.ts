import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import * as PgLite from "../../src/sql/PgLite.js"

// One in-memory PGlite for the whole file; real clock so `Effect.sleep` really sleeps.
layer(PgLite.layer({}), { timeout: "30 seconds", excludeTestServices: true })("PgLite", (it) => {
  it.effect("round-trips parameters and parses values like pg", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const pglite = yield* PgLite.PgLiteClient
      yield* sql`CREATE TABLE typed (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        at timestamptz NOT NULL,
        amount numeric(20, 8) NOT NULL,
        big int8 NOT NULL,
        qty int4 NOT NULL,
        ratio float8 NOT NULL,
        active bool NOT NULL,
        meta jsonb NOT NULL,
        meta2 jsonb NOT NULL,
        bytes bytea NOT NULL,
        tags int8[] NOT NULL
      )`
      const at = new Date("2024-05-06T07:08:09.123Z")
      yield* sql`INSERT INTO typed (at, amount, big, qty, ratio, active, meta, meta2, bytes, tags) VALUES (
        ${at}, ${"12345.6789"}, ${9007199254740993n}, ${42}, ${0.5}, ${true},
        ${JSON.stringify({ side: "buy" })}, ${pglite.json({ nested: [1, 2] })}, ${new Uint8Array([1, 2, 255])},
        ${[1n, 2n]}
      )`
      const rows = yield* sql`SELECT * FROM typed`
      expect(rows).toHaveLength(1)
      const row = rows[0]!
      expect(typeof row.id).toBe("string")
      expect(row.at).toBeInstanceOf(Date)
      expect(row.at).toEqual(at)
      expect(row.amount).toBe("12345.67890000")
      expect(row.big).toBe("9007199254740993")
      expect(row.qty).toBe(42)
      expect(row.ratio).toBe(0.5)
      expect(row.active).toBe(true)
      expect(row.meta).toEqual({ side: "buy" })
      expect(row.meta2).toEqual({ nested: [1, 2] })
      expect(Buffer.isBuffer(row.bytes)).toBe(true)
      expect([...(row.bytes as Buffer)]).toEqual([1, 2, 255])
      expect(row.tags).toEqual(["1", "2"])

      const [scalars] = yield* sql`SELECT 5::int8 AS small, 1.50::numeric AS n, 3::int2 AS s,
        '2024-01-02 03:04:05.678'::timestamp AS ts, 'infinity'::timestamptz AS inf, NULL::int8 AS none`
      expect(scalars).toEqual({
        small: "5",
        n: "1.50",
        s: 3,
        ts: new Date(2024, 0, 2, 3, 4, 5, 678),
        inf: Infinity,
        none: null
      })
    }))

  it.effect("surfaces a unique violation as SqlError with the PostgreSQL code", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE uniq (id int4 PRIMARY KEY)`
      yield* sql`INSERT INTO uniq ${sql.insert({ id: 1 })}`
      const error = yield* Effect.flip(sql`INSERT INTO uniq ${sql.insert({ id: 1 })}`)
      expect(error).toBeInstanceOf(SqlError)
      expect(error.cause).toMatchObject({ code: "23505", constraint: "uniq_pkey" })
    }))

  it.effect("rolls back a failed transaction", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE tx_rollback (id int4)`
      const result = yield* sql`INSERT INTO tx_rollback VALUES (1)`.pipe(
        Effect.zipRight(Effect.fail("boom" as const)),
        sql.withTransaction,
        Effect.flip
      )
      expect(result).toBe("boom")
      expect(yield* sql`SELECT * FROM tx_rollback`).toEqual([])
    }))

  it.effect("rolls back only the inner savepoint of a nested transaction", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE tx_nested (id int4)`
      yield* Effect.gen(function*() {
        yield* sql`INSERT INTO tx_nested VALUES (1)`
        yield* sql`INSERT INTO tx_nested VALUES (2)`.pipe(
          Effect.zipRight(Effect.fail("inner")),
          sql.withTransaction,
          Effect.ignore
        )
        yield* sql`INSERT INTO tx_nested VALUES (3)`
      }).pipe(sql.withTransaction)
      expect(yield* sql`SELECT id FROM tx_nested ORDER BY id`).toEqual([{ id: 1 }, { id: 3 }])
    }))

  it.effect("serializes concurrent transactions (no lost update)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE counter (id int4 PRIMARY KEY, n int4 NOT NULL)`
      yield* sql`INSERT INTO counter VALUES (1, 0), (2, 0)`
      const bump = (id: number) =>
        Effect.gen(function*() {
          const [row] = yield* sql<{ n: number }>`SELECT n FROM counter WHERE id = ${id}`
          yield* Effect.sleep("50 millis")
          yield* sql`UPDATE counter SET n = ${row!.n + 1} WHERE id = ${id}`
        })

      // Same read-modify-write without a transaction: the statements interleave and one update is lost,
      // which is what makes the transactional assertion below meaningful.
      yield* Effect.all([bump(2), bump(2)], { concurrency: "unbounded" })
      expect(yield* sql`SELECT n FROM counter WHERE id = 2`).toEqual([{ n: 1 }])

      yield* Effect.all([sql.withTransaction(bump(1)), sql.withTransaction(bump(1))], { concurrency: "unbounded" })
      expect(yield* sql`SELECT n FROM counter WHERE id = 1`).toEqual([{ n: 2 }])
    }))

  it.effect("keeps other fibers' plain statements out of an open transaction", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE tx_isolation (id int4)`
      const tx = yield* Effect.fork(
        sql`INSERT INTO tx_isolation VALUES (1)`.pipe(
          Effect.zipRight(Effect.sleep("100 millis")),
          Effect.zipRight(Effect.fail("rollback")),
          sql.withTransaction
        )
      )
      yield* Effect.sleep("20 millis")
      yield* sql`INSERT INTO tx_isolation VALUES (2)`
      yield* Fiber.await(tx)
      expect(yield* sql`SELECT id FROM tx_isolation`).toEqual([{ id: 2 }])
    }))

  it.effect("delivers LISTEN/NOTIFY payloads", () =>
    Effect.gen(function*() {
      const pglite = yield* PgLite.PgLiteClient
      const channel = "Trade.Events"
      const received = yield* Effect.fork(pglite.listen(channel).pipe(Stream.take(2), Stream.runCollect))
      // Notify until the subscriber's LISTEN is in place and it has seen two payloads.
      const notifying = yield* Effect.fork(
        pglite.notify(channel, "hello").pipe(Effect.repeat(Schedule.spaced("20 millis")))
      )
      const payloads = yield* Fiber.join(received)
      yield* Fiber.interrupt(notifying)
      expect(Chunk.toReadonlyArray(payloads)).toEqual(["hello", "hello"])

      // Inside a transaction NOTIFY runs on the transaction connection (no deadlock), delivered at commit.
      const inTx = yield* Effect.fork(pglite.listen("tx_channel").pipe(Stream.take(1), Stream.runCollect))
      const committing = yield* Effect.fork(
        pglite.notify("tx_channel", "committed").pipe(
          pglite.withTransaction,
          Effect.repeat(Schedule.spaced("20 millis"))
        )
      )
      expect(Chunk.toReadonlyArray(yield* Fiber.join(inTx))).toEqual(["committed"])
      yield* Fiber.interrupt(committing)
    }))

  it.effect("returns arrays of values and runs multi-statement text", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      expect(yield* sql`SELECT 1 AS a, ${"x"}::text AS b, 2::int8 AS c`.values).toEqual([[1, "x", "2"]])
      yield* sql.unsafe("CREATE TABLE multi (id int4); INSERT INTO multi VALUES (1); INSERT INTO multi VALUES (2)")
      expect(yield* sql`SELECT count(*) AS n FROM multi`.values).toEqual([["2"]])
      expect(yield* sql`SELECT id FROM multi ORDER BY id`.stream.pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray)))
        .toEqual([{ id: 1 }, { id: 2 }])
    }))
})

describe("PgLite dataDir", () => {
  it.live("persists rows across close and reopen", () =>
    Effect.gen(function*() {
      const dataDir = yield* Effect.acquireRelease(
        Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "pglite-test-"))),
        (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
      )
      yield* Effect.scoped(Effect.gen(function*() {
        const sql = yield* PgLite.make({ dataDir })
        yield* sql`CREATE TABLE kept (id int4, label text)`
        yield* sql`INSERT INTO kept VALUES (${1}, ${"persisted"})`
      }))
      const rows = yield* Effect.scoped(Effect.flatMap(PgLite.make({ dataDir }), (sql) => sql`SELECT * FROM kept`))
      expect(rows).toEqual([{ id: 1, label: "persisted" }])
    }).pipe(Effect.scoped), 60_000)
})
