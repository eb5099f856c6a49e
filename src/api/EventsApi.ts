import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { rule } from "../domain/Errors.js"
import { EventCursorFromString, IntentEvent } from "../domain/Event.js"
import { IntentId } from "../domain/Ids.js"
import { EventType } from "../domain/Webhook.js"
import { EventNotFoundResponse, IntentNotFoundResponse, pathId, RateLimitedResponse } from "./ApiErrors.js"
import { ApiKeyAuth } from "./Security.js"

const Limit = Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100)).annotations(
  rule("must be an integer from 1 to 100")
)

export const ListEventsParams = Schema.Struct({
  after: Schema.optional(EventCursorFromString),
  limit: Schema.optionalWith(Limit, { default: () => 50 }),
  type: Schema.optional(EventType.annotations(rule(`must be one of: ${EventType.literals.join(", ")}`))),
  intent_id: Schema.optional(IntentId.annotations(rule("must be a Trade Intent's id (a UUID)")))
})

/** A page of the feed, oldest first: read on from `next_cursor`; `has_more` says whether to at once. */
export class EventFeedPage extends Schema.Class<EventFeedPage>("EventFeedPage")({
  items: Schema.Array(IntentEvent),
  next_cursor: Schema.String,
  has_more: Schema.Boolean
}) {}

export class EventTimeline extends Schema.Class<EventTimeline>("EventTimeline")({
  items: Schema.Array(IntentEvent)
}) {}

/** The events of the caller's intents, pulled: the same events webhooks deliver, kept 30 days. */
export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("listEvents", "/events")
      .setUrlParams(ListEventsParams)
      .addSuccess(EventFeedPage)
      .annotate(OpenApi.Summary, "List events in commit order, from a cursor")
  )
  .add(
    HttpApiEndpoint.get("streamEvents", "/events/stream")
      .setUrlParams(Schema.Struct({ after: Schema.optional(EventCursorFromString) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(EventCursorFromString) }))
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
      .addError(RateLimitedResponse)
      .annotate(OpenApi.Summary, "Follow events as they commit (Server-Sent Events)")
      .annotate(
        OpenApi.Description,
        "One `data:` line per event (the envelope) with its cursor as `id:`; resumes after `Last-Event-ID` " +
          "or `?after=`, from now on without either; a comment line every 15 s when idle; at most 5 open per API key."
      )
  )
  .add(
    HttpApiEndpoint.get("getEvent", "/events/:event_id")
      .setPath(Schema.Struct({ event_id: Schema.String }))
      .addSuccess(IntentEvent)
      .addError(EventNotFoundResponse)
      .annotate(OpenApi.Summary, "Look an event up by its id")
  )
  .add(
    HttpApiEndpoint.get("intentEvents", "/intents/:id/events")
      .setPath(Schema.Struct({ id: pathId(IntentId, "IntentNotFound") }))
      .addSuccess(EventTimeline)
      .addError(IntentNotFoundResponse)
      .annotate(OpenApi.Summary, "A Trade Intent's events, oldest first")
  )
  .middleware(ApiKeyAuth)
  .prefix("/api/v1")
{}
