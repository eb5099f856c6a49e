import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { Job } from "./RoutingRepository.js"

interface Taker {
  readonly lease: Duration.Duration
  readonly receive: (jobs: ReadonlyArray<Job>) => void
}

/**
 * Submissions claimed by the statement that creates their intents, handed straight to this
 * instance's routing worker: between a creation's commit and its submission to the broker there
 * is no notification, no claim statement and no wait for either. A creation claims its job only
 * while a routing worker of this instance takes handed jobs, for that worker's lease; otherwise
 * the job waits in the queue for any instance's claim, as every other job does. Should the
 * instance stop or die holding handed jobs, they are handed back at shutdown or claimed by another
 * instance once their lease runs out, like every other claimed job.
 */
export class RoutingHandoff extends Context.Tag("RoutingHandoff")<RoutingHandoff, {
  /** The lease a submission claimed at creation is held for now; none while no worker takes them. */
  readonly lease: () => Duration.Duration | undefined
  /** Hands claimed submissions to the worker (handed after it stopped, they wait out their lease). */
  readonly hand: (jobs: ReadonlyArray<Job>) => void
  /** For the routing worker: takes handed jobs with `receive`, claimed for `lease`, until the scope closes. */
  readonly take: (
    lease: Duration.Duration,
    receive: (jobs: ReadonlyArray<Job>) => void
  ) => Effect.Effect<void, never, Scope.Scope>
}>() {
  /** One hand-over point per instance, shared by its intent repository and its routing worker. */
  static readonly layer = Layer.sync(this, () => {
    let taker: Taker | undefined
    return {
      lease: () => taker?.lease,
      hand: (jobs) => {
        if (jobs.length > 0) taker?.receive(jobs)
      },
      take: (lease, receive) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const mine: Taker = { lease, receive }
            taker = mine
            return mine
          }),
          (mine) =>
            Effect.sync(() => {
              if (taker === mine) taker = undefined
            })
        ).pipe(Effect.asVoid)
    }
  })
}
