import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"

export interface SweepOptions {
  /** How often the sweep runs; hourly unless set. */
  readonly interval?: Duration.DurationInput | undefined
}

/**
 * Housekeeping in the background for as long as the scope lasts: `sweep` at start and then every
 * `interval`. A failed sweep is logged as a warning with `failed` as its message; the next runs as
 * planned.
 */
export const periodically = <R>(
  sweep: Effect.Effect<void, never, R>,
  failed: string,
  options: SweepOptions = {}
): Effect.Effect<void, never, R | Scope.Scope> =>
  sweep.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning(failed, cause)),
    Effect.repeat(Schedule.spaced(options.interval ?? Duration.hours(1))),
    Effect.forkScoped,
    Effect.asVoid
  )
