import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { IntentId } from "../../domain/Ids.js"
import type { Transition } from "../../domain/Routing.js"
import type { HeardWord, Recording, RoutingRepository } from "./RoutingRepository.js"

/**
 * One line per status change, once written: `intent filled`, with the intent, its reason and the
 * quantity filled. Below the `info` level nothing is built: setting the annotations alone cost
 * about 20 runtime steps per routed intent.
 */
const logChange = (intentId: IntentId) => (transition: Transition) =>
  transition.changed
    ? Effect.asVoid(Effect.whenLogLevel(
      Effect.logInfo(`intent ${transition.status}`).pipe(
        Effect.annotateLogs({
          intent_id: intentId,
          status: transition.status,
          status_reason: transition.reason,
          filled: transition.filled
        })
      ),
      "Info"
    ))
    : Effect.void

/**
 * The repository with every status change it writes logged, whichever path made it (a worker, a
 * broker's stream, a cancel, a test price): the one place all transitions pass through.
 */
export const logged = (repository: RoutingRepository["Type"]): RoutingRepository["Type"] => ({
  ...repository,
  record: (intentId, order, done, followUp) => Effect.tap(repository.record(intentId, order, done, followUp), logChange(intentId)),
  recordHeard: (connectionId, intentId, order) =>
    Effect.tap(repository.recordHeard(connectionId, intentId, order), (recorded) =>
      Option.isSome(recorded) ? logChange(intentId)(recorded.value) : Effect.void),
  // Made once, its steps in a loop (see "Hot paths" in docs/development.md).
  recordMany: Effect.fnUntraced(function*(recordings: ReadonlyArray<Recording>) {
    const exits = yield* repository.recordMany(recordings)
    for (const [i, exit] of exits.entries()) {
      const recording = recordings[i]
      if (Exit.isSuccess(exit) && recording !== undefined) yield* logChange(recording.intentId)(exit.value)
    }
    return exits
  }),
  recordHeardMany: Effect.fnUntraced(function*(words: ReadonlyArray<HeardWord>) {
    const exits = yield* repository.recordHeardMany(words)
    for (const [i, exit] of exits.entries()) {
      const word = words[i]
      if (Exit.isSuccess(exit) && Option.isSome(exit.value) && word !== undefined) yield* logChange(word.intentId)(exit.value.value)
    }
    return exits
  }),
  fail: (intentId, reason, done) => Effect.tap(repository.fail(intentId, reason, done), logChange(intentId)),
  cancelLocally: (intentId, reason, done) =>
    Effect.tap(repository.cancelLocally(intentId, reason, done), logChange(intentId)),
  reject: (intentId, reason, done) => Effect.tap(repository.reject(intentId, reason, done), logChange(intentId))
})
