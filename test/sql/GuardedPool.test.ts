import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import Pg from "pg"
import * as GuardedPool from "../../src/sql/GuardedPool.js"
import { PREPARED } from "../../src/sql/Prepared.js"
import * as Postgres from "../support/Postgres.js"

/** A guarded pool of two connections (a cancel needs one of its own) on a fresh database, ended afterwards. */
class Pool extends Effect.Service<Pool>()("test/GuardedPool", {
  scoped: Effect.flatMap(Postgres.freshDatabaseUrl, ({ url }) =>
    Effect.acquireRelease(
      Effect.sync(() => ({ pool: GuardedPool.make({ connectionString: url, max: 2 }) })),
      ({ pool }) => Effect.promise(() => pool.end())
    ))
}) {}

const connect = (pool: Pg.Pool) =>
  Effect.async<Pg.PoolClient>((resume) =>
    pool.connect((error, client) => resume(client === undefined ? Effect.die(error) : Effect.succeed(client)))
  )

/** What `@effect/sql-pg` sends through the pool to cancel an interrupted statement. */
const cancel = (pool: Pg.Pool, pid: number) =>
  Effect.async<void>((resume) => {
    pool.query(`SELECT pg_cancel_backend(${pid})`, () => resume(Effect.void))
  })

const pidOf = (client: Pg.PoolClient) =>
  Effect.map(Effect.promise(() => client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")), (r) => r.rows[0]?.pid ?? -1)

layer(Layer.fresh(Pool.Default), { timeout: 60_000 })("the guarded pool", (it) => {
  it.effect("the connection of a statement cancelled is closed when given back, never reused", () =>
    Effect.gen(function*() {
      const { pool } = yield* Pool
      const client = yield* connect(pool)
      const pid = yield* pidOf(client)
      // A statement stuck (here, asleep) is still cancelled on the server.
      const running = Effect.either(Effect.tryPromise(() => client.query("SELECT pg_sleep(5)")))
      const later = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100))) // real time: not the TestClock
      const [outcome] = yield* Effect.all([running, Effect.zipRight(later, cancel(pool, pid))], { concurrency: 2 })
      expect(outcome._tag).toBe("Left")
      client.release()
      // Given back, the connection was closed: the pool's one connection is a new session.
      const next = yield* connect(pool)
      expect(yield* pidOf(next)).not.toBe(pid)
      next.release()
    }))

  it.effect("a cancel for a connection no longer checked out changes nothing: it is reused as usual", () =>
    Effect.gen(function*() {
      const { pool } = yield* Pool
      const first = yield* connect(pool)
      const pid = yield* pidOf(first)
      first.release()
      yield* cancel(pool, pid)
      const again = yield* connect(pool)
      expect(yield* pidOf(again)).toBe(pid)
      expect((yield* Effect.promise(() => again.query("SELECT 1 AS one"))).rows).toEqual([{ one: 1 }])
      again.release()
      // Other statements through the pool go on as before.
      expect((yield* Effect.promise(() => pool.query("SELECT 2 AS two"))).rows).toEqual([{ two: 2 }])
    }))

  it.effect("a statement marked prepared is named: parsed once per connection, answering as before; others are not kept", () =>
    Effect.gen(function*() {
      const { pool } = yield* Pool
      const client = yield* connect(pool)
      // The calling convention of @effect/sql-pg: text, values, callback.
      const send = (text: string, values: ReadonlyArray<unknown>) =>
        Effect.async<ReadonlyArray<unknown>, Error>((resume) => {
          const callback = (error: Error | undefined, result: Pg.QueryResult | undefined) =>
            resume(error === undefined || error === null ? Effect.succeed(result?.rows ?? []) : Effect.fail(error))
          Reflect.apply(client.query, client, [text, values, callback])
        })
      const marked = `${PREPARED} SELECT $1::int + 1 AS n`
      expect(yield* send(marked, [1])).toEqual([{ n: 2 }])
      expect(yield* send(marked, [41])).toEqual([{ n: 42 }])
      expect(yield* send("SELECT $1::int * 2 AS n", [21])).toEqual([{ n: 42 }])
      const kept = yield* send("SELECT name, statement FROM pg_prepared_statements", [])
      expect(kept).toEqual([{ name: expect.stringMatching(/^tir_[0-9a-f]{24}$/), statement: marked }])
      // A wrong value fails that call alone; the named statement serves the next.
      expect((yield* Effect.either(send(marked, ["x"])))._tag).toBe("Left")
      expect(yield* send(marked, [2])).toEqual([{ n: 3 }])
      client.release()
    }))
})
