import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"

/** How many calls each batch served, by what it batches. */
export const batchSize = Metric.histogram(
  "tir_batch_size",
  MetricBoundaries.fromIterable([1, 2, 5, 10, 20, 50, 100, 200, 500]),
  "Calls served by one batch (one statement or transaction), by batch: intent_create, rate_limit_lease, routing_record, mock_submit."
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

interface Call<I, A, E> {
  readonly input: I
  readonly result: Deferred.Deferred<A, E>
}

/**
 * Turns `run`, which serves many calls in one go (one statement, one commit), into a function of one
 * call: calls that arrive together share a batch, and each is answered with its own `Exit` once the
 * batch is done. If `run` itself fails, every call of its batch fails with that cause. The batching
 * fibers live as long as the scope.
 */
export const make = <I, A, E, F = never>(
  run: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>,
  options: BatchedOptions<F>
): Effect.Effect<(input: I) => Effect.Effect<A, E | F>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const full = options.whenFull
    const pending = yield* (full === undefined ? Queue.unbounded<Call<I, A, E>>() : Queue.dropping<Call<I, A, E>>(full.capacity))
    const permits = yield* Effect.makeSemaphore(options.concurrency)
    const measured = batchSize.pipe(Metric.tagged("batch", options.name))

    const serve = (calls: ReadonlyArray<Call<I, A, E>>) =>
      Metric.update(measured, calls.length).pipe(
        Effect.zipRight(run(calls.map((call) => call.input))),
        Effect.flatMap((exits) =>
          Effect.sync(() =>
            calls.forEach((call, i) =>
              Deferred.unsafeDone(call.result, exits[i] ?? Exit.die(new Error("a batch answered fewer calls than it took")))
            )
          )
        ),
        Effect.catchAllCause((cause) =>
          Effect.sync(() => calls.forEach((call) => Deferred.unsafeDone(call.result, Exit.failCause(cause))))
        )
      )

    // Each batch holds a permit while it runs; the next batch is taken only once a permit is free,
    // so calls gather while every permit is busy.
    yield* permits.take(1).pipe(
      Effect.zipRight(Queue.take(pending)),
      Effect.flatMap((first) => Effect.map(Queue.takeUpTo(pending, options.maxBatch - 1), (rest) => [first, ...rest])),
      Effect.flatMap((calls) => Effect.fork(Effect.ensuring(serve(calls), permits.release(1)))),
      Effect.forever,
      Effect.forkScoped
    )

    return (input: I): Effect.Effect<A, E | F> =>
      Effect.flatMap(Deferred.make<A, E>(), (result) =>
        Effect.flatMap(Queue.offer(pending, { input, result }), (queued): Effect.Effect<A, E | F> =>
          queued || full === undefined ? Deferred.await(result) : Effect.fail(full.error())))
  })

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
