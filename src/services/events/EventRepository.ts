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

/** A reader's next page of the feed, and whether events after it are held back (see `tail`). */
export interface FeedTail extends EventPage {
  readonly held: boolean
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
   * For a reader following `owner`'s feed as it commits: the next page after `after` (up to
   * `TAIL_PAGE` events the retention keeps by the clock now, listed as `page` lists them), and
   * whether committed events after `after` are held back behind an older transaction still in
   * flight. Those are listable soon, once it ends, and its commit may wake only the readers of the
   * users it wrote for: read again shortly. Readers that ask at once share one statement.
   */
  readonly tail: (owner: Owner, after: EventCursor) => Effect.Effect<FeedTail>
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
  /** On the `SqlClient` in context; its batched reads live as long as the Layer. */
  static readonly layerSql = Layer.scoped(this, SqlEventRepository.make)
  /** In memory: the events appended through {@link InMemoryEventRepository.EventLog}. */
  static readonly layerInMemory = Layer.effectContext(InMemoryEventRepository.makeContext(this))
}
