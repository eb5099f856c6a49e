import * as Schema from "effect/Schema"

/** The broker certainly did not receive the request (connection refused, DNS, 5xx before acceptance). */
export class BrokerUnavailable extends Schema.TaggedError<BrokerUnavailable>()("BrokerUnavailable", {
  detail: Schema.String
}) {}

/** The outcome is unknown (a timeout): the broker may or may not hold the order. */
export class BrokerTimeout extends Schema.TaggedError<BrokerTimeout>()("BrokerTimeout", {
  detail: Schema.String
}) {}

export type BrokerError = BrokerUnavailable | BrokerTimeout
