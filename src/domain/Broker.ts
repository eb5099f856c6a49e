import * as Schema from "effect/Schema"

/** The broker certainly did not receive the request (connection refused, DNS, 5xx before acceptance). */
export class BrokerUnavailable extends Schema.TaggedError<BrokerUnavailable>()("BrokerUnavailable", {
  detail: Schema.String
}) {}

/** The outcome is unknown (a timeout, a 429, a 5xx, a broken connection): the broker may or may not hold the order. */
export class BrokerTimeout extends Schema.TaggedError<BrokerTimeout>()("BrokerTimeout", {
  detail: Schema.String
}) {}

/** The broker refused the order and holds none: `reason` is the broker's own message. */
export class BrokerRejected extends Schema.TaggedError<BrokerRejected>()("BrokerRejected", {
  reason: Schema.String
}) {}

/** The broker refused the connection's credentials: nothing was done, and nothing will be until they are replaced. */
export class BrokerCredentialsRefused extends Schema.TaggedError<BrokerCredentialsRefused>()(
  "BrokerCredentialsRefused",
  { detail: Schema.String }
) {}

/** What any call to a broker can fail with. */
export type BrokerError = BrokerUnavailable | BrokerTimeout | BrokerCredentialsRefused

/** The status_reason of an intent failed because the broker refused the credentials. */
export const CREDENTIALS_REFUSED_REASON = "Alpaca refused the credentials"
