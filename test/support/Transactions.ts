import * as SqlClient from "@effect/sql/SqlClient"
import { layer } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Services from "../../src/Services.js"
import * as Postgres from "./Postgres.js"
import * as TestServer from "./TestServer.js"

/**
 * A suite on the service's ports over a fresh PostgreSQL database, for tests of transactions side
 * by side (with {@link heldOpen}): PGlite runs one at a time.
 */
export const besideOthers = layer(Services.ports(TestServer.options).pipe(Layer.provideMerge(Postgres.layerFresh)), {
  timeout: 60_000,
  excludeTestServices: true
})

/**
 * Runs `statements` in a transaction left open on a pooled connection of its own (another session,
 * as another instance's transaction or a recording in flight would be): once they have run, the
 * transaction stays open, holding its locks and its transaction id, until the returned effect ends
 * it. Only PostgreSQL runs such a transaction beside others.
 */
export const heldOpen = <A, E, R>(statements: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const started = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const holder = yield* Effect.fork(
      sql.withTransaction(statements.pipe(
        Effect.zipRight(Deferred.succeed(started, undefined)),
        Effect.zipRight(Deferred.await(release))
      )).pipe(Effect.orDie)
    )
    yield* Deferred.await(started)
    return Deferred.succeed(release, undefined).pipe(Effect.zipRight(Fiber.join(holder)), Effect.asVoid)
  })
