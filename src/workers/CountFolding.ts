import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { IntentRepository } from "../services/intents/IntentRepository.js"
import { periodically, type SweepOptions } from "./Sweep.js"

/** How often the count rows are folded; hourly unless set. */
export type CountFoldingOptions = SweepOptions

/**
 * Merges the intent count rows that database connections which have ended left behind
 * (`IntentRepository.foldCounts`), at start and then every `interval`, so that a page's total
 * stays a sum of few rows. Instances may run it at once: a fold skips the rows another holds.
 */
export const make = (options: CountFoldingOptions = {}) =>
  Effect.gen(function*() {
    const repository = yield* IntentRepository
    const fold = Effect.flatMap(repository.foldCounts, (rows) =>
      rows > 0 ? Effect.logDebug("intent counts folded").pipe(Effect.annotateLogs({ rows })) : Effect.void)
    yield* periodically(fold, "intent counts not folded", options)
  }).pipe(Effect.annotateLogs({ service: "count-folding" }))

/** The fold, for as long as the Layer is in use. */
export const layer = (options: CountFoldingOptions = {}) => Layer.scopedDiscard(make(options))
