import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { type EventCursor, formatCursor } from "../../domain/Event.js"
import type { Owner } from "../../domain/Ids.js"
import { EVENTS_CHANNEL } from "../../sql/Channels.js"
import { Notifications } from "../../sql/Database.js"
import { EventRepository } from "./EventRepository.js"

/**
 * How often an idle event stream sends a comment line, so that clients and proxies see it alive:
 * read once, when `EventStreams` is built.
 */
export class StreamHeartbeat extends Context.Reference<StreamHeartbeat>()("StreamHeartbeat", {
  defaultValue: () => Duration.seconds(15)
}) {}

/** Event streams one API key may hold open at once on an instance. */
export const MAX_STREAMS_PER_KEY = 5

/**
 * How long a stream waits before reading again while committed events after its cursor are held
 * back, by how many reads in a row found them so: 2 ms, doubling up to 20 ms. A hold usually ends
 * within a few milliseconds (the older transaction is a batch about to commit), and the commit that
 * ends it wakes only the streams of the users it wrote for; a hold that lasts (a long transaction
 * elsewhere in the database) is read again every 20 ms at most.
 */
export const heldRetry = (reads: number): Duration.Duration =>
  Duration.millis(Math.min(2 * 2 ** Math.max(0, reads - 1), 20))

/** One event as a Server-Sent Event: its cursor as `id`, the envelope (one line of JSON) as `data`. */
const frame = (json: string, cursor: EventCursor) => `id: ${formatCursor(cursor)}\ndata: ${json}\n\n`

const ownerKey = (owner: Owner) => `${owner.userId}:${owner.mode}`

/**
 * The events of a user and mode as they commit, for Server-Sent Events: woken by the notification
 * each commit that writes events sends (one LISTEN per instance, shared by every stream), never by
 * polling while idle.
 */
export class EventStreams extends Effect.Service<EventStreams>()("EventStreams", {
  scoped: Effect.gen(function*() {
    const repository = yield* EventRepository
    const notifications = yield* Effect.serviceOption(Notifications)
    const heartbeat = yield* StreamHeartbeat
    // The wake-up signal of every open stream, by the user and mode it follows: a commit wakes only
    // the streams of the users it wrote events for.
    const waiting = new Map<string, Set<Queue.Queue<void>>>()
    if (Option.isSome(notifications)) {
      yield* notifications.value.listen(EVENTS_CHANNEL).pipe(
        Stream.runForEach((payload) =>
          Effect.forEach(waiting.get(payload) ?? [], (signal) => Queue.offer(signal, undefined), { discard: true })
        ),
        Effect.catchAllCause((cause) => Effect.logWarning("event notifications interrupted; listening again", cause)),
        Effect.repeat(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
    }
    const open = new Map<string, number>()

    /** A slot for one more stream of `keyId`, released with the stream; none past the bound. */
    const admit = (keyId: string) =>
      Effect.sync(() => {
        const count = open.get(keyId) ?? 0
        if (count >= MAX_STREAMS_PER_KEY) return false
        open.set(keyId, count + 1)
        return true
      })

    const release = (keyId: string) =>
      Effect.sync(() => {
        const count = (open.get(keyId) ?? 1) - 1
        if (count <= 0) open.delete(keyId)
        else open.set(keyId, count)
      })

    /**
     * The SSE frames of `owner`'s events after `after` (or from now on), each once and in the
     * feed's order, with a heartbeat comment when idle. The stream holds one of the key's slots.
     */
    const follow = (owner: Owner, after: Option.Option<EventCursor>) =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const key = ownerKey(owner)
        // Registered before the first read: a commit meanwhile wakes this stream. One pending
        // signal is enough: a read covers every commit before it.
        const woken = yield* Effect.acquireRelease(
          Effect.map(Queue.sliding<void>(1), (signal) => {
            const set = waiting.get(key) ?? new Set()
            waiting.set(key, set.add(signal))
            return signal
          }),
          (signal) =>
            Effect.sync(() => {
              const set = waiting.get(key)
              set?.delete(signal)
              if (set?.size === 0) waiting.delete(key)
            })
        )
        // A stream ends whenever its client goes: its own query is never interrupted halfway, since
        // cancelling one at the database can hit the next query on the same pooled connection. (Its
        // reads are the repository's batched statements, which run to their end without it.)
        let cursor = Option.isSome(after) ? after.value : yield* Effect.uninterruptible(repository.head(owner))

        // What the stream does next: read the feed (at first, after a wake-up, while more is listable),
        // wait for a wake-up or the heartbeat, or read again shortly (events held back).
        let next: "read" | "wait" | "retry" = "read"
        // Reads in a row that found events held back.
        let held = 0
        const step = Effect.gen(function*() {
          switch (next) {
            case "read": {
              // The read that follows covers every wake-up so far; later ones stay queued.
              yield* Queue.takeAll(woken)
              const tail = yield* repository.tail(owner, cursor)
              cursor = tail.nextCursor
              held = tail.held ? held + 1 : 0
              next = tail.hasMore ? "read" : tail.held ? "retry" : "wait"
              return Chunk.fromIterable(tail.items.map((item) => frame(item.json, item.cursor)))
            }
            case "retry": {
              // Committed events after the cursor are held back behind an older transaction in
              // flight. They are listable once it ends, and its commit wakes only the streams of the
              // users it wrote for: read again on the next wake-up or shortly, whichever comes first.
              yield* Effect.timeout(Queue.take(woken), heldRetry(held)).pipe(Effect.ignore)
              next = "read"
              return Chunk.empty<string>()
            }
            case "wait": {
              const wake = yield* Effect.timeout(Queue.take(woken), heartbeat).pipe(Effect.option)
              if (Option.isNone(wake)) return Chunk.of(": heartbeat\n\n")
              next = "read"
              return Chunk.empty<string>()
            }
          }
        })

        return Stream.concat(Stream.make(": connected\n\n"), Stream.repeatEffectChunk(step))
      }))

    return { admit, release, follow } as const
  })
}) {}
