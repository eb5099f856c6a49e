import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Api } from "../api/Api.js"
import { EventFeedPage, EventTimeline } from "../api/EventsApi.js"
import { CurrentPrincipal } from "../api/Security.js"
import { formatCursor } from "../domain/Event.js"
import { Events } from "../services/events/Events.js"

export const EventsHttpLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const events = yield* Events
    return handlers
      .handle("listEvents", ({ urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const page = yield* events.page(principal.owner, {
            after: urlParams.after,
            limit: urlParams.limit,
            type: urlParams.type,
            intentId: urlParams.intent_id
          })
          return new EventFeedPage({
            items: page.items.map((item) => item.event),
            next_cursor: formatCursor(page.nextCursor),
            has_more: page.hasMore
          })
        }))
      .handle("getEvent", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => events.get(principal.owner, path.event_id)))
      .handle("intentEvents", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          Effect.map(events.timeline(principal.owner, path.id), (items) => new EventTimeline({ items }))))
  }))
