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
      .annotate(OpenApi.Summary, "Create a Trade Intent")
  )
  .add(
    HttpApiEndpoint.get("getIntent", "/intents/:id")
      .setPath(IntentPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .annotate(OpenApi.Summary, "Look a Trade Intent up by its id")
  )
  .add(
    HttpApiEndpoint.get("getIntentByExternalId", "/intents/by-external-id/:intent_id")
      .setPath(ExternalIdPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .annotate(OpenApi.Summary, "Look a Trade Intent up by the caller's intent_id")
  )
  .add(
    HttpApiEndpoint.post("cancelIntentByExternalId", "/intents/by-external-id/:intent_id/cancel")
      .setPath(ExternalIdPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .addError(IntentNotCancelableResponse)
      .annotate(OpenApi.Summary, "Cancel a Trade Intent that is not final, named by the caller's intent_id")
  )
  .add(
    HttpApiEndpoint.post("cancelIntent", "/intents/:id/cancel")
      .setPath(IntentPath)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .addError(IntentNotCancelableResponse)
      .annotate(OpenApi.Summary, "Cancel a Trade Intent that is not final")
  )
  .add(
    HttpApiEndpoint.get("listIntents", "/intents")
      .setUrlParams(ListIntentsParams)
      .addSuccess(IntentPage)
      .annotate(OpenApi.Summary, "List Trade Intents, newest first")
  )
  .middleware(ApiKeyAuth)
  .prefix("/api/v1")
{}
