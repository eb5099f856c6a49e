import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as OrderedByKey from "../../src/workers/OrderedByKey.js"

/** An effect that notes its start, waits for `gate`, then notes its end. */
const step = (log: Array<string>, name: string, gate: Deferred.Deferred<void>) =>
  Effect.sync(() => void log.push(`${name} started`)).pipe(
    Effect.zipRight(Deferred.await(gate)),
    Effect.zipRight(Effect.sync(() => void log.push(`${name} ended`)))
  )

describe("effects ordered by key", () => {
  it.scoped("effects of different keys run at once; those of one key one after another, in the order given", () =>
    Effect.gen(function*() {
      const inOrder = yield* OrderedByKey.make(10)
      const log: Array<string> = []
      const [a1, a2, b1] = [yield* Deferred.make<void>(), yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      yield* inOrder.run("a", step(log, "a1", a1))
      yield* inOrder.run("a", step(log, "a2", a2))
      yield* inOrder.run("b", step(log, "b1", b1))
      yield* Effect.yieldNow()
      // b1 did not wait for a1; a2 did.
      expect(log).toEqual(["a1 started", "b1 started"])

      // a2 may finish first: it still starts only once a1 has ended.
      yield* Deferred.succeed(a2, undefined)
      yield* Deferred.succeed(b1, undefined)
      yield* Effect.yieldNow()
      expect(log).toEqual(["a1 started", "b1 started", "b1 ended"])
      yield* Deferred.succeed(a1, undefined)
      yield* inOrder.idle
      expect(log).toEqual(["a1 started", "b1 started", "b1 ended", "a1 ended", "a2 started", "a2 ended"])
    }))

  it.scoped("one key's next effect runs even when the one before it failed, and the failure is reported", () =>
    Effect.gen(function*() {
      const inOrder = yield* OrderedByKey.make<string>(10)
      const log: Array<string> = []
      const watching = yield* Effect.fork(inOrder.failure)
      yield* inOrder.run("a", Effect.fail("refused"))
      yield* inOrder.run("a", Effect.sync(() => void log.push("a2")))
      yield* inOrder.idle
      expect(log).toEqual(["a2"])
      expect(yield* Fiber.await(watching)).toEqual(Exit.fail("refused"))
    }))

  it.scoped("beyond the limit, giving another effect waits until one ends", () =>
    Effect.gen(function*() {
      const inOrder = yield* OrderedByKey.make(2)
      const log: Array<string> = []
      const gates = [yield* Deferred.make<void>(), yield* Deferred.make<void>()] as const
      yield* inOrder.run("a", step(log, "a", gates[0]))
      yield* inOrder.run("b", step(log, "b", gates[1]))
      const third = yield* Effect.fork(inOrder.run("c", Effect.sync(() => void log.push("c"))))
      yield* Effect.yieldNow()
      expect(third.unsafePoll()).toBeNull()
      expect(log).toEqual(["a started", "b started"])

      yield* Deferred.succeed(gates[1], undefined)
      yield* Fiber.join(third)
      yield* inOrder.idle.pipe(Effect.zipLeft(Deferred.succeed(gates[0], undefined), { concurrent: true }))
      expect(log).toEqual(["a started", "b started", "b ended", "c", "a ended"])
    }))

  it.scoped("closing the scope interrupts the effects still running", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const gate = yield* Deferred.make<void>()
      yield* Effect.scoped(Effect.gen(function*() {
        const inOrder = yield* OrderedByKey.make(10)
        yield* inOrder.run("a", step(log, "a", gate).pipe(Effect.onInterrupt(() => Effect.sync(() => void log.push("a interrupted")))))
        yield* Effect.yieldNow()
      }))
      expect(log).toEqual(["a started", "a interrupted"])
    }))
})
