import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { EVENT_RETENTION, type EventPage, FEED_START, IntentEvent, TAIL_PAGE } from "../../domain/Event.js"
import type { IntentId, Owner } from "../../domain/Ids.js"
import type { EventRepository, FeedQuery } from "./EventRepository.js"

interface Logged {
  readonly owner: Owner
  readonly intentId: IntentId
  readonly event: IntentEvent
  readonly seq: number
}

/** Where events are written in memory: in one sequence, every write committed at once. */
export class EventLog extends Context.Tag("InMemoryEventRepository/EventLog")<EventLog, {
  readonly append: (owner: Owner, intentId: IntentId, event: IntentEvent) => Effect.Effect<void>
}>() {}

const encodeEvent = Schema.encodeSync(IntentEvent)

const sameOwner = (a: Owner, b: Owner) => a.userId === b.userId && a.mode === b.mode

/** The repository over an in-memory log (its cursors' `xid` is always 0), with the log's writer. */
export const makeContext = (tag: typeof EventRepository) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<Logged>>([])
    const kept = (since: DateTime.Utc) => (entry: Logged) => DateTime.greaterThanOrEqualTo(entry.event.created_at, since)
    const pageOf = (entries: ReadonlyArray<Logged>, owner: Owner, query: FeedQuery): EventPage => {
      const after = Number(query.after.seq)
      const matching = entries.filter((entry) =>
        sameOwner(entry.owner, owner) && entry.seq > after && kept(query.since)(entry) &&
        (query.type === undefined || entry.event.type === query.type) &&
        (query.intentId === undefined || entry.intentId === query.intentId)
      )
      const items = matching.slice(0, query.limit).map((entry) => ({
        json: JSON.stringify(encodeEvent(entry.event)),
        cursor: { xid: "0", seq: String(entry.seq) }
      }))
      return { items, nextCursor: items.at(-1)?.cursor ?? query.after, hasMore: matching.length > query.limit }
    }
    const repository = tag.of({
      page: (owner, query) => Effect.map(Ref.get(log), (entries) => pageOf(entries, owner, query)),
      head: (owner) =>
        Effect.map(Ref.get(log), (entries) => {
          const last = entries.filter((entry) => sameOwner(entry.owner, owner)).at(-1)
          return last === undefined ? FEED_START : { xid: "0", seq: String(last.seq) }
        }),
      // Every write is committed at once: nothing is ever held back.
      tail: (owner, after) =>
        Effect.zipWith(Ref.get(log), DateTime.now, (entries, now) => ({
          ...pageOf(entries, owner, { after, limit: TAIL_PAGE, since: DateTime.subtractDuration(now, EVENT_RETENTION) }),
          held: false
        })),
      find: (owner, id, since) =>
        Effect.map(Ref.get(log), (entries) =>
          Option.fromNullable(entries.find((entry) => entry.event.id === id && sameOwner(entry.owner, owner) && kept(since)(entry)))
            .pipe(Option.map((entry) => entry.event))),
      timeline: (owner, intentId, since) =>
        Effect.map(Ref.get(log), (entries) => {
          const mine = entries.filter((entry) => entry.intentId === intentId)
          return mine.length === 0 || !mine.every((entry) => sameOwner(entry.owner, owner))
            ? Option.none()
            : Option.some(mine.filter(kept(since)).map((entry) => entry.event))
        }),
      purge: (before, limit) =>
        Ref.modify(log, (entries) => {
          const old = entries.filter((entry) => DateTime.lessThan(entry.event.created_at, before)).slice(0, limit)
          return [old.length, entries.filter((entry) => !old.includes(entry))]
        })
    })
    const writer = EventLog.of({
      append: (owner, intentId, event) =>
        Ref.update(log, (entries) => [...entries, { owner, intentId, event, seq: (entries.at(-1)?.seq ?? 0) + 1 }])
    })
    return Context.make(tag, repository).pipe(Context.add(EventLog, writer))
  })
