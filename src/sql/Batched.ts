import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as MetricSeries from "../MetricSeries.js"

/** How many calls each batch served, by what it batches. */
export const batchSize = Metric.histogram(
  "tir_batch_size",
  MetricBoundaries.fromIterable([1, 2, 5, 10, 20, 50, 100, 200, 500]),
  "Calls served by one batch (one statement or transaction), by batch: intent_create, intent_lookup, intent_page, rate_limit_lease, routing_record, routing_record_unlocked, mock_submit, event_tail, webhook_complete."
)

export interface BatchedOptions<I, F> {
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
  /**
   * Keeps inputs of one key in order across batches: an input whose key is in a batch in flight
   * waits for that batch to end (inputs of other keys go ahead of it), so that it is served on what
   * that batch left. Inputs of one key in one batch are the batch's to order. None unless set.
   */
  readonly key?: ((input: I) => string) | undefined
}

/** The calls made together by one `many`: answered once every input's exit is in. */
interface Group<A, E> {
  readonly exits: Array<Exit.Exit<A, E>>
  remaining: number
  readonly answer: (exits: ReadonlyArray<Exit.Exit<A, E>>) => void
}

/** One input waiting for a batch or in one: its group, its place in that group's answer. */
interface Entry<I, A, E> {
  readonly input: I
  readonly group: Group<A, E>
  readonly index: number
  settled: boolean
}

/** Gives an input its exit (once: a later one is ignored); its group is answered with its last. */
const settle = <I, A, E>(entry: Entry<I, A, E>, exit: Exit.Exit<A, E>) => {
  if (entry.settled) return
  entry.settled = true
  const { group } = entry
  group.exits[entry.index] = exit
  group.remaining -= 1
  if (group.remaining === 0) group.answer(group.exits)
}

/**
 * Turns `run`, which serves many inputs in one go (one statement, one commit), into a function of
 * many calls at once: inputs that arrive together (in one turn of the event loop, or while every
 * batch is in flight), from one caller or several, share a batch (at most `maxBatch` of them), and
 * each is answered with its own `Exit`, in the order given, once the batches that took them are
 * done. If `run` itself fails, every input of its batch fails with that cause; beyond
 * `whenFull`'s capacity an input fails at once with its error. Batches run as long as the scope:
 * when it closes, inputs still waiting die and the batches in flight are interrupted, their
 * inputs with them.
 *
 * A batch starts at the end of the event loop's turn (Node's check phase, `setImmediate`): the
 * callbacks of the I/O that is ready now (requests read, answers from the database) run first, and
 * whatever they add joins it. The waiting inputs are a plain array and each caller waits on a
 * callback: no queue, semaphore or deferred, and no fiber but the batches'. Built on those, the
 * same batching kept enough of each batch alive across young-generation collections to promote
 * about five times as many bytes to the old generation, and to need a full collection several
 * times as often (pages of the listing under load).
 */
export const makeMany = <I, A, E, F = never>(
  run: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>,
  options: BatchedOptions<I, F>
): Effect.Effect<(inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E | F>>>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { concurrency, key, maxBatch } = options
    // The keys of the inputs in the batches in flight, when inputs are kept in order by key.
    const held = new Set<string>()
    const full = options.whenFull
    const series = MetricSeries.labels(["batch", options.name])
    const batches = yield* FiberSet.make<void>()
    const fork = yield* FiberSet.runtime(batches)()
    let waiting: Array<Entry<I, A, E | F>> = []
    let inFlight = 0
    let starting = false
    let stopped = false

    /**
     * Answers a batch's inputs with its outcome (failed or interrupted, the scope closing, each
     * with its cause), and frees its slot and its keys. Made once, not per batch (see "Hot paths"
     * in docs/development.md).
     */
    const finish = (entries: ReadonlyArray<Entry<I, A, E | F>>, done: Exit.Exit<ReadonlyArray<Exit.Exit<A, E>>>) => {
      if (Exit.isSuccess(done)) {
        for (const [i, entry] of entries.entries()) {
          settle(entry, done.value[i] ?? Exit.die(new Error("a batch answered fewer calls than it took")))
        }
      } else {
        for (const entry of entries) settle(entry, Exit.failCause(done.cause))
      }
      if (key !== undefined) for (const entry of entries) held.delete(key(entry.input))
      inFlight -= 1
      startSoon()
    }

    const serve = (entries: ReadonlyArray<Entry<I, A, E | F>>) => {
      const inputs: Array<I> = []
      for (const entry of entries) inputs.push(entry.input)
      return Effect.onExit(run(inputs), (done) => Effect.sync(() => finish(entries, done)))
    }

    /** The next batch's inputs, at most `maxBatch`, taken from those waiting: with `key`, none whose key is held. */
    const take = (): ReadonlyArray<Entry<I, A, E | F>> => {
      if (key === undefined) {
        const entries = waiting.length <= maxBatch ? waiting : waiting.slice(0, maxBatch)
        waiting = waiting.length <= maxBatch ? [] : waiting.slice(maxBatch)
        return entries
      }
      const entries: Array<Entry<I, A, E | F>> = []
      const left: Array<Entry<I, A, E | F>> = []
      for (const entry of waiting) {
        if (entries.length < maxBatch && !held.has(key(entry.input))) entries.push(entry)
        else left.push(entry)
      }
      waiting = left
      for (const entry of entries) held.add(key(entry.input))
      return entries
    }

    /** Starts as many batches as there are free slots, with the inputs waiting, at the end of the turn. */
    const start = () => {
      starting = false
      while (!stopped && inFlight < concurrency && waiting.length > 0) {
        const entries = take()
        if (entries.length === 0) return
        inFlight += 1
        batchSize.unsafeUpdate(entries.length, series)
        fork(serve(entries))
      }
    }
    const startSoon = () => {
      if (starting || stopped || inFlight >= concurrency || waiting.length === 0) return
      starting = true
      setImmediate(start)
    }

    /** Inputs beyond those the batches about to start will take: what `whenFull` bounds. */
    const queued = () => waiting.length - Math.min(waiting.length, Math.max(0, concurrency - inFlight) * maxBatch)

    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        stopped = true
        const left = waiting
        waiting = []
        left.forEach((entry) => settle(entry, Exit.die(new Error(`${options.name}: the batches have stopped`))))
      })
    )

    return (inputs: ReadonlyArray<I>): Effect.Effect<ReadonlyArray<Exit.Exit<A, E | F>>> =>
      inputs.length === 0 ? Effect.succeed([]) : Effect.async<ReadonlyArray<Exit.Exit<A, E | F>>>((resume) => {
        const group: Group<A, E | F> = {
          exits: new Array(inputs.length),
          remaining: inputs.length,
          answer: (exits) => resume(Effect.succeed(exits))
        }
        for (const [index, input] of inputs.entries()) {
          const entry: Entry<I, A, E | F> = { input, group, index, settled: false }
          if (stopped) settle(entry, Exit.die(new Error(`${options.name}: the batches have stopped`)))
          else if (full !== undefined && queued() >= full.capacity) settle(entry, Exit.fail(full.error()))
          else waiting.push(entry)
        }
        startSoon()
      })
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
  options: BatchedOptions<I, F>
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

/**
 * `batched` for a call outside any transaction; inside a caller's transaction, `direct`, in it: a
 * batch runs on a connection of its own, which neither sees the transaction's writes nor commits
 * with it, and the transaction cannot wait for it.
 */
export const unlessInTransaction = <I, A, E, R>(
  direct: (input: I) => Effect.Effect<A, E, R>,
  batched: (input: I) => Effect.Effect<A, E, R>
) =>
(input: I): Effect.Effect<A, E, R> =>
  Effect.flatMap(
    Effect.serviceOption(SqlClient.TransactionConnection),
    (transaction) => Option.isSome(transaction) ? direct(input) : batched(input)
  )
