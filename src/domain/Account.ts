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

export class BrokerConnection extends Schema.Class<BrokerConnection>("BrokerConnection")({
  id: BrokerId,
  user_id: UserId,
  name: Schema.String,
  kind: BrokerKind,
  mode: Mode,
  created_at: Schema.DateTimeUtc
}) {}

export class BrokerNotFound extends Schema.TaggedError<BrokerNotFound>()("BrokerNotFound", {
  detail: detail(WireErrors.BrokerNotFound)
}) {}
