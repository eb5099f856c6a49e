import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { FEED_START } from "../../src/domain/Event.js"
import { type Owner, UserId } from "../../src/domain/Ids.js"
import type { FeedTail } from "../../src/services/events/EventRepository.js"
import { EventRepository } from "../../src/services/events/EventRepository.js"
import { EventStreams, heldRetry } from "../../src/services/events/EventStreams.js"

const owner: Owner = { userId: UserId.make("00000000-0000-7000-8000-000000000001"), mode: "test" }

const held: FeedTail = { items: [], nextCursor: FEED_START, hasMore: false, held: true }
const listed: FeedTail = {
  items: [{ json: `{"id":"evt_1"}`, cursor: { xid: "7", seq: "1" } }],
  nextCursor: { xid: "7", seq: "1" },
  hasMore: false,
  held: false
}

/**
 * A feed whose events stay held back for the first `holds` reads, then listed: each read is
 * announced on `reads`, so that the test knows when the stream has read. Nothing wakes the stream
 * (no notifications): it reads again only on its own.
 */
const feedHeldFor = (holds: number, reads: Queue.Queue<number>) => {
  let count = 0
  return Layer.succeed(EventRepository, {
    head: () => Effect.succeed(FEED_START),
    tail: () =>
      Effect.suspend(() => {
        count += 1
        return Effect.as(Queue.offer(reads, count), count <= holds ? held : listed)
      }),
    page: () => Effect.die("not used"),
    find: () => Effect.die("not used"),
    timeline: () => Effect.die("not used"),
    purge: () => Effect.die("not used")
  })
}

/** Whether the stream reads the feed again within `duration` more of the test clock; `false` if not. */
const readsWithin = (reads: Queue.Queue<number>, duration: Duration.DurationInput) =>
  Effect.gen(function*() {
    yield* TestClock.adjust(duration)
    // Let the woken stream run its read.
    for (let i = 0; i < 10; i++) yield* Effect.yieldNow()
    return Option.isSome(yield* Queue.poll(reads))
  })

/** Follows a feed held back for six reads, checking each read against the test clock. */
const followedThroughHolds = (reads: Queue.Queue<number>) =>
  Effect.gen(function*() {
    const streams = yield* EventStreams
    const frames = yield* Queue.unbounded<string>()
    yield* streams.follow(owner, Option.some(FEED_START)).pipe(
      Stream.runForEach((frame) => Queue.offer(frames, frame)),
      Effect.forkScoped
    )
    expect(yield* Queue.take(frames)).toBe(": connected\n\n")
    expect(yield* Queue.take(reads)).toBe(1)
    // Each wait: no read a millisecond before it ends, one read when it does.
    for (const wait of [2, 4, 8, 16, 20]) {
      expect(yield* readsWithin(reads, Duration.millis(wait - 1))).toBe(false)
      expect(yield* readsWithin(reads, Duration.millis(1))).toBe(true)
    }
    // The seventh read lists the event: the stream sends it.
    expect(yield* readsWithin(reads, Duration.millis(20))).toBe(true)
    expect(yield* Queue.take(frames)).toBe(`id: 7_1\ndata: {"id":"evt_1"}\n\n`)
  })

describe("event streams behind a hold", () => {
  it("read again after 2 ms, doubling to 20 ms while the hold lasts", () => {
    expect([1, 2, 3, 4, 5, 6, 50].map((reads) => Duration.toMillis(heldRetry(reads)))).toEqual([2, 4, 8, 16, 20, 20, 20])
  })

  it.scoped("a stream whose events are held back reads again after 2, 4, 8, 16, then every 20 ms, and sends them once listed", () =>
    Effect.gen(function*() {
      const reads = yield* Queue.unbounded<number>()
      yield* followedThroughHolds(reads).pipe(Effect.provide(EventStreams.Default.pipe(Layer.provide(feedHeldFor(6, reads)))))
    }))
})
