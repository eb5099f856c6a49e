import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { IntentRepository } from "../services/intents/IntentRepository.js"

export interface CountFoldingOptions {
  /** How often the count rows are folded; hourly unless set. */
  readonly interval?: Duration.DurationInput | undefined
}

/**
 * Merges the intent count rows that database connections which have ended left behind
 * (`IntentRepository.foldCounts`), at start and then every `interval`, so that a page's total
 * stays a sum of few rows. Instances may run it at once: a fold skips the rows another holds.
 */
export const make = (options: CountFoldingOptions = {}) =>
  Effect.gen(function*() {
    const repository = yield* IntentRepository
    const fold = repository.foldCounts.pipe(
      Effect.tap((rows) => rows > 0 ? Effect.logDebug("intent counts folded").pipe(Effect.annotateLogs({ rows })) : Effect.void),
      Effect.catchAllCause((cause) => Effect.logWarning("intent counts not folded", cause))
    )
    yield* fold.pipe(
      Effect.repeat(Schedule.spaced(options.interval ?? Duration.hours(1))),
      Effect.forkScoped
    )
  }).pipe(Effect.annotateLogs({ service: "count-folding" }))

/** The fold, for as long as the Layer is in use. */
export const layer = (options: CountFoldingOptions = {}) => Layer.scopedDiscard(make(options))
