import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Scheduler from "effect/Scheduler"
import * as Stream from "effect/Stream"

/**
 * The most a run of requests' steps lasts before the event loop reads the network again: the
 * longest a broker's answer, a stream's message or a statement's result of the router waits behind
 * requests already under way (their own work aside).
 */
export const BUDGET = Duration.millis(2)

/**
 * A scheduler that runs its fibers' steps after the event loop's callbacks of the turn, `budget`
 * of them at a time, in the order they were scheduled.
 *
 * Effect's default scheduler runs a fiber's next step in a microtask of the callback that woke it:
 * every step is run as soon as its input arrives, and the steps of many requests that arrive
 * together fill a turn of the event loop, which reads the next socket only when they are done.
 * Here a step waits for the loop's check phase (`setImmediate`), and a run of steps stops once
 * `budget` has passed, leaving the rest for the next turn: the callbacks of fibers on the default
 * scheduler (the router's workers, the broker streams, the batches of statements) then run in
 * between, each as soon as the loop reads its input. Steps are never dropped or reordered; the
 * fibers' scheduling priorities are not read.
 */
export const make = (budget: Duration.DurationInput = BUDGET): Scheduler.Scheduler => {
  const budgetMs = Duration.toMillis(budget)
  let tasks: Array<Scheduler.Task> = []
  let next = 0
  let scheduled = false
  const run = () => {
    const deadline = performance.now() + budgetMs
    try {
      // Steps scheduled by the steps of this run join it, until the budget is spent.
      while (next < tasks.length) {
        const task = tasks[next]!
        next += 1
        task()
        if (performance.now() >= deadline) break
      }
    } finally {
      if (next < tasks.length) {
        tasks = tasks.slice(next)
        next = 0
        setImmediate(run)
      } else {
        tasks = []
        next = 0
        scheduled = false
      }
    }
  }
  return Scheduler.make((task) => {
    tasks.push(task)
    if (!scheduled) {
      scheduled = true
      setImmediate(run)
    }
  })
}

/** The scheduler of the requests the service serves (one event loop: one scheduler). */
export const requests: Scheduler.Scheduler = make()

/** Runs `self`, and every fiber it forks, on {@link requests}. */
export const forRequests = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withScheduler(self, requests)

/**
 * A response's stream whose steps run on Effect's default scheduler, as soon as their input
 * arrives, whichever scheduler the request was served on: an event stream is the service telling a
 * client what happened, as a webhook is, and waits behind no request.
 */
export const promptly = <A, E, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> =>
  Stream.unwrapScoped(Effect.as(Effect.locallyScoped(FiberRef.currentScheduler, Scheduler.defaultScheduler), stream))
