import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { MockPrice, MockPriceList, SetMockPricePayload } from "../domain/MockPrice.js"
import { UnprocessableResponse } from "./ApiErrors.js"
import { operation } from "./OpenApiDocs.js"
import { ApiKeyAuth } from "./Security.js"

const examplePrice = { symbol: "AAPL", price: 95.5, updated_at: "2026-01-15T14:30:00.000Z" }

/** Test mode's helpers: they act on the mock broker only, and a live key gets 403. */
export class TestHelpersApi extends HttpApiGroup.make("testHelpers")
  .add(
    HttpApiEndpoint.post("setMockPrice", "/test/prices")
      .setPayload(SetMockPricePayload)
      .addSuccess(MockPrice)
      .addError(UnprocessableResponse)
      .annotateContext(operation({
        summary: "Set a symbol's price at the mock broker",
        description: "Test keys only (a live key gets 403). Sets the price the mock broker quotes for the symbol to " +
          "this key's user (100 until set): later orders are decided at it, and the user's resting orders of the " +
          "symbol react at once, as a broker's would. A limit order the price reaches (buy at or below its limit, " +
          "sell at or above) fills whole at the new price; a stop order whose stop it reaches (buy at or above, " +
          "sell at or below) triggers, then fills as a market order, or rests as a limit order until its limit is " +
          "reached. The intents, fills, events and webhooks change before the answer. `HOLD` never fills and " +
          "`PARTIAL`'s rest keeps resting. `price` follows the order price rules (422). Needs `intents:write`.",
        responses: { 200: "The symbol's price, as now set" },
        request: { symbol: "AAPL", price: 95.5 },
        examples: { 200: examplePrice }
      }))
  )
  .add(
    HttpApiEndpoint.get("listMockPrices", "/test/prices")
      .addSuccess(MockPriceList)
      .annotateContext(operation({
        summary: "List the prices set at the mock broker",
        description: "The symbols whose price this key's user has set, by symbol; every other symbol is at 100. " +
          "Test keys only (a live key gets 403). Needs `intents:read`.",
        responses: { 200: "The prices set" },
        examples: { 200: { items: [examplePrice] } }
      }))
  )
  .middleware(ApiKeyAuth)
  .prefix("/api/v1")
  .annotate(OpenApi.Description, "Test mode's helpers: move the mock broker's prices so that resting orders fill or trigger.")
{}
