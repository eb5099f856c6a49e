import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import { CANCELED_BY_CLIENT, endOfDay, isFinal } from "../domain/Routing.js"
import { CREDENTIALS_REFUSED_REASON } from "../domain/Broker.js"
import {
  type BrokerError,
  BrokerGateway,
  type BrokerOrder,
  type BrokerRejected,
  type Submission
} from "../services/brokers/BrokerGateway.js"
import { ROUTING_CHANNEL } from "../sql/Channels.js"
import { RoutingHandoff } from "../services/routing/RoutingHandoff.js"
import {
  type FollowUp,
  type Job,
  type Recording,
  type RoutingContext,
  RoutingRepository
} from "../services/routing/RoutingRepository.js"
import * as JobLoop from "./JobLoop.js"
import { delays } from "./RetryConfig.js"
import * as Tracing from "../Tracing.js"

export interface RoutingOptions {
  /** Delays between attempts at an unreachable broker before the intent fails. */
  readonly retryDelays: ReadonlyArray<Duration.Duration>
  /** Jobs in flight at once in this instance. */
  readonly concurrency?: number | undefined
  /** The longest a worker sleeps without a notification (scheduled retries, missed notifications). */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** How long a claim holds without renewal: a crashed worker's jobs are claimed again after it. */
  readonly lease?: Duration.DurationInput | undefined
}


const isResting = (order: BrokerOrder) => order.status === "new" || order.status === "partially_filled"

/** How long after a cancel request an order still open is asked for again. */
const CANCEL_CHECK = Duration.seconds(2)

/** Errors worth asking again about: the broker was not reached, or the outcome is unknown. */
const isTransient = (error: { readonly _tag: string }) =>
  error._tag === "BrokerUnavailable" || error._tag === "BrokerTimeout"

export const make = (options: RoutingOptions) =>
  Effect.gen(function*() {
    const repository = yield* RoutingRepository
    const broker = yield* BrokerGateway
    const handoff = yield* Effect.serviceOption(RoutingHandoff)
    const concurrency = options.concurrency ?? 128
    const pollInterval = Duration.decode(options.pollInterval ?? "1 second")
    const [first, ...rest] = options.retryDelays
    const schedule: Schedule.Schedule<unknown> = first === undefined
      ? Schedule.stop
      : Schedule.fromDelays(first, ...rest).pipe(Schedule.jittered)
    /** Retries a broker call on the schedule while its failures are transient. */
    const retry = { schedule, while: isTransient }
    const lease = Duration.decode(options.lease ?? "15 seconds")
    const later = (delay: Duration.Duration) => Effect.map(DateTime.now, DateTime.addDuration(delay))
    const lastDelay = options.retryDelays.at(-1) ?? Duration.seconds(5)

    /**
     * The order of an intent at the broker: looked up first whenever an earlier attempt may have
     * placed it. `earlier`, when given, is the answer to an attempt already made (a submission
     * placed with others): it counts as the first attempt.
     */
    const place = (context: RoutingContext, job: Job, earlier?: Either.Either<BrokerOrder, BrokerError | BrokerRejected>) =>
      Effect.gen(function*() {
        const uncertain = yield* Ref.make(job.claims > 1)
        let given = earlier
        const answered = (answer: Either.Either<BrokerOrder, BrokerError | BrokerRejected>) =>
          Either.match(answer, {
            onLeft: (error) => Effect.zipRight(error._tag === "BrokerTimeout" ? Ref.set(uncertain, true) : Effect.void, Effect.fail(error)),
            onRight: Effect.succeed
          })
        const attempt = Effect.suspend(() => {
          if (given === undefined) return asked
          const answer = given
          given = undefined
          return answered(answer)
        })
        const asked = Effect.gen(function*() {
          if (yield* Ref.get(uncertain)) {
            const found = yield* broker.lookup(context.connection, { clientOrderId: context.clientOrderId })
            if (Option.isSome(found)) return found.value
            yield* Ref.set(uncertain, false)
          }
          return yield* broker.submit(context.connection, { clientOrderId: context.clientOrderId, spec: context.spec }).pipe(
            Effect.tapErrorTag("BrokerTimeout", () => Ref.set(uncertain, true))
          )
        })
        const result = yield* Effect.either(Effect.retry(attempt, retry))
        return { result, certain: !(yield* Ref.get(uncertain)) }
      })

    /**
     * What follows a submission's order should it stay open (`FollowUp`): a cancel the client asked
     * for meanwhile, which the recording's lock reads; for a day order, a check at the end of the
     * day, unless its broker streams its orders' updates (it says when a day order expires, and
     * its open orders are reconciled periodically). `dayEnd` is the end of the day the order was
     * placed on (its `endOfDay`), worked out once for the orders placed together.
     */
    const followUpOf = (context: RoutingContext, dayEnd: DateTime.Utc): FollowUp => ({
      syncAt: context.spec.time_in_force === "day" && !broker.streaming.includes(context.connection.kind)
        ? dayEnd
        : undefined
    })

    /**
     * A cancel that arrived before any order was recorded. Only a submission never claimed before
     * this one can be canceled without asking: once a claim may have submitted, the broker, asked by
     * client order id, decides (its order is recorded and then canceled there).
     */
    const cancelBeforeOrder = (context: RoutingContext, job: Job) =>
      Effect.gen(function*() {
        const reason = `${CANCELED_BY_CLIENT} before submission`
        if (job.claims === 1) return yield* Effect.asVoid(repository.cancelLocally(context.intentId, reason, job))
        const found = yield* Effect.either(
          Effect.retry(broker.lookup(context.connection, { clientOrderId: context.clientOrderId }), retry)
        )
        if (Either.isLeft(found)) return yield* unanswered(context, job, found.left)
        if (Option.isNone(found.right)) {
          return yield* Effect.asVoid(repository.cancelLocally(context.intentId, reason, job))
        }
        yield* recorded(context, job, found.right.value)
      })

    /** Records the order a submission placed (or found) and queues what follows it; the job ends with the recording. */
    const recorded = (context: RoutingContext, job: Job, order: BrokerOrder) =>
      Effect.flatMap(DateTime.now, (now) =>
        Effect.asVoid(repository.record(context.intentId, order, job, followUpOf(context, endOfDay(now)))))

    /**
     * A broker call that got no usable answer: refused credentials fail the intent (the broker
     * acts on nothing until they are replaced); otherwise the job is asked again later.
     */
    const unanswered = (context: RoutingContext, job: Job, error: BrokerError) =>
      error._tag === "BrokerCredentialsRefused"
        ? Effect.asVoid(repository.fail(context.intentId, CREDENTIALS_REFUSED_REASON, job))
        : Effect.flatMap(later(lastDelay), (runAt) => repository.reschedule(job, runAt))

    const submit = (context: RoutingContext, job: Job, earlier?: Either.Either<BrokerOrder, BrokerError | BrokerRejected>) =>
      Effect.gen(function*() {
        if (context.cancelRequested && !context.hasOrder) return yield* cancelBeforeOrder(context, job)
        const { certain, result } = yield* place(context, job, earlier)
        if (Either.isRight(result)) return yield* recorded(context, job, result.right)
        const error = result.left
        if (error._tag === "BrokerRejected") {
          return yield* Effect.asVoid(repository.reject(context.intentId, error.reason, job))
        }
        if (error._tag === "BrokerCredentialsRefused") return yield* unanswered(context, job, error)
        if (certain) {
          const attempts = options.retryDelays.length + 1
          return yield* Effect.asVoid(repository.fail(
            context.intentId,
            `Broker unreachable after ${attempts} attempt${attempts === 1 ? "" : "s"}: ${error.detail}`,
            job
          ))
        }
        // The broker may hold the order: never fail, ask again later (the next claim looks it up first).
        yield* Effect.logWarning("submission outcome unknown; will look the order up").pipe(
          Effect.annotateLogs({ intent_id: context.intentId })
        )
        yield* repository.reschedule(job, yield* later(lastDelay))
      })

    const cancel = (context: RoutingContext, job: Job) =>
      Effect.gen(function*() {
        // Without a recorded order, the intent's submission job decides the cancel (it sees the request).
        if (!context.hasOrder) return yield* repository.finish(job)
        const result = yield* Effect.either(
          Effect.retry(broker.cancel(context.connection, context.clientOrderId), retry)
        )
        if (Either.isLeft(result)) return yield* unanswered(context, job, result.left)
        if (Option.isSome(result.right)) {
          const order = result.right.value
          yield* repository.record(context.intentId, { ...order, reason: order.reason ?? CANCELED_BY_CLIENT })
          // A broker that cancels asynchronously answers the order still open: ask again shortly.
          if (isResting(order)) yield* repository.enqueue(context.intentId, "sync", yield* later(CANCEL_CHECK))
        }
        yield* repository.finish(job)
      })

    const sync = (context: RoutingContext, job: Job) =>
      Effect.gen(function*() {
        const found = yield* Effect.either(broker.lookup(context.connection, { clientOrderId: context.clientOrderId, recorded: context.filled }))
        if (Either.isLeft(found)) return yield* unanswered(context, job, found.left)
        if (Option.isSome(found.right)) {
          const order = found.right.value
          yield* repository.record(context.intentId, order)
          if (isResting(order)) return yield* repository.reschedule(job, endOfDay(yield* DateTime.now))
        }
        yield* repository.finish(job)
      })

    /** A job's work, in its span and with its intent and kind in its logs. */
    const traced = (job: Job) => <A>(work: Effect.Effect<A>) =>
      work.pipe(
        Tracing.span("RoutingWorker.process", { attributes: { intent_id: job.intentId, kind: job.kind } }),
        Effect.annotateLogs({ intent_id: job.intentId, job: job.kind })
      )

    const process = (job: Job) =>
      Effect.gen(function*() {
        const context = job.context // read by the claim
        if (Option.isNone(context) || isFinal(context.value.status)) return yield* repository.finish(job)
        switch (job.kind) {
          case "submit":
            return yield* submit(context.value, job)
          case "cancel":
            return yield* cancel(context.value, job)
          case "sync":
            return yield* sync(context.value, job)
        }
      }).pipe(traced(job))

    /** A submission no claim before this one may have acted on: placed without a lookup first. */
    const untouched = (job: Job): RoutingContext | undefined => {
      if (job.kind !== "submit" || job.claims !== 1 || Option.isNone(job.context)) return undefined
      const context = job.context.value
      return isFinal(context.status) || context.cancelRequested || context.hasOrder ? undefined : context
    }

    /**
     * Jobs that start together (handed over together at creation, or claimed together), run as
     * one: the submissions no claim may have acted on yet are placed with one call to the broker,
     * and the orders that call placed are recorded in one transaction, which also queues what
     * follows those left open and ends their jobs. Whatever is left of a job (a broker that gave
     * no usable answer, every other kind of job) carries on alone, as `process` would take it from
     * there. Made once, its steps in loops (see "Hot paths" in docs/development.md).
     */
    const processTogether = Effect.fnUntraced(function*(
      jobs: ReadonlyArray<Job>,
      each: (job: Job, work: Effect.Effect<void>) => Effect.Effect<void>,
      ended: (jobs: ReadonlyArray<Job>) => Effect.Effect<void>
    ) {
      const alone: Array<readonly [Job, Effect.Effect<void>]> = []
      const fresh: Array<{ readonly job: Job; readonly context: RoutingContext }> = []
      const submissions: Array<Submission> = []
      for (const job of jobs) {
        const context = untouched(job)
        if (context === undefined) {
          alone.push([job, process(job)])
          continue
        }
        fresh.push({ job, context })
        submissions.push({ connection: context.connection, clientOrderId: context.clientOrderId, spec: context.spec })
      }
      const answers = fresh.length === 0 ? [] : yield* broker.submitMany(submissions)
      const settled: Array<{ readonly job: Job; readonly order: BrokerOrder }> = []
      const dayEnd = endOfDay(yield* DateTime.now)
      const recordings: Array<Recording> = []
      for (const [i, { context, job }] of fresh.entries()) {
        const answer = answers[i] ?? Exit.die(new Error("a submission went unanswered"))
        if (Exit.isSuccess(answer)) {
          settled.push({ job, order: answer.value })
          recordings.push({ intentId: context.intentId, order: answer.value, done: job, followUp: followUpOf(context, dayEnd) })
          continue
        }
        const failure = Cause.failureOrCause(answer.cause)
        const rest = Either.isLeft(failure) ? submit(context, job, Either.left(failure.left)) : Effect.failCause(failure.right)
        alone.push([job, traced(job)(rest)])
      }
      const records = recordings.length === 0 ? [] : yield* repository.recordMany(recordings)
      // A recorded job has ended with its recording: nothing is left of it, its slot is free.
      const finished: Array<Job> = []
      for (const [i, { job }] of settled.entries()) {
        const exit = records[i] ?? Exit.die(new Error("a recording went unanswered"))
        if (Exit.isSuccess(exit)) finished.push(job)
        else alone.push([job, exit])
      }
      yield* ended(finished)
      const [first, ...others] = alone
      if (first === undefined) return
      if (others.length === 0) return yield* each(...first)
      yield* Effect.forEach(alone, ([job, work]) => each(job, work), { concurrency: "unbounded", discard: true })
    }, (effect, jobs) => Tracing.span("RoutingWorker.processTogether", { attributes: { "batch.size": jobs.length } })(effect))

    yield* JobLoop.run({
      name: "routing",
      channel: ROUTING_CHANNEL,
      queue: { ...repository, release: repository.reschedule },
      process,
      concurrency,
      pollInterval,
      lease,
      handed: Option.getOrUndefined(Option.map(handoff, (handoff) => handoff.take)),
      processTogether
    })
  }).pipe(Effect.annotateLogs({ service: "routing" }))

/** The routing worker, running for as long as the Layer is in use. */
export const layer = (options: RoutingOptions) => Layer.scopedDiscard(make(options))

/** `ROUTING_RETRY_SCHEDULE` (default `1s,5s,30s`) and `ROUTING_LEASE` (default `15s`). */
export const config = Config.all({
  retryDelays: delays("ROUTING_RETRY_SCHEDULE", "1s,5s,30s"),
  lease: Config.map(delays("ROUTING_LEASE", "15s"), (lease) => lease[0] ?? Duration.seconds(15))
})
