import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type { EventCursor, EventPage, IntentEvent } from "../../domain/Event.js"
import type { IntentId, Owner } from "../../domain/Ids.js"
import type { EventType } from "../../domain/Webhook.js"
import * as InMemoryEventRepository from "./InMemoryEventRepository.js"
import * as SqlEventRepository from "./SqlEventRepository.js"

/** What a page of the feed asks for: events after `after`, written since `since` (the retention). */
export interface FeedQuery {
  readonly after: EventCursor
  readonly limit: number
  readonly since: DateTime.Utc
  readonly type?: EventType | undefined
  readonly intentId?: IntentId | undefined
}

/** The events of the intents' state changes, as a feed in commit order per user and mode. */
export class EventRepository extends Context.Tag("EventRepository")<EventRepository, {
  /**
   * Events of `owner` after `query.after`, oldest first. Only events of transactions older than
   * every transaction still in flight are listed, so one that commits later never lands behind a
   * cursor already returned.
   */
  readonly page: (owner: Owner, query: FeedQuery) => Effect.Effect<EventPage>
  /** The cursor after the last event `page` lists now: where a reader who wants only new events starts. */
  readonly head: (owner: Owner) => Effect.Effect<EventCursor>
  /**
   * Whether committed events written since `since` lie after `after`. For a reader that has read
   * every page up to `after`, they are coming: held back behind an older transaction still in
   * flight, or listable since its last page (that older transaction committed meanwhile, and its
   * commit woke only the readers of the users it wrote for).
   */
  readonly unread: (owner: Owner, after: EventCursor, since: DateTime.Utc) => Effect.Effect<boolean>
  readonly find: (owner: Owner, id: string, since: DateTime.Utc) => Effect.Effect<Option.Option<IntentEvent>>
  /** An intent's events, oldest first; none if the intent is not `owner`'s. */
  readonly timeline: (
    owner: Owner,
    intentId: IntentId,
    since: DateTime.Utc
  ) => Effect.Effect<Option.Option<ReadonlyArray<IntentEvent>>>
  /** Deletes up to `limit` events written before `before` (with their deliveries); how many went. */
  readonly purge: (before: DateTime.Utc, limit: number) => Effect.Effect<number>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** On the `SqlClient` in context. */
  static readonly layerSql = Layer.effect(this, SqlEventRepository.make)
  /** In memory: the events appended through {@link InMemoryEventRepository.EventLog}. */
  static readonly layerInMemory = Layer.effectContext(InMemoryEventRepository.makeContext(this))
}
