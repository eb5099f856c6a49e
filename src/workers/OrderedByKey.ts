import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import type * as Scope from "effect/Scope"

/** Effects run by what they are about: see {@link make}. */
export interface OrderedByKey<E = never> {
  /**
   * Starts `effect` after every effect given before it for `key` has ended (however it ended),
   * and at once if none is in flight. Returns once it is started or waiting its turn; waits first
   * while `limit` effects are given and not yet ended.
   */
  readonly run: (key: string, effect: Effect.Effect<void, E>) => Effect.Effect<void>
  /** Fails as the first effect that failed; never ends otherwise. */
  readonly failure: Effect.Effect<void, E>
  /** Ends once every effect given so far has ended. */
  readonly idle: Effect.Effect<void>
}

/**
 * Runs effects keyed by what they are about: those of one key one after another, in the order
 * they were given; those of different keys at once, so that none waits for another key's. At
 * most `limit` are in flight or waiting their turn: beyond, `run` waits for one to end, so that a
 * slow consumer slows down whoever gives it work instead of piling that work up in memory. The
 * effects run as fibers of the scope: closing it interrupts those still running.
 */
export const make = <E = never>(limit: number): Effect.Effect<OrderedByKey<E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const fibers = yield* FiberSet.make<void, E>()
    const permits = yield* Effect.makeSemaphore(limit)
    // The last effect given for each key, until it ends.
    const last = new Map<string, Deferred.Deferred<void>>()

    const end = (key: string, done: Deferred.Deferred<void>) =>
      Effect.suspend(() => {
        if (last.get(key) === done) last.delete(key)
        return Effect.zipRight(Deferred.succeed(done, undefined), permits.release(1))
      })

    /** Queues `effect` behind its key's last one and starts it: run uninterrupted, so that no permit or turn is lost. */
    const start = Effect.fnUntraced(function*(key: string, effect: Effect.Effect<void, E>) {
      const before = last.get(key)
      const done = yield* Deferred.make<void>()
      last.set(key, done)
      const turn = before === undefined ? effect : Effect.zipRight(Deferred.await(before), effect)
      // Forked from an uninterruptible region, the effect itself stays interruptible.
      yield* FiberSet.run(fibers, Effect.ensuring(Effect.interruptible(turn), end(key, done)))
    })

    const run = (key: string, effect: Effect.Effect<void, E>) =>
      Effect.uninterruptibleMask((restore) => Effect.zipRight(restore(permits.take(1)), start(key, effect)))

    return { run, failure: FiberSet.join(fibers), idle: FiberSet.awaitEmpty(fibers) }
  })
