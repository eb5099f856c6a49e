import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Batched from "../../src/sql/Batched.js"

/** The batches `name` has served so far (the `tir_batch_size` histogram), and the calls they served. */
const served = (name: string) =>
  Effect.map(Metric.value(Batched.batchSize.pipe(Metric.tagged("batch", name))), ({ count, sum }) => ({ batches: count, calls: sum }))

/** Runs `effect` and says how many batches of `name` it took and how many calls they served. */
export const batchesOf = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const before = yield* served(name)
    const result = yield* effect
    const after = yield* served(name)
    return { result, batches: after.batches - before.batches, calls: after.calls - before.calls }
  })
