import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as MetricSeries from "../MetricSeries.js"

/** How many calls each batch served, by what it batches. */
export const batchSize = Metric.histogram(
  "tir_batch_size",
  MetricBoundaries.fromIterable([1, 2, 5, 10, 20, 50, 100, 200, 500]),
  "Calls served by one batch (one statement or transaction), by batch: intent_create, intent_lookup, intent_page, rate_limit_lease, routing_record, routing_record_unlocked, mock_submit, event_tail."
)

export interface BatchedOptions<F> {
  /** Names the batches in the `tir_batch_size` metric. */
  readonly name: string
  /** The most calls one batch takes. */
  readonly maxBatch: number
  /** Batches in flight at once; calls that arrive meanwhile gather into the next one. */
  readonly concurrency: number
  /**
   * Bounds the calls waiting for a batch (while the batches in flight are slow): beyond `capacity`,
   * a call fails at once with `error()` instead of waiting. Unbounded unless set.
   */
  readonly whenFull?: { readonly capacity: number; readonly error: () => F } | undefined
}

/**
 * Waits for the end of the event loop's current turn (Node's check phase): the callbacks of the
 * I/O that is ready now (requests read, answers from the database) run first, and whatever they
 * add to a batch joins it.
 */
const endOfTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** The calls made together by one `many`: answered once every input's exit is in. */
interface Group<A, E> {
  readonly exits: Array<Exit.Exit<A, E>>
  remaining: number
  readonly done: Deferred.Deferred<ReadonlyArray<Exit.Exit<A, E>>>
}

/** One input waiting for a batch: its group, and its place in that group's answer. */
interface Entry<I, A, E> {
  readonly input: I
  readonly group: Group<A, E>
  readonly index: number
}

const settle = <A, E>({ group, index }: { readonly group: Group<A, E>; readonly index: number }, exit: Exit.Exit<A, E>) => {
  group.exits[index] = exit
  group.remaining -= 1
  if (group.remaining === 0) Deferred.unsafeDone(group.done, Exit.succeed(group.exits))
}

/**
 * Turns `run`, which serves many inputs in one go (one statement, one commit), into a function of
 * many calls at once: inputs that arrive together (in one turn of the event loop, or while every
 * batch is in flight), from one caller or several, share a batch (at most `maxBatch` of them), and
 * each is answered with its own `Exit`, in the order given, once the batches that took them are
 * done. If `run` itself fails, every input of its batch fails with that cause; beyond
 * `whenFull`'s capacity an input fails at once with its error. The batching fibers live as long as
 * the scope.
 */
export const makeMany = <I, A, E, F = never>(
  run: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>,
  options: BatchedOptions<F>
): Effect.Effect<(inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E | F>>>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const full = options.whenFull
    const pending = yield* (full === undefined
      ? Queue.unbounded<Entry<I, A, E | F>>()
      : Queue.dropping<Entry<I, A, E | F>>(full.capacity))
    const permits = yield* Effect.makeSemaphore(options.concurrency)
    const series = MetricSeries.labels(["batch", options.name])

    const serve = (entries: ReadonlyArray<Entry<I, A, E | F>>) =>
      Effect.sync(() => batchSize.unsafeUpdate(entries.length, series)).pipe(
        Effect.zipRight(run(entries.map((entry) => entry.input))),
        Effect.flatMap((exits) =>
          Effect.sync(() =>
            entries.forEach((entry, i) =>
              settle(entry, exits[i] ?? Exit.die(new Error("a batch answered fewer calls than it took")))
            )
          )
        ),
        Effect.catchAllCause((cause) => Effect.sync(() => entries.forEach((entry) => settle(entry, Exit.failCause(cause)))))
      )

    // Each batch holds a permit while it runs; the next batch is taken only once a permit is free,
    // so inputs gather while every permit is busy. A batch taken waits for the end of the turn
    // (inputs of the same turn join it) without being interruptible, so that no input taken is lost.
    yield* permits.take(1).pipe(
      Effect.zipRight(Queue.take(pending)),
      Effect.flatMap((first) =>
        Effect.uninterruptibleMask((restore) =>
          endOfTurn.pipe(
            Effect.zipRight(Queue.takeUpTo(pending, options.maxBatch - 1)),
            Effect.flatMap((rest) => Effect.fork(restore(Effect.ensuring(serve([first, ...rest]), permits.release(1)))))
          )
        )
      ),
      Effect.forever,
      Effect.forkScoped
    )

    return (inputs: ReadonlyArray<I>): Effect.Effect<ReadonlyArray<Exit.Exit<A, E | F>>> =>
      inputs.length === 0 ? Effect.succeed([]) : Effect.flatMap(Deferred.make<ReadonlyArray<Exit.Exit<A, E | F>>>(), (done) =>
        Effect.suspend(() => {
          const group: Group<A, E | F> = { exits: new Array(inputs.length), remaining: inputs.length, done }
          inputs.forEach((input, index) => {
            if (pending.unsafeOffer({ input, group, index })) return
            // Refused: the queue is full, or shut down with its scope.
            settle({ group, index }, full !== undefined && Option.isSome(pending.unsafeSize()) ? Exit.fail(full.error()) : Exit.die(new Error(`${options.name}: the batches have stopped`)))
          })
          return Deferred.await(done)
        }))
  })

/**
 * Counts, under `name` in the batch-size metric, the calls served by one statement that a batch
 * runs for part of its calls.
 */
export const countServed = (name: string) => {
  const series = MetricSeries.labels(["batch", name])
  return (calls: number) => batchSize.unsafeUpdate(calls, series)
}

/** One call of a `makeMany` function: a batch of one input, answered with its exit. */
export const single = <I, A, E>(many: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>) =>
(input: I): Effect.Effect<A, E> =>
  Effect.flatMap(many([input]), ([exit]) => exit ?? Effect.dieMessage("a batch left a call unanswered"))

/**
 * {@link makeMany} for callers of one input each: calls that arrive together share a batch, and
 * each is answered with its own result.
 */
export const make = <I, A, E, F = never>(
  run: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>,
  options: BatchedOptions<F>
): Effect.Effect<(input: I) => Effect.Effect<A, E | F>, never, Scope.Scope> => Effect.map(makeMany(run, options), single)

/**
 * Splits a batch into rounds in which no key appears twice, each item with its index in the
 * batch: a round can be written by one statement, and an item whose key came before sees what the
 * earlier round wrote.
 */
export const rounds = <A>(items: ReadonlyArray<A>, key: (item: A) => string): ReadonlyArray<ReadonlyArray<readonly [number, A]>> => {
  const result: Array<Array<readonly [number, A]>> = []
  const seen = new Map<string, number>()
  items.forEach((item, index) => {
    const round = seen.get(key(item)) ?? 0
    seen.set(key(item), round + 1)
    const into = result[round] ?? []
    into.push([index, item])
    result[round] = into
  })
  return result
}
