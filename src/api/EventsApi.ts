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
import { exampleEvent, exampleEventPage, operation } from "./OpenApiDocs.js"
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
      .annotateContext(operation({
        summary: "List events in commit order, from a cursor",
        description: "The events of this key's user and mode (kept 30 days) in the order their transactions " +
          "committed, after `after` (the feed's start without it), at most `limit` (default 50), filtered by `type` " +
          "and `intent_id`. Read on from `next_cursor`; `has_more` says whether there is more now. Needs `intents:read`.",
        responses: { 200: "A page of events, oldest first, and the cursor to read on from" },
        examples: { 200: exampleEventPage }
      }))
  )
  .add(
    HttpApiEndpoint.get("streamEvents", "/events/stream")
      .setUrlParams(Schema.Struct({ after: Schema.optional(EventCursorFromString) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(EventCursorFromString) }))
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
      .addError(RateLimitedResponse)
      .annotateContext(operation({
        summary: "Follow events as they commit (Server-Sent Events)",
        description: "One `data:` line per event (the envelope) with its cursor as `id:`; resumes after " +
          "`Last-Event-ID` or `?after=`, from now on without either; a comment line every 15 s when idle; at most 5 " +
          "open per API key (429 beyond). Needs `intents:read`.",
        responses: { 200: "An open `text/event-stream` of events" }
      }))
  )
  .add(
    HttpApiEndpoint.get("getEvent", "/events/:event_id")
      .setPath(Schema.Struct({ event_id: Schema.String }))
      .addSuccess(IntentEvent)
      .addError(EventNotFoundResponse)
      .annotateContext(operation({
        summary: "Look an event up by its id",
        description: "One event (the same envelope webhooks deliver), by the `evt_…` id of its delivery's " +
          "`sr-event-id`, if it belongs to this key's user and mode and is under 30 days old. Needs `intents:read`.",
        responses: { 200: "The event" },
        examples: { 200: exampleEvent }
      }))
  )
  .add(
    HttpApiEndpoint.get("intentEvents", "/intents/:id/events")
      .setPath(Schema.Struct({ id: pathId(IntentId, "IntentNotFound") }))
      .addSuccess(EventTimeline)
      .addError(IntentNotFoundResponse)
      .annotateContext(operation({
        summary: "A Trade Intent's events, oldest first",
        description: "The timeline of one intent of this key's user and mode: every event it has had in the last " +
          "30 days, oldest first. Needs `intents:read`.",
        responses: { 200: "The intent's events, oldest first" },
        examples: { 200: { items: [exampleEvent] } }
      }))
  )
  .middleware(ApiKeyAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Description, "Every state change of your intents as events, pulled in commit order from a cursor, or followed live as Server-Sent Events. Kept 30 days.")
{}
