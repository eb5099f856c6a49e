import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { Api } from "../api/Api.js"
import { DEFAULT_PAGE, DEFAULT_PAGE_SIZE, type ListIntentsParams } from "../api/IntentsApi.js"
import { CurrentPrincipal } from "../api/Security.js"
import type { Owner } from "../domain/Ids.js"
import type { DuplicateIntent } from "../domain/Intent.js"
import { Intents } from "../services/intents/Intents.js"
import * as ResponseHeaders from "./ResponseHeaders.js"

/** A 409 points at the intent that already holds the intent_id; a 503 says when to retry. */
const creationHeaders = (error: { readonly _tag: string } | DuplicateIntent) =>
  "existing" in error && error._tag === "DuplicateIntent" && error.existing !== undefined
    ? ResponseHeaders.add({ location: `/api/v1/intents/${error.existing}` })
    : error._tag === "Unavailable"
    ? ResponseHeaders.retryAfter(1)
    : Effect.void

/** A JSON body the database already wrote in the API's format, sent as it is. */
export const jsonText = (body: string) => HttpServerResponse.text(body, { contentType: "application/json" })

/** A new intent's JSON as its creation's statement returned it, sent as it is with 201. */
const created = (intent: string) => HttpServerResponse.text(intent, { status: 201, contentType: "application/json" })

/**
 * A page of the owner's intents, newest first, as `GET /intents` answers it (the v1 API's, the
 * operator's and the dashboard's): the envelope around the page the database built as JSON.
 */
export const intentPage = (intents: Intents, owner: Owner, params: ListIntentsParams) => {
  const page = params.page ?? DEFAULT_PAGE
  const pageSize = params.page_size ?? DEFAULT_PAGE_SIZE
  return Effect.map(
    intents.listJson(owner, {
      page,
      pageSize,
      status: params.status,
      symbol: params.symbol,
      brokerId: params.broker_id
    }),
    ({ items, total }) =>
      jsonText(
        `{"items":${items},"page":${page},"page_size":${pageSize},"total_items":${total},"total_pages":${
          Math.ceil(total / pageSize)
        }}`
      )
  )
}

export const IntentsHttpLive = HttpApiBuilder.group(Api, "intents", (handlers) =>
  Effect.gen(function*() {
    const intents = yield* Intents
    return handlers
      .handle("createIntent", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          intents.createJson({
            userId: principal.user.id,
            mode: principal.mode,
            intentsPerMonth: principal.user.intents_per_month
          }, payload)).pipe(Effect.map(created), Effect.tapError(creationHeaders)))
      .handle("getIntent", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => Effect.map(intents.getJson(principal.owner, { id: path.id }), jsonText)))
      .handle("getIntentByExternalId", ({ path }) =>
        Effect.flatMap(
          CurrentPrincipal,
          (principal) => Effect.map(intents.getJson(principal.owner, { intentId: path.intent_id }), jsonText)
        ))
      .handle("cancelIntent", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => intents.cancel(principal.owner, path.id)))
      .handle("cancelIntentByExternalId", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => intents.cancelByExternalId(principal.owner, path.intent_id)))
      .handle("listIntents", ({ urlParams }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => intentPage(intents, principal.owner, urlParams)))
  }))
