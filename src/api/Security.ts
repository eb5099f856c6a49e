import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import type { ApiKeyScope, User } from "../domain/Account.js"
import type { ApiKeyId, Mode, Owner } from "../domain/Ids.js"
import { ForbiddenResponse, RateLimitedResponse, UnauthorizedResponse } from "./ApiErrors.js"

/** Who is calling: the key's user, the key, and the mode its data lives in. */
export interface Principal {
  readonly user: User
  readonly keyId: ApiKeyId
  readonly mode: Mode
  readonly scopes: ReadonlyArray<ApiKeyScope>
  readonly owner: Owner
}

export class CurrentPrincipal extends Context.Tag("CurrentPrincipal")<CurrentPrincipal, Principal>() {}

/**
 * The gate of the v1 API, in this order: the API key (401), the key's rate limit (429),
 * then the scope the method needs (403): `intents:read` for GET, `intents:write` otherwise.
 */
export class ApiKeyAuth extends HttpApiMiddleware.Tag<ApiKeyAuth>()("ApiKeyAuth", {
  provides: CurrentPrincipal,
  failure: Schema.Union(UnauthorizedResponse, RateLimitedResponse, ForbiddenResponse),
  security: { apiKey: HttpApiSecurity.bearer }
}) {}

/** The operator API's bearer token, `ADMIN_TOKEN`; 429 for an address past its wrong tokens. */
export class AdminAuth extends HttpApiMiddleware.Tag<AdminAuth>()("AdminAuth", {
  failure: Schema.Union(UnauthorizedResponse, RateLimitedResponse),
  security: { adminToken: HttpApiSecurity.bearer }
}) {}
