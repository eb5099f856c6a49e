import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { EVENT_RETENTION } from "../domain/Event.js"
import { EventRepository } from "../services/events/EventRepository.js"
import { periodically, type SweepOptions } from "./Sweep.js"

/** How often old events are looked for; hourly unless set. */
export type RetentionOptions = SweepOptions

/** Events deleted per statement: short transactions, whatever the backlog. */
const BATCH = 1_000

/**
 * Deletes the events (and their deliveries) older than the 30 days the events API keeps, at start
 * and then every `interval`. Instances may run it at once: each batch locks the rows it deletes and
 * skips those another holds, so two never wait on each other nor delete twice.
 */
export const make = (options: RetentionOptions = {}) =>
  Effect.gen(function*() {
    const repository = yield* EventRepository
    const sweep = Effect.gen(function*() {
      const before = DateTime.subtractDuration(yield* DateTime.now, EVENT_RETENTION)
      let total = 0
      for (;;) {
        const deleted = yield* repository.purge(before, BATCH)
        total += deleted
        if (deleted < BATCH) break
      }
      if (total > 0) yield* Effect.logInfo("old events deleted").pipe(Effect.annotateLogs({ count: total }))
    })
    yield* periodically(sweep, "old events not deleted", options)
  }).pipe(Effect.annotateLogs({ service: "event-retention" }))

/** The retention sweep, for as long as the Layer is in use. */
export const layer = (options: RetentionOptions = {}) => Layer.scopedDiscard(make(options))
