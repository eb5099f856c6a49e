import * as Schema from "effect/Schema"
import { detail, WireErrors } from "./Errors.js"
import { ApiKeyId, BrokerId, Mode, UserId } from "./Ids.js"

export const Tier = Schema.Literal("free", "pro", "enterprise")
export type Tier = typeof Tier.Type

/** Requests per minute and live intents per month of each tier; enterprise is set per user. */
export const tierLimits: Record<Tier, { readonly requestsPerMinute: number; readonly intentsPerMonth: number }> = {
  free: { requestsPerMinute: 60, intentsPerMonth: 100 },
  pro: { requestsPerMinute: 300, intentsPerMonth: 1_000 },
  enterprise: { requestsPerMinute: 1_000, intentsPerMonth: 10_000 }
}

export class User extends Schema.Class<User>("User")({
  id: UserId,
  name: Schema.String,
  tier: Tier,
  requests_per_minute: Schema.Int,
  intents_per_month: Schema.Int,
  created_at: Schema.DateTimeUtc
}) {}

export class UserNotFound extends Schema.TaggedError<UserNotFound>()("UserNotFound", {
  detail: detail(WireErrors.UserNotFound)
}) {}

export const ApiKeyScope = Schema.Literal("intents:read", "intents:write")
export type ApiKeyScope = typeof ApiKeyScope.Type
export const allScopes: ReadonlyArray<ApiKeyScope> = ["intents:read", "intents:write"]

/** An API key as the operator sees it: never the key itself, only its last characters. */
export class ApiKey extends Schema.Class<ApiKey>("ApiKey")({
  id: ApiKeyId,
  user_id: UserId,
  name: Schema.String,
  mode: Mode,
  scopes: Schema.Array(ApiKeyScope),
  key_hint: Schema.String,
  created_at: Schema.DateTimeUtc,
  expires_at: Schema.NullOr(Schema.DateTimeUtc),
  last_used_at: Schema.NullOr(Schema.DateTimeUtc),
  revoked_at: Schema.NullOr(Schema.DateTimeUtc)
}) {}

export class ApiKeyNotFound extends Schema.TaggedError<ApiKeyNotFound>()("ApiKeyNotFound", {
  detail: detail(WireErrors.ApiKeyNotFound)
}) {}

export const BrokerKind = Schema.Literal("mock", "alpaca")
export type BrokerKind = typeof BrokerKind.Type

/** The one mode each kind of broker serves: the mock broker is for test keys only. */
export const brokerKindMode: Record<BrokerKind, Mode> = { mock: "test", alpaca: "live" }

/** Which of a real broker's environments a connection trades in: paper (simulated) or live. */
export const BrokerEnvironment = Schema.Literal("paper", "live")
export type BrokerEnvironment = typeof BrokerEnvironment.Type

/** `invalid` once the broker refuses the connection's credentials, until they are replaced. */
export const BrokerStatus = Schema.Literal("active", "invalid")
export type BrokerStatus = typeof BrokerStatus.Type

export class BrokerConnection extends Schema.Class<BrokerConnection>("BrokerConnection")({
  id: BrokerId,
  user_id: UserId,
  name: Schema.String,
  kind: BrokerKind,
  mode: Mode,
  /** Null for the mock broker, which has one environment. */
  environment: Schema.NullOr(BrokerEnvironment),
  status: BrokerStatus,
  created_at: Schema.DateTimeUtc
}) {}

export class BrokerNotFound extends Schema.TaggedError<BrokerNotFound>()("BrokerNotFound", {
  detail: detail(WireErrors.BrokerNotFound)
}) {}

/** The broker refused the credentials of a connection being created: nothing was stored. */
export class BrokerCredentialsInvalid extends Schema.TaggedError<BrokerCredentialsInvalid>()(
  "BrokerCredentialsInvalid",
  { detail: detail(WireErrors.BrokerCredentialsInvalid) }
) {}

/**
 * The broker could not check the credentials of a connection being created (unreachable, timed
 * out, failing): nothing was stored, and the same request may be sent again.
 */
export class BrokerUnreachable extends Schema.TaggedError<BrokerUnreachable>()("BrokerUnreachable", {
  detail: detail(WireErrors.BrokerUnreachable)
}) {}
