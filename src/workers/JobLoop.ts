import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Notifications } from "../sql/Database.js"

/** A durable queue in the database, as a worker sees it: jobs are claimed under a lease. */
export interface JobQueue<Job> {
  /** Claims up to `limit` due jobs for `lease`, skipping (not waiting for) those another worker holds. */
  readonly claim: (limit: number, lease: Duration.Duration) => Effect.Effect<ReadonlyArray<Job>>
  /** When the earliest job not held by a live worker is due: how long the worker may sleep. */
  readonly nextDue: Effect.Effect<Option.Option<DateTime.Utc>>
  /** Renews the lease of jobs in flight, so that only a dead worker's jobs are claimed again. */
  readonly extend: (jobs: ReadonlyArray<Job>, lease: Duration.Duration) => Effect.Effect<void>
  /** Hands a job back, due at `at`: after a defect, or when shutdown cuts it short. */
  readonly release: (job: Job, at: DateTime.Utc) => Effect.Effect<void>
}

export interface JobLoopOptions<Job> {
  /** Names the loop in logs. */
  readonly name: string
  /** The channel a commit that adds work notifies. */
  readonly channel: string
  readonly queue: JobQueue<Job>
  readonly process: (job: Job) => Effect.Effect<void>
  /** Jobs in flight at once in this instance. */
  readonly concurrency: number
  /** The longest the loop sleeps without a notification (missed notifications, clock drift). */
  readonly pollInterval: Duration.Duration
  readonly lease: Duration.Duration
  /**
   * Where jobs already claimed for this loop come from besides its own claims (submissions claimed
   * by the statement that created them): `take` passes each batch to `receive` until its scope
   * closes. They run before any job the loop claims itself.
   */
  readonly handed?: ((
    lease: Duration.Duration,
    receive: (jobs: ReadonlyArray<Job>) => void
  ) => Effect.Effect<void, never, Scope.Scope>) | undefined
  /**
   * Runs the jobs that start together (handed over together, or claimed by one claim) as one
   * (routing submits them to the broker and records them in one go) instead of each with
   * `process`. Each job passes once through `each`, with what is left to do of it alone, or
   * through `ended`, when nothing is left of it. `each` gives that work the handling `process` gets
   * (a failure logged and the job handed back for a retry, an interruption handing it back) and
   * frees the job's slot when it ends; `ended` frees the slots of jobs already ended, many at
   * once, with nothing to handle. Should the whole fail or be interrupted, the jobs not yet passed
   * to either are handed back the same way.
   */
  readonly processTogether?: ((
    jobs: ReadonlyArray<Job>,
    each: (job: Job, work: Effect.Effect<void>) => Effect.Effect<void>,
    ended: (jobs: ReadonlyArray<Job>) => Effect.Effect<void>
  ) => Effect.Effect<void>) | undefined
}

const DEFECT_RETRY = Duration.seconds(5)
const DRAIN_TIMEOUT = Duration.seconds(10)

/**
 * Runs jobs from a database queue until the scope closes: woken by `LISTEN` when a commit adds work,
 * otherwise asleep until the next job is due; jobs handed to it already claimed run first; leases
 * renewed while jobs run or wait; on shutdown, claims and takes nothing more, stops renewing, hands
 * back the handed jobs not started, and lets jobs in flight finish for at most 10 seconds, handing
 * back those cut short.
 */
export const run = <Job>(options: JobLoopOptions<Job>) =>
  Effect.gen(function*() {
    const { concurrency, lease, pollInterval, queue } = options
    const notifications = yield* Notifications
    const wake = yield* Queue.sliding<void>(1)
    // The jobs started and not ended yet: a job's slot, and the leases to renew.
    const claimed = new Set<Job>()
    const inFlight = Effect.sync(() => claimed.size)
    const stopping = yield* Ref.make(false)
    const fibers = yield* FiberSet.make()
    // Jobs handed to the loop already claimed, waiting for a free slot.
    const handed: Array<Job> = []
    // Whether the database may hold work for the loop. A loop that is handed its jobs asks only
    // then: at start, after a notification or a poll, and while its claims come back full. A
    // handoff or a job's end alone sends it to the database for nothing (a claim saved per wake).
    let queued = true
    const claimable = () => options.handed === undefined || queued

    const releaseAll = (jobs: ReadonlyArray<Job>, delay: Duration.Duration) =>
      Effect.flatMap(DateTime.now, (now) =>
        Effect.forEach(jobs, (job) => queue.release(job, DateTime.addDuration(now, delay)), { discard: true }))

    /** A failure that is not an interruption is logged, and `jobs` handed back for a retry. */
    const retryOnFailure = (jobs: () => ReadonlyArray<Job>) => (cause: Cause.Cause<never>) =>
      Cause.isInterruptedOnly(cause) ? Effect.void : Effect.zipRight(
        Effect.logError(`${options.name} job failed; it will be retried`, cause),
        releaseAll(jobs(), DEFECT_RETRY)
      )

    const ended = Effect.fnUntraced(function*(jobs: ReadonlyArray<Job>) {
      for (const job of jobs) claimed.delete(job)
      yield* Queue.offer(wake, undefined)
    })

    /** A job's work, handed back when it fails or is interrupted; its slot freed when it ends. */
    const each = (job: Job, work: Effect.Effect<void>) =>
      work.pipe(
        Effect.catchAllCause(retryOnFailure(() => [job])),
        Effect.onInterrupt(() => releaseAll([job], Duration.zero)),
        Effect.ensuring(ended([job]))
      )

    /** Jobs run together: those still held when the whole fails or is interrupted are handed back. */
    const runTogether = (jobs: ReadonlyArray<Job>, together: NonNullable<JobLoopOptions<Job>["processTogether"]>) => {
      const held = () => jobs.filter((job) => claimed.has(job))
      return together(jobs, each, ended).pipe(
        Effect.catchAllCause(retryOnFailure(held)),
        Effect.onInterrupt(() => releaseAll(held(), Duration.zero)),
        Effect.ensuring(ended(jobs))
      )
    }

    const together = options.processTogether
    const startAll = (
      jobs: ReadonlyArray<Job>,
      restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = identity
    ) =>
      Effect.suspend(() => {
        for (const job of jobs) claimed.add(job)
        return together !== undefined && jobs.length > 0
          ? FiberSet.run(fibers, restore(runTogether(jobs, together)))
          : Effect.forEach(jobs, (job) => FiberSet.run(fibers, restore(each(job, options.process(job)))), { discard: true })
      })

    const tick = Effect.gen(function*() {
      if (yield* Ref.get(stopping)) return yield* Effect.never
      const free = concurrency - (yield* inFlight)
      // Taken and started in one step, so that shutdown never loses a handed job between the two;
      // the jobs themselves run interruptible, as every job does.
      const mine = yield* Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          const taken = free > 0 ? handed.splice(0, free) : []
          return Effect.as(startAll(taken, restore), taken)
        })
      )
      const open = free - mine.length
      const fromQueue = open > 0 && claimable() ? yield* queue.claim(open, lease) : []
      if (open > 0) queued = fromQueue.length === open
      yield* startAll(fromQueue)
      if (fromQueue.length < open || open <= 0) {
        // Sleep until a commit notifies, a job is handed or finishes, the next job is due, or the
        // poll interval passes. Having just claimed or with every slot busy, a job's end wakes the
        // loop soon: only an idle loop asks when the next job is due (a round trip saved per job
        // under load).
        const idle = mine.length === 0 && fromQueue.length === 0 && free === concurrency
        const now = yield* DateTime.now
        const untilDue = idle
          ? Option.match(yield* queue.nextDue, {
            onNone: () => pollInterval,
            onSome: (at) => Duration.millis(Math.max(0, DateTime.distance(now, at)))
          })
          : pollInterval
        const woken = yield* Queue.take(wake).pipe(Effect.timeoutOption(Duration.min(pollInterval, untilDue)))
        if (Option.isNone(woken)) queued = true
      }
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.zipRight(Effect.logError(`${options.name} worker could not claim jobs`, cause), Effect.sleep(pollInterval))
      )
    )

    // A lost connection fails the stream; listening again, the loop also looks for work committed
    // while it was deaf (the poll covers the moment before the new LISTEN takes effect).
    const notified = Effect.zipRight(Effect.sync(() => { queued = true }), Queue.offer(wake, undefined))
    yield* notifications.listen(options.channel).pipe(
      Stream.onStart(notified),
      Stream.runForEach(() => notified),
      Effect.catchAllCause((cause) => Effect.logWarning(`${options.name} notifications lost; polling meanwhile`, cause)),
      Effect.repeat(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
    const ticking = yield* Effect.forkScoped(Effect.forever(tick))
    const renewing = yield* Effect.suspend(() => queue.extend([...claimed, ...handed], lease)).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning(`could not renew ${options.name} leases`, cause)),
      Effect.repeat(Schedule.spaced(Duration.divide(lease, 3).pipe(Option.getOrElse(() => lease)))),
      Effect.forkScoped
    )
    // Shutdown: claim nothing more and stop renewing leases (so that another instance can take over
    // whatever is cut short), let the jobs in flight finish for at most DRAIN_TIMEOUT, then
    // interrupt the rest, each handing its job back. Finalizers are uninterruptible, so the wait is
    // bounded by a deadline, not by a timeout (which would wait for an interruption that never comes).
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        yield* Ref.set(stopping, true)
        yield* Fiber.interrupt(ticking)
        yield* Fiber.interrupt(renewing)
        const now = yield* DateTime.now
        yield* Effect.forEach(handed.splice(0), (job) => queue.release(job, now), { discard: true }).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning(`could not hand back ${options.name} jobs not started`, cause))
        )
        const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(DRAIN_TIMEOUT)
        const drained = Effect.map(
          Effect.zip(inFlight, Clock.currentTimeMillis),
          ([jobs, now]) => jobs === 0 || now >= deadline
        )
        yield* drained.pipe(Effect.repeat({ until: (done) => done, schedule: Schedule.spaced("20 millis") }))
        const left = yield* inFlight
        if (left > 0) yield* Effect.logWarning(`${options.name}: handing back ${left} unfinished job(s) at shutdown`)
        yield* FiberSet.clear(fibers)
      })
    )
    // Added last, so closed first: nothing is handed once shutdown has begun.
    if (options.handed !== undefined) {
      yield* options.handed(lease, (jobs) => {
        handed.push(...jobs)
        wake.unsafeOffer(undefined)
      })
    }
  })
