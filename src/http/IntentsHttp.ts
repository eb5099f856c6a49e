import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Api } from "../api/Api.js"
import { IntentPage } from "../api/IntentsApi.js"
import { CurrentPrincipal } from "../api/Security.js"
import { IntentId } from "../domain/Ids.js"
import { type DuplicateIntent, IntentNotFound } from "../domain/Intent.js"
import { Intents } from "../services/intents/Intents.js"

/** A path id of the brand's shape, or the resource's not-found error: a malformed id is as unknown as an absent one. */
const pathId = <A, E>(schema: Schema.Schema<A, string>, notFound: () => E) => (id: string): Effect.Effect<A, E> =>
  Effect.mapError(Schema.decode(schema)(id), notFound)
const intentId = pathId(IntentId, () => new IntentNotFound())

const setHeader = (name: string, value: string) =>
  HttpApp.appendPreResponseHandler((_, response) => Effect.succeed(HttpServerResponse.setHeader(response, name, value)))

/** A 409 points at the intent that already holds the intent_id; a 503 says when to retry. */
const creationHeaders = (error: { readonly _tag: string } | DuplicateIntent) =>
  "existing" in error && error._tag === "DuplicateIntent" && error.existing !== undefined
    ? setHeader("location", `/api/v1/intents/${error.existing}`)
    : error._tag === "Unavailable"
    ? setHeader("retry-after", "1")
    : Effect.void

export const IntentsHttpLive = HttpApiBuilder.group(Api, "intents", (handlers) =>
  Effect.gen(function*() {
    const intents = yield* Intents
    return handlers
      .handle("createIntent", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          intents.create({
            userId: principal.user.id,
            mode: principal.mode,
            intentsPerMonth: principal.user.intents_per_month
          }, payload)).pipe(Effect.tapError(creationHeaders)))
      .handle("getIntent", ({ path }) =>
        Effect.zip(CurrentPrincipal, intentId(path.id)).pipe(Effect.flatMap(([principal, id]) => intents.get(principal.owner, id))))
      .handle("getIntentByExternalId", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => intents.getByExternalId(principal.owner, path.intent_id)))
      .handle("cancelIntent", ({ path }) =>
        Effect.zip(CurrentPrincipal, intentId(path.id)).pipe(Effect.flatMap(([principal, id]) => intents.cancel(principal.owner, id))))
      .handle("listIntents", ({ urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const { items, total } = yield* intents.list(principal.owner, {
            page: urlParams.page,
            pageSize: urlParams.page_size,
            status: urlParams.status,
            symbol: urlParams.symbol,
            brokerId: urlParams.broker_id
          })
          return new IntentPage({
            items,
            page: urlParams.page,
            page_size: urlParams.page_size,
            total_items: total,
            total_pages: Math.ceil(total / urlParams.page_size)
          })
        }))
  }))
