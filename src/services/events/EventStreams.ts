import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { EVENT_RETENTION, type EventCursor, formatCursor, IntentEvent } from "../../domain/Event.js"
import type { Owner } from "../../domain/Ids.js"
import { EVENTS_CHANNEL } from "../../sql/Channels.js"
import { Notifications } from "../../sql/Database.js"
import { EventRepository } from "./EventRepository.js"

/** How often an idle event stream sends a comment line, so that clients and proxies see it alive. */
export class StreamHeartbeat extends Context.Reference<StreamHeartbeat>()("StreamHeartbeat", {
  defaultValue: () => Duration.seconds(15)
}) {}

/** Event streams one API key may hold open at once on an instance. */
export const MAX_STREAMS_PER_KEY = 5

/** How long a stream waits before asking again while its next events wait behind a transaction in flight. */
const HELD_BACK_RETRY = Duration.millis(20)

const PAGE = 100

const encodeEvent = Schema.encodeSync(IntentEvent)

/** One event as a Server-Sent Event: its cursor as `id`, the envelope as one `data` line. */
const frame = (event: IntentEvent, cursor: EventCursor) =>
  `id: ${formatCursor(cursor)}\ndata: ${JSON.stringify(encodeEvent(event))}\n\n`

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
    const wakeups = yield* PubSub.sliding<string>(4096)
    if (Option.isSome(notifications)) {
      yield* notifications.value.listen(EVENTS_CHANNEL).pipe(
        Stream.runForEach((payload) => PubSub.publish(wakeups, payload)),
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
        const heartbeat = yield* StreamHeartbeat
        // Subscribed before the first read: a commit meanwhile wakes this stream.
        const woken = yield* PubSub.subscribe(wakeups)
        let cursor = Option.isSome(after) ? after.value : yield* repository.head(owner)
        const key = ownerKey(owner)

        /** Every event listable now after the cursor, as frames; the cursor moves past them. */
        const drain = Effect.gen(function*() {
          const frames: Array<string> = []
          for (;;) {
            const since = DateTime.subtractDuration(yield* DateTime.now, EVENT_RETENTION)
            const page = yield* repository.page(owner, { after: cursor, limit: PAGE, since })
            for (const item of page.items) frames.push(frame(item.event, item.cursor))
            cursor = page.nextCursor
            if (!page.hasMore) return frames
          }
        })

        const ownWakeup = Queue.take(woken).pipe(Effect.repeat({ until: (payload) => payload === key }))

        const step = Effect.gen(function*() {
          yield* Queue.takeAll(woken)
          const frames = yield* drain
          if (frames.length > 0) return Chunk.fromIterable(frames)
          if (yield* repository.heldBack(owner, cursor)) {
            yield* Effect.sleep(HELD_BACK_RETRY)
            return Chunk.empty<string>()
          }
          const wake = yield* Effect.timeout(ownWakeup, heartbeat).pipe(Effect.option)
          return Option.isSome(wake) ? Chunk.empty<string>() : Chunk.of(": heartbeat\n\n")
        })

        return Stream.concat(Stream.make(": connected\n\n"), Stream.repeatEffectChunk(step))
      }))

    return { admit, release, follow } as const
  })
}) {}
