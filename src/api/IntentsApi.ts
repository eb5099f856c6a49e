import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { MAX_INT4, NulFreeString, rule } from "../domain/Errors.js"
import { IntentId } from "../domain/Ids.js"
import { CreateIntentPayload, IntentStatus, TradeIntent } from "../domain/Intent.js"
import {
  BrokerNotFoundResponse,
  DuplicateIntentResponse,
  IntentNotCancelableResponse,
  IntentNotFoundResponse,
  pathId,
  QuotaExceededResponse,
  UnavailableResponse,
  UnprocessableResponse
} from "./ApiErrors.js"
import {
  exampleCanceledIntent,
  exampleCreateIntent,
  exampleIntent,
  exampleIntentPage,
  operation
} from "./OpenApiDocs.js"
import { ApiKeyAuth } from "./Security.js"

/** A page number: an integer of at least 1, and at most what an int4 holds (no offset overflows). */
const PageNumber = Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, MAX_INT4)).annotations({
  message: (issue) => ({
    message: Number(issue.actual) > MAX_INT4
      ? `must be at most ${MAX_INT4}`
      : "must be an integer of at least 1",
    override: true
  })
})
const PageSize = Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100)).annotations(
  rule("must be an integer from 1 to 100")
)

/** The page `GET /intents` answers when `page` or `page_size` is left out. */
export const DEFAULT_PAGE = 1
export const DEFAULT_PAGE_SIZE = 20

/**
 * `page` and `page_size` stay optional once decoded (the handler fills in the defaults): the typed
 * client sends the decoded side, and `optionalWith(…, { default })` would make it name both. The
 * OpenAPI document describes a parameter by its string side, so the range is annotated here.
 */
export const ListIntentsParams = Schema.Struct({
  page: Schema.optional(PageNumber).annotations({
    description: `a number between 1 and ${MAX_INT4}`,
    title: `between(1, ${MAX_INT4})`
  }),
  page_size: Schema.optional(PageSize).annotations({ description: "a number between 1 and 100", title: "between(1, 100)" }),
  status: Schema.optional(IntentStatus),
  symbol: Schema.optional(NulFreeString),
  broker_id: Schema.optional(NulFreeString)
})
export type ListIntentsParams = typeof ListIntentsParams.Type

export class IntentPage extends Schema.Class<IntentPage>("IntentPage")({
  items: Schema.Array(TradeIntent),
  page: Schema.Int,
  page_size: Schema.Int,
  total_items: Schema.Int,
  total_pages: Schema.Int
}) {}

const IntentPath = Schema.Struct({ id: pathId(IntentId, "IntentNotFound") })
const ExternalIdPath = Schema.Struct({ intent_id: Schema.String })

/** The v1 Trade Intent endpoints. */
export class IntentsApi extends HttpApiGroup.make("intents")
  .add(
    HttpApiEndpoint.post("createIntent", "/intents")
      .setPayload(CreateIntentPayload)
      .addSuccess(TradeIntent, { status: 201 })
      .addError(UnprocessableResponse)
      .addError(BrokerNotFoundResponse)
      .addError(DuplicateIntentResponse)
      .addError(QuotaExceededResponse)
      .addError(UnavailableResponse)
      .annotateContext(operation({
        summary: "Create a Trade Intent",
        description: "Records the intent (`pending`, no orders) and queues it for routing to the named broker " +
          "connection. `intent_id` is the idempotency key: a retry with the same one creates nothing and answers " +
          "409 with `Location` at the original. Checks in order: key (401), rate limit (429), scope " +
          "`intents:write` (403), body (400), rules (422), connection (404, or 403 for the other mode), " +
          "duplicate (409), monthly quota (429).",
        responses: {
          201: "The Trade Intent, created: `pending`, no orders yet",
          429: "Over the key's rate limit (`rate_limit_exceeded`) or the monthly intent quota (`quota_exceeded`)"
        },
        request: exampleCreateIntent,
        examples: { 201: exampleIntent }
      }))
  )
  .add(
    HttpApiEndpoint.get("getIntent", "/intents/:id")
      .setPath(IntentPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .annotateContext(operation({
        summary: "Look a Trade Intent up by its id",
        description: "The intent with its orders and fills, if it belongs to this key's user and mode; a malformed " +
          "id is a 404 like an unknown one. Needs `intents:read`.",
        responses: { 200: "The Trade Intent" },
        examples: { 200: exampleIntent }
      }))
  )
  .add(
    HttpApiEndpoint.get("getIntentByExternalId", "/intents/by-external-id/:intent_id")
      .setPath(ExternalIdPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .annotateContext(operation({
        summary: "Look a Trade Intent up by the caller's intent_id",
        description: "The same lookup, naming the intent by the `intent_id` it was created with (unique per user " +
          "and mode): for a client whose creation timed out before it saw the id. Needs `intents:read`.",
        responses: { 200: "The Trade Intent" },
        examples: { 200: exampleIntent }
      }))
  )
  .add(
    HttpApiEndpoint.post("cancelIntentByExternalId", "/intents/by-external-id/:intent_id/cancel")
      .setPath(ExternalIdPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .addError(IntentNotCancelableResponse)
      .annotateContext(operation({
        summary: "Cancel a Trade Intent that is not final, named by the caller's intent_id",
        description: "The same cancel as `POST /api/v1/intents/{id}/cancel`, naming the intent by its `intent_id`: " +
          "same answers, same wait for the broker. Needs `intents:write`.",
        responses: { 200: "The Trade Intent after the cancel: usually `canceled`, or what the broker made of it meanwhile" },
        examples: { 200: exampleCanceledIntent }
      }))
  )
  .add(
    HttpApiEndpoint.post("cancelIntent", "/intents/:id/cancel")
      .setPath(IntentPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .addError(IntentNotCancelableResponse)
      .annotateContext(operation({
        summary: "Cancel a Trade Intent that is not final",
        description: "An intent no worker has submitted yet is canceled at once; otherwise the cancel is sent to the " +
          "broker and the response waits up to 3 s for the outcome: usually `canceled`, or whatever the order " +
          "became meanwhile (fills already made are kept). 409 when the intent is final. Needs `intents:write`.",
        responses: { 200: "The Trade Intent after the cancel: usually `canceled`, or what the broker made of it meanwhile" },
        examples: { 200: exampleCanceledIntent }
      }))
  )
  .add(
    HttpApiEndpoint.get("listIntents", "/intents")
      .setUrlParams(ListIntentsParams)
      .addSuccess(IntentPage)
      .annotateContext(operation({
        summary: "List Trade Intents, newest first",
        description: "A page of this key's user's intents in its mode, newest first (`created_at` descending, then " +
          "`id`), filtered by `status`, `symbol` (case-insensitive) and `broker_id`. `page` defaults to 1, " +
          "`page_size` to 20; a page past the end has empty `items` and true totals. Needs `intents:read`.",
        responses: { 200: "A page of Trade Intents with the totals" },
        examples: { 200: exampleIntentPage }
      }))
  )
  .middleware(ApiKeyAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Description, "Trade Intents: create (your intent_id is the idempotency key), look up, list and cancel. Bearer API key; a key sees only its own mode's intents.")
{}
