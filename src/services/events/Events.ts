import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { EVENT_RETENTION, type EventCursor, EventNotFound, FEED_START } from "../../domain/Event.js"
import type { IntentId, Owner } from "../../domain/Ids.js"
import { IntentNotFound } from "../../domain/Intent.js"
import type { EventType } from "../../domain/Webhook.js"
import { EventRepository } from "./EventRepository.js"
import * as Tracing from "../../Tracing.js"

/** What a reader of the feed asks for; from the start of what is kept unless `after` says otherwise. */
export interface FeedRequest {
  readonly after?: EventCursor | undefined
  readonly limit: number
  readonly type?: EventType | undefined
  readonly intentId?: IntentId | undefined
}

/** The events API's use cases: the feed, one event, an intent's timeline; only what is kept (30 days). */
export class Events extends Effect.Service<Events>()("Events", {
  effect: Effect.gen(function*() {
    const repository = yield* EventRepository
    const since = Effect.map(DateTime.now, DateTime.subtractDuration(EVENT_RETENTION))

    return {
      page: Effect.fnUntraced(function*(owner: Owner, request: FeedRequest) {
        return yield* repository.page(owner, {
          after: request.after ?? FEED_START,
          limit: request.limit,
          since: yield* since,
          type: request.type,
          intentId: request.intentId
        })
      }, Tracing.span("Events.page")),
      get: Effect.fnUntraced(function*(owner: Owner, id: string) {
        return yield* Effect.flatMap(
          repository.find(owner, id, yield* since),
          Option.match({ onNone: () => Effect.fail(new EventNotFound()), onSome: Effect.succeed })
        )
      }, Tracing.span("Events.get")),
      timeline: Effect.fnUntraced(function*(owner: Owner, intentId: IntentId) {
        return yield* Effect.flatMap(
          repository.timeline(owner, intentId, yield* since),
          Option.match({ onNone: () => Effect.fail(new IntentNotFound()), onSome: Effect.succeed })
        )
      }, Tracing.span("Events.timeline"))
    } as const
  })
}) {}
