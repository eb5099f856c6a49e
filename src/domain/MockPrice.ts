import * as Schema from "effect/Schema"
import { Amount, Symbol } from "./Intent.js"

/** The body of `POST /api/v1/test/prices`: a symbol's new price at the mock broker. Unknown fields are refused. */
export const SetMockPricePayload = Schema.Struct({
  symbol: Symbol,
  price: Amount
}).annotations({ identifier: "SetMockPricePayload", parseOptions: { onExcessProperty: "error" } })
export type SetMockPricePayload = typeof SetMockPricePayload.Type

/** A symbol's price at the mock broker, for one user's test mode. */
export class MockPrice extends Schema.Class<MockPrice>("MockPrice")({
  symbol: Schema.String,
  price: Schema.Number,
  updated_at: Schema.DateTimeUtc
}) {}

export class MockPriceList extends Schema.Class<MockPriceList>("MockPriceList")({
  items: Schema.Array(MockPrice)
}) {}
