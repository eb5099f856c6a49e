import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
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
        { name: "test_bound", maxBatch: 1, concurrency: 1, whenFull: { capacity: 2, error: () => "full" as const } }
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

  it.scoped("calls arriving while every batch is in flight gather into the next one, and tir_batch_size counts them", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const started = yield* Queue.unbounded<void>()
      const batches: Array<ReadonlyArray<number>> = []
      const call = yield* Batched.make(
        (inputs: ReadonlyArray<number>) =>
          Effect.sync(() => batches.push(inputs)).pipe(
            Effect.zipRight(Queue.offer(started, undefined)),
            Effect.zipRight(Deferred.await(release)),
            Effect.as(inputs.map((n) => n % 2 === 0 ? Exit.succeed(n) : Exit.fail(`odd ${n}`)))
          ),
        { name: "test_gather", maxBatch: 3, concurrency: 1 }
      )
      const first = yield* Effect.fork(call(0))
      yield* Queue.take(started)
      const rest = yield* Effect.forEach([1, 2, 3, 4], (n) => Effect.fork(Effect.either(call(n))))
      yield* Effect.yieldNow({ priority: 1_000 })
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(first)).toBe(0)
      // Each call gets its own answer, a failure included.
      expect((yield* Effect.forEach(rest, Fiber.join)).map((e) => e._tag === "Right" ? e.right : e.left))
        .toEqual(["odd 1", 2, "odd 3", 4])
      expect(batches).toEqual([[0], [1, 2, 3], [4]])
      const sizes = yield* Metric.value(Batched.batchSize.pipe(Metric.tagged("batch", "test_gather")))
      expect([sizes.count, sizes.sum, sizes.max]).toEqual([3, 5, 3])
    }))

  it.scoped("many inputs in one call share batches with other callers' and are answered in their order; beyond the bound each fails alone", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const started = yield* Queue.unbounded<void>()
      const batches: Array<ReadonlyArray<number>> = []
      const many = yield* Batched.makeMany(
        (inputs: ReadonlyArray<number>) =>
          Effect.sync(() => batches.push(inputs)).pipe(
            Effect.zipRight(Queue.offer(started, undefined)),
            Effect.zipRight(Deferred.await(release)),
            Effect.as(inputs.map((n) => n % 2 === 0 ? Exit.succeed(n * 10) : Exit.fail(`odd ${n}`)))
          ),
        { name: "test_many", maxBatch: 3, concurrency: 1, whenFull: { capacity: 6, error: () => "full" as const } }
      )
      const first = yield* Effect.fork(many([0]))
      yield* Queue.take(started)
      // While the first batch runs: five inputs of one call, two of another, one more than the bound.
      const five = yield* Effect.fork(many([1, 2, 3, 4, 5]))
      const two = yield* Effect.fork(many([6, 7]))
      yield* Effect.yieldNow({ priority: 1_000 })
      yield* Deferred.succeed(release, undefined)
      const answers = (exits: ReadonlyArray<Exit.Exit<number, string>>) =>
        exits.map(Exit.match({ onSuccess: (n) => n, onFailure: (cause) => String(Cause.squash(cause)) }))
      expect(answers(yield* Fiber.join(first))).toEqual([0])
      expect(answers(yield* Fiber.join(five))).toEqual(["odd 1", 20, "odd 3", 40, "odd 5"])
      expect(answers(yield* Fiber.join(two))).toEqual([60, "full"])
      expect(batches).toEqual([[0], [1, 2, 3], [4, 5, 6]])
      expect(yield* many([])).toEqual([])
    }))

  it.scoped("calls made in one turn of the event loop share a batch, though a batch could start with the first alone", () =>
    Effect.gen(function*() {
      const batches: Array<ReadonlyArray<number>> = []
      const call = yield* Batched.make(
        (inputs: ReadonlyArray<number>) => Effect.sync(() => (batches.push(inputs), inputs.map((n) => Exit.succeed(n)))),
        { name: "test_turn", maxBatch: 10, concurrency: 2 }
      )
      // A batch could start with the first call alone (every slot is free), but it waits for the
      // turn's other work: the later calls of the same turn join it.
      const first = yield* Effect.fork(call(0))
      yield* Effect.yieldNow({ priority: 1_000 })
      const rest = yield* Effect.forEach([1, 2], (n) => Effect.fork(call(n)))
      expect(yield* Effect.forEach([first, ...rest], Fiber.join)).toEqual([0, 1, 2])
      expect(batches).toEqual([[0, 1, 2]])
      // A call made in a later turn starts a batch of its own.
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
      expect(yield* call(3)).toBe(3)
      expect(batches).toEqual([[0, 1, 2], [3]])
    }))

  it.scoped("with a key, an input whose key is in a batch in flight waits for it to end, and inputs of other keys go ahead", () =>
    Effect.gen(function*() {
      const first = yield* Deferred.make<void>()
      const second = yield* Deferred.make<void>()
      const third = yield* Deferred.make<void>()
      const releases = [first, second, third]
      const started = yield* Queue.unbounded<void>()
      const batches: Array<ReadonlyArray<string>> = []
      const call = yield* Batched.make(
        (inputs: ReadonlyArray<string>) =>
          Effect.gen(function*() {
            const release = releases[batches.length]
            batches.push(inputs)
            yield* Queue.offer(started, undefined)
            if (release !== undefined) yield* Deferred.await(release)
            return inputs.map((input) => Exit.succeed(input))
          }),
        { name: "test_keyed", maxBatch: 10, concurrency: 2, key: (input) => input.slice(0, 1) }
      )
      const a1 = yield* Effect.fork(call("a1"))
      yield* Queue.take(started)
      // a2 waits for a1's batch though a slot is free; b1 takes that slot.
      const a2 = yield* Effect.fork(call("a2"))
      const b1 = yield* Effect.fork(call("b1"))
      yield* Queue.take(started)
      expect(batches).toEqual([["a1"], ["b1"]])
      yield* Deferred.succeed(first, undefined)
      expect(yield* Fiber.join(a1)).toBe("a1")
      yield* Queue.take(started)
      expect(batches).toEqual([["a1"], ["b1"], ["a2"]])
      yield* Deferred.succeed(second, undefined)
      yield* Deferred.succeed(third, undefined)
      expect([yield* Fiber.join(a2), yield* Fiber.join(b1)]).toEqual(["a2", "b1"])
    }))

  it.effect("when its scope closes, no caller is left waiting: inputs not started die, those in flight are interrupted", () =>
    Effect.gen(function*() {
      const started = yield* Queue.unbounded<void>()
      const scope = yield* Scope.make()
      const call = yield* Batched.make(
        (_: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<Exit.Exit<number>>> =>
          Effect.zipRight(Queue.offer(started, undefined), Effect.never),
        { name: "test_close", maxBatch: 1, concurrency: 1 }
      ).pipe(Scope.extend(scope))
      const inFlight = yield* Effect.fork(call(1))
      yield* Queue.take(started)
      const waiting = yield* Effect.fork(call(2))
      yield* Effect.yieldNow({ priority: 1_000 })
      yield* Scope.close(scope, Exit.void)
      expect(Exit.isInterrupted(yield* Fiber.await(inFlight))).toBe(true)
      const stopped = (exit: Exit.Exit<number>) =>
        Exit.isFailure(exit) && Cause.isDie(exit.cause) && String(Cause.squash(exit.cause)).includes("the batches have stopped")
      expect(stopped(yield* Fiber.await(waiting))).toBe(true)
      expect(stopped(yield* Effect.exit(call(3)))).toBe(true)
    }))

  it("rounds: no key twice in a round, each key's items in their order, each with its index", () => {
    const items = ["a1", "b1", "a2", "c1", "a3", "b2"]
    expect(Batched.rounds(items, (item) => item[0] ?? "")).toEqual([
      [[0, "a1"], [1, "b1"], [3, "c1"]],
      [[2, "a2"], [5, "b2"]],
      [[4, "a3"]]
    ])
    expect(Batched.rounds([], (item: string) => item)).toEqual([])
  })
})
