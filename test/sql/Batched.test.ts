import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Batched from "../../src/sql/Batched.js"

describe("Batched", () => {
  it.scoped("item 12: calls beyond the bound fail at once instead of queueing while the batches in flight are slow", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const batches: Array<ReadonlyArray<number>> = []
      const call = yield* Batched.make(
        (inputs: ReadonlyArray<number>) =>
          Effect.as(Deferred.await(release), inputs.map((n) => Exit.succeed(n * 10))).pipe(
            Effect.tap(() => Effect.sync(() => batches.push(inputs)))
          ),
        { maxBatch: 1, concurrency: 1, whenFull: { capacity: 2, error: () => "full" as const } }
      )
      // One call in flight, two waiting: the queue is full.
      const waiting = yield* Effect.forEach([1, 2, 3], (n) => Effect.fork(call(n)))
      yield* Effect.yieldNow({ priority: 1_000 })
      expect(yield* Effect.flip(call(4))).toBe("full")
      yield* Deferred.succeed(release, undefined)
      expect(yield* Effect.forEach(waiting, Fiber.join)).toEqual([10, 20, 30])
      expect(batches).toEqual([[1], [2], [3]])
      // Room again once the queue drains.
      expect(yield* call(5)).toBe(50)
    }))
})
