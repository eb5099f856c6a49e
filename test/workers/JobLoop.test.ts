import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Notifications } from "../../src/sql/Database.js"
import * as JobLoop from "../../src/workers/JobLoop.js"

/**
 * A queue of numbered jobs in memory: `due` are claimable; every claim's limit and every job handed
 * back are recorded. Notifications come from `notify`.
 */
const harness = Effect.gen(function*() {
  const due: Array<number> = []
  const claims: Array<number> = []
  const released: Array<number> = []
  const started: Array<number> = []
  const notices = yield* Queue.unbounded<string>()
  let receive: ((jobs: ReadonlyArray<number>) => void) | undefined
  const queue: JobLoop.JobQueue<number> = {
    claim: (limit) => Effect.sync(() => {
      claims.push(limit)
      return due.splice(0, limit)
    }),
    nextDue: Effect.succeed(Option.none()),
    extend: () => Effect.void,
    release: (job) => Effect.sync(() => void released.push(job))
  }
  const notifications = Layer.succeed(Notifications, { listen: () => Stream.fromQueue(notices) })
  const run = (options: {
    readonly concurrency: number
    readonly process: (job: number) => Effect.Effect<void>
    readonly processTogether?: JobLoop.JobLoopOptions<number>["processTogether"]
  }) =>
    JobLoop.run({
      name: "test",
      channel: "test",
      queue,
      process: (job) => Effect.zipRight(Effect.sync(() => void started.push(job)), options.process(job)),
      concurrency: options.concurrency,
      pollInterval: Duration.hours(1),
      lease: Duration.seconds(30),
      handed: (_lease, take) => Effect.sync(() => void (receive = take)),
      processTogether: options.processTogether
    }).pipe(Effect.provide(notifications))
  const hand = (jobs: ReadonlyArray<number>) => Effect.sync(() => receive?.(jobs))
  const until = (check: () => boolean) =>
    Effect.sync(check).pipe(Effect.repeat({ until: (done) => done, schedule: Schedule.spaced("5 millis") }), Effect.timeout("5 seconds"))
  return { due, claims, released, started, notices, run, hand, until }
})

describe("the job loop with handed jobs", () => {
  it.live("runs handed jobs without a claim, and claims again only when the database may hold work", () =>
    Effect.gen(function*() {
      const h = yield* harness
      yield* Effect.scoped(Effect.gen(function*() {
        yield* h.run({ concurrency: 4, process: () => Effect.void })
        // At start (and once listening) it looks in the database.
        yield* h.until(() => h.claims.length >= 1)
        yield* Effect.sleep("100 millis")
        const looked = h.claims.length
        yield* h.hand([1, 2, 3])
        yield* h.until(() => h.started.length === 3)
        yield* Effect.sleep("50 millis")
        expect(h.started).toEqual([1, 2, 3])
        expect(h.claims).toHaveLength(looked) // neither the handoff nor the jobs' ends sent it to the database

        h.due.push(10, 11, 12, 13, 14)
        yield* Queue.offer(h.notices, "submit")
        yield* h.until(() => h.started.length === 8)
        // A claim that came back full says more may wait: it claimed until one came back short.
        expect(h.started.slice(3).sort()).toEqual([10, 11, 12, 13, 14])
        expect(h.claims.length).toBeGreaterThanOrEqual(3)
      }))
    }))

  it.live("hands back at shutdown the handed jobs it had not started, and lets the one in flight finish", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const gate = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      yield* h.run({ concurrency: 1, process: () => Deferred.await(gate) }).pipe(Scope.extend(scope))
      yield* h.hand([1, 2, 3])
      yield* h.until(() => h.started.length === 1)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* h.until(() => h.released.length === 2)
      expect(h.released).toEqual([2, 3])
      yield* Deferred.succeed(gate, undefined)
      yield* closing.await
      expect(h.started).toEqual([1])
      expect(h.released).toEqual([2, 3]) // the job in flight finished: it is not handed back
    }))
})

/** A group that ends its first job through `each`, then does `after`. */
const endsFirstThen = (after: Effect.Effect<void>): JobLoop.JobLoopOptions<number>["processTogether"] => (jobs, each) =>
  Effect.zipRight(each(jobs[0] ?? 0, Effect.void), after)

describe("the job loop running the jobs that start together as one", () => {
  it.live("runs the handed jobs that start together as one, within the free slots; a job's failing work is handed back alone", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const groups: Array<ReadonlyArray<number>> = []
      const finished: Array<number> = []
      yield* Effect.scoped(Effect.gen(function*() {
        yield* h.run({
          concurrency: 3,
          process: () => Effect.void,
          processTogether: (jobs, each) =>
            Effect.zipRight(
              Effect.sync(() => void groups.push(jobs)),
              Effect.forEach(jobs, (job) =>
                each(job, job === 2 ? Effect.dieMessage("job 2 broke") : Effect.sync(() => void finished.push(job))), { discard: true })
            )
        })
        yield* h.hand([1, 2, 3, 4, 5])
        yield* h.until(() => finished.length === 4)
      }))
      // Three slots: the first three together, then the two left once those ended.
      expect(groups).toEqual([[1, 2, 3], [4, 5]])
      expect(h.started).toEqual([]) // none went through `process`
      expect(finished).toEqual([1, 3, 4, 5])
      expect(h.released).toEqual([2])
    }))

  it.live("runs the jobs one claim brought together as one too", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const groups: Array<ReadonlyArray<number>> = []
      yield* Effect.scoped(Effect.gen(function*() {
        yield* h.run({
          concurrency: 4,
          process: () => Effect.void,
          processTogether: (jobs, each) =>
            Effect.zipRight(Effect.sync(() => void groups.push(jobs)), Effect.forEach(jobs, (job) => each(job, Effect.void), { discard: true }))
        })
        yield* h.until(() => h.claims.length >= 1)
        h.due.push(20, 21, 22)
        yield* Queue.offer(h.notices, "submit")
        yield* h.until(() => groups.flat().length === 3)
      }))
      expect(groups).toEqual([[20, 21, 22]])
      expect(h.started).toEqual([])
    }))

  it.live("frees at once the slots of the jobs a group passes to `ended`, and never hands those back", () =>
    Effect.gen(function*() {
      const h = yield* harness
      const gate = yield* Deferred.make<void>()
      const groups: Array<ReadonlyArray<number>> = []
      yield* Effect.scoped(Effect.gen(function*() {
        yield* h.run({
          concurrency: 2,
          process: () => Effect.void,
          processTogether: (jobs, _each, ended) =>
            Effect.zipRight(
              Effect.sync(() => void groups.push(jobs)),
              jobs.includes(1)
                ? Effect.zipRight(ended(jobs), Effect.zipRight(Deferred.await(gate), Effect.dieMessage("the group broke")))
                : ended(jobs)
            )
        })
        yield* h.hand([1, 2])
        yield* h.until(() => groups.length === 1)
        yield* h.hand([3, 4])
        // Both slots were freed by `ended` while the first group still runs: the next two start.
        yield* h.until(() => groups.length === 2)
        yield* Deferred.succeed(gate, undefined)
        yield* Effect.sleep("50 millis")
      }))
      expect(groups).toEqual([[1, 2], [3, 4]])
      expect(h.released).toEqual([]) // the group failed after its jobs had ended
    }))

  it.live("hands back the jobs of a group that fails, but not those it ended", () =>
    Effect.gen(function*() {
      const h = yield* harness
      yield* Effect.scoped(Effect.gen(function*() {
        yield* h.run({
          concurrency: 10,
          process: () => Effect.void,
          processTogether: endsFirstThen(Effect.dieMessage("the group broke"))
        })
        yield* h.hand([1, 2, 3])
        yield* h.until(() => h.released.length === 2)
      }))
      expect(h.released).toEqual([2, 3]) // 1 had ended through `each`
    }))

  // Shutdown lets a group run for its 10 seconds before it interrupts it: this test takes that long.
  it.live("hands back at shutdown the jobs of a group cut short, but not those it ended", () =>
    Effect.gen(function*() {
      const h = yield* harness
      yield* Effect.scoped(Effect.gen(function*() {
        yield* h.run({
          concurrency: 10,
          process: () => Effect.void,
          processTogether: endsFirstThen(Effect.never)
        })
        yield* h.hand([10, 11, 12])
        yield* Effect.sleep("50 millis")
        expect(h.released).toEqual([])
      }))
      expect(h.released).toEqual([11, 12])
    }), 20_000)
})
