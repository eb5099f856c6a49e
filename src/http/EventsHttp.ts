import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { Api } from "../api/Api.js"
import { EventTimeline } from "../api/EventsApi.js"
import { CurrentPrincipal } from "../api/Security.js"
import { RateLimited } from "../domain/Auth.js"
import { formatCursor } from "../domain/Event.js"
import { Events } from "../services/events/Events.js"
import { EventStreams, MAX_STREAMS_PER_KEY } from "../services/events/EventStreams.js"

export const EventsHttpLive = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const events = yield* Events
    const streams = yield* EventStreams
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
          // An `EventFeedPage`, written as is: each event is already its JSON envelope.
          return HttpServerResponse.text(
            `{"items":[${page.items.map((item) => item.json).join(",")}],"next_cursor":${
              JSON.stringify(formatCursor(page.nextCursor))
            },"has_more":${page.hasMore}}`,
            { contentType: "application/json" }
          )
        }))
      .handle("streamEvents", ({ headers, urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          if (!(yield* streams.admit(principal.keyId))) {
            return yield* new RateLimited({
              retry_after: 5,
              detail: `At most ${MAX_STREAMS_PER_KEY} event streams may be open at once per API key`
            })
          }
          const after = Option.orElse(
            Option.fromNullable(headers["last-event-id"]),
            () => Option.fromNullable(urlParams.after)
          )
          const frames = streams.follow(principal.owner, after).pipe(
            Stream.tapErrorCause((cause) => Effect.logWarning("an event stream failed", cause)),
            Stream.ensuring(streams.release(principal.keyId))
          )
          return HttpServerResponse.stream(Stream.encodeText(frames), {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
          })
        }))
      .handle("getEvent", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => events.get(principal.owner, path.event_id)))
      .handle("intentEvents", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          Effect.map(events.timeline(principal.owner, path.id), (items) => new EventTimeline({ items }))))
  }))
