import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { MAX_INT4, rule } from "../domain/Errors.js"
import { ApiKey, ApiKeyScope, BrokerEnvironment, BrokerKind, BrokerStatus, Tier, User } from "../domain/Account.js"
import { ApiKeyId, BrokerId, DeliveryId, Mode, UserId, WebhookEndpointId } from "../domain/Ids.js"
import { Email, Password } from "../domain/Login.js"
import { Delivery, EventType, WebhookEndpoint } from "../domain/Webhook.js"
import {
  ApiKeyNotFoundResponse,
  BrokerCredentialsInvalidResponse,
  BrokerNotFoundResponse,
  BrokerUnreachableResponse,
  DeliveryNotFoundResponse,
  EmailTakenResponse,
  LoginExistsResponse,
  pathId,
  UnprocessableResponse,
  UserNotFoundResponse,
  WebhookEndpointDisabledResponse,
  WebhookEndpointNotFoundResponse
} from "./ApiErrors.js"
import { operation } from "./OpenApiDocs.js"
import { IntentPage, ListIntentsParams } from "./IntentsApi.js"
import { AdminAuth } from "./Security.js"

const Name = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations(
  rule("must be a string of 1 to 200 characters")
)
/** A count stored in an `integer` column: from 1 to 2147483647. */
const PositiveInt = Schema.Int.pipe(Schema.between(1, MAX_INT4)).annotations(
  rule(`must be an integer from 1 to ${MAX_INT4}`)
)
const strict = { parseOptions: { onExcessProperty: "error" } } as const

export const CreateUserPayload = Schema.Struct({
  name: Name,
  tier: Tier.annotations(rule("must be one of: free, pro, enterprise")),
  requests_per_minute: Schema.optional(PositiveInt),
  intents_per_month: Schema.optional(PositiveInt)
}).annotations(strict)

export const CreateApiKeyPayload = Schema.Struct({
  name: Name,
  mode: Mode.annotations(rule("must be one of: test, live")),
  scopes: Schema.optional(
    Schema.Array(ApiKeyScope).pipe(Schema.minItems(1)).annotations(
      rule("must be a non-empty list of: intents:read, intents:write")
    )
  ),
  expires_at: Schema.optional(Schema.DateTimeUtc.annotations(rule("must be an ISO 8601 timestamp")))
}).annotations(strict)

const { user_id: _, ...apiKeyFields } = ApiKey.fields

/** A key as listed: everything but the key itself (and its user, which the path names). */
export class ApiKeyView extends Schema.Class<ApiKeyView>("ApiKeyView")(apiKeyFields) {}

/** A key as created: the only response that ever carries `key`. */
export class CreatedApiKey extends Schema.Class<CreatedApiKey>("CreatedApiKey")({
  ...ApiKeyView.fields,
  key: Schema.String
}) {}

/**
 * An Alpaca key pair: exactly these two fields (where Alpaca is reached is the deployment's
 * setting). A 400 names the field at fault, an unknown one included; anything but an object is
 * refused as a whole.
 */
export const AlpacaCredentials = Schema.Struct({
  api_key_id: Schema.String.pipe(Schema.minLength(1)).annotations(rule("must be a non-empty string")),
  api_secret_key: Schema.String.pipe(Schema.minLength(1)).annotations(rule("must be a non-empty string"))
}).annotations({
  ...strict,
  message: () => ({ message: "must be {api_key_id, api_secret_key}", override: false })
})

/**
 * A broker connection to create: `mock` in test mode without credentials or environment, `alpaca`
 * in live mode with its credentials, in the `paper` environment unless `environment` says `live`.
 */
export const CreateBrokerPayload = Schema.Struct({
  name: Name,
  kind: BrokerKind.annotations(rule("must be one of: mock, alpaca")),
  mode: Mode.annotations(rule("must be one of: test, live")),
  environment: Schema.optional(BrokerEnvironment.annotations(rule("must be one of: paper, live"))),
  credentials: Schema.optional(AlpacaCredentials)
}).annotations(strict)

/** A connection as the operator sees it: never its credentials. */
export class BrokerView extends Schema.Class<BrokerView>("BrokerView")({
  id: BrokerId,
  name: Schema.String,
  kind: BrokerKind,
  mode: Mode,
  /** Null for the mock broker. */
  environment: Schema.NullOr(BrokerEnvironment),
  status: BrokerStatus,
  created_at: Schema.DateTimeUtc
}) {}

export const CreateWebhookEndpointPayload = Schema.Struct({
  url: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048)).annotations(
    rule("must be an http or https URL of at most 2048 characters")
  ),
  mode: Mode.annotations(rule("must be one of: test, live")),
  events: Schema.optional(
    Schema.Array(EventType).pipe(Schema.minItems(1)).annotations(
      rule(`must be a non-empty list of: ${EventType.literals.join(", ")}`)
    )
  )
}).annotations(strict)

const { user_id: _user, ...endpointFields } = WebhookEndpoint.fields

/** An endpoint as listed: never its secret. */
export class WebhookEndpointView extends Schema.Class<WebhookEndpointView>("WebhookEndpointView")(endpointFields) {}

/** An endpoint as created: the only response that ever carries `secret`. */
export class CreatedWebhookEndpoint extends Schema.Class<CreatedWebhookEndpoint>("CreatedWebhookEndpoint")({
  ...WebhookEndpointView.fields,
  secret: Schema.String
}) {}

/** A dashboard login for an existing user (when sign-up is closed, the only way to one). */
export const CreateLoginPayload = Schema.Struct({ email: Email, password: Password }).annotations(strict)

export class CreatedLogin extends Schema.Class<CreatedLogin>("CreatedLogin")({
  user_id: UserId,
  email: Schema.String,
  created_at: Schema.DateTimeUtc
}) {}

const UsersQuery = Schema.Struct({
  limit: Schema.optional(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000)).annotations(
      rule("must be an integer from 1 to 1000")
    )
  )
})

const DeliveriesQuery = Schema.Struct({
  limit: Schema.optional(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000)).annotations(
      rule("must be an integer from 1 to 1000")
    )
  )
})

const UserPath = Schema.Struct({ user_id: pathId(UserId, "UserNotFound") })
const BrokerPath = Schema.Struct({ broker_id: pathId(BrokerId, "BrokerNotFound") })
const EndpointPath = Schema.Struct({ endpoint_id: pathId(WebhookEndpointId, "WebhookEndpointNotFound") })

/** Revokes a key at once. The operator's and the dashboard's call alike (each group under its own prefix and security). */
export const revokeApiKey = HttpApiEndpoint.del("revokeApiKey", "/api-keys/:key_id")
    .setPath(Schema.Struct({ key_id: pathId(ApiKeyId, "ApiKeyNotFound") }))
    .addSuccess(Schema.Void, { status: 204 })
    .addError(ApiKeyNotFoundResponse)

    .annotateContext(operation({
      summary: "Revoke an API key",
      description: "Revokes the key at once: refused from the next request on, on every instance within milliseconds. The operator's call (`/admin/v1`, bearer `ADMIN_TOKEN`) and the dashboard's (its own user's only) alike.",
      responses: { 204: "Revoked" }
    }))
/** New credentials for an Alpaca connection, checked with Alpaca first. The operator's and the dashboard's call alike (each group under its own prefix and security). */
export const replaceBrokerCredentials = HttpApiEndpoint.put("replaceBrokerCredentials", "/brokers/:broker_id/credentials")
    .setPath(BrokerPath)
    .setPayload(AlpacaCredentials)
    .addSuccess(BrokerView)
    .addError(BrokerNotFoundResponse)
    .addError(UnprocessableResponse)
    .addError(BrokerCredentialsInvalidResponse)
    .addError(BrokerUnreachableResponse)

    .annotateContext(operation({
      summary: "Replace an Alpaca connection's credentials",
      description: "New credentials for an `alpaca` connection, checked with Alpaca first and stored encrypted; never returned. The operator's call (`/admin/v1`, bearer `ADMIN_TOKEN`) and the dashboard's (its own user's only) alike.",
      responses: { 200: "The broker connection, without its credentials" }
    }))
/** Deletes an endpoint and its deliveries. The operator's and the dashboard's call alike (each group under its own prefix and security). */
export const deleteWebhookEndpoint = HttpApiEndpoint.del("deleteWebhookEndpoint", "/webhook-endpoints/:endpoint_id")
    .setPath(EndpointPath)
    .addSuccess(Schema.Void, { status: 204 })
    .addError(WebhookEndpointNotFoundResponse)

    .annotateContext(operation({
      summary: "Delete a webhook endpoint",
      description: "Deletes the endpoint and its deliveries; nothing more is sent to it. The operator's call (`/admin/v1`, bearer `ADMIN_TOKEN`) and the dashboard's (its own user's only) alike.",
      responses: { 204: "Deleted" }
    }))
/** An endpoint's deliveries, newest first, each with its attempts. The operator's and the dashboard's call alike (each group under its own prefix and security). */
export const listDeliveries = HttpApiEndpoint.get("listDeliveries", "/webhook-endpoints/:endpoint_id/deliveries")
    .setPath(EndpointPath)
    .setUrlParams(DeliveriesQuery)
    .addSuccess(Schema.Struct({ items: Schema.Array(Delivery) }))
    .addError(WebhookEndpointNotFoundResponse)

    .annotateContext(operation({
      summary: "List an endpoint's deliveries",
      description: "The endpoint's deliveries, newest first, each with its attempts (status, response code, error, time); at most `limit` of them. The operator's call (`/admin/v1`, bearer `ADMIN_TOKEN`) and the dashboard's (its own user's only) alike.",
      responses: { 200: "The deliveries, newest first" }
    }))
/** Sends a delivery again, with a fresh retry schedule. The operator's and the dashboard's call alike (each group under its own prefix and security). */
export const resendDelivery = HttpApiEndpoint.post("resendDelivery", "/deliveries/:delivery_id/resend")
    .setPath(Schema.Struct({ delivery_id: pathId(DeliveryId, "DeliveryNotFound") }))
    .addSuccess(Delivery, { status: 202 })
    .addError(DeliveryNotFoundResponse)
    .addError(WebhookEndpointDisabledResponse)

    .annotateContext(operation({
      summary: "Re-send a delivery",
      description: "Sends the delivery again, with a fresh retry schedule (a failed one included); 409 while its endpoint is disabled. The operator's call (`/admin/v1`, bearer `ADMIN_TOKEN`) and the dashboard's (its own user's only) alike.",
      responses: { 202: "The delivery, queued to be sent again" }
    }))
/** The operator API: it stands in for the customers' dashboard. */
export class AdminApi extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.post("createUser", "/users")
      .setPayload(CreateUserPayload)
      .addSuccess(User, { status: 201 })
      .annotateContext(operation({
        summary: "Create a user",
        description: "A customer account with its tier's limits (`requests_per_minute`, `intents_per_month`, overridable here). The user then needs API keys and broker connections.",
        responses: { 201: "The user" }
      }))
  )
  .add(
    HttpApiEndpoint.get("listUsers", "/users")
      .setUrlParams(UsersQuery)
      .addSuccess(Schema.Struct({ items: Schema.Array(User) }))
      .annotateContext(operation({
        summary: "List users",
        description: "Users, newest first: at most `limit` (100 unless set, up to 1000).",
        responses: { 200: "The users" }
      }))
  )
  .add(
    HttpApiEndpoint.get("listUserBrokers", "/users/:user_id/brokers")
      .setPath(UserPath)
      .addSuccess(Schema.Struct({ items: Schema.Array(BrokerView) }))
      .addError(UserNotFoundResponse)
      .annotateContext(operation({
        summary: "List a user's broker connections",
        description: "The user's connected brokers, test mode's first, never their credentials; disconnected ones are left out.",
        responses: { 200: "The user's broker connections" }
      }))
  )
  .add(
    HttpApiEndpoint.get("listUserIntents", "/users/:user_id/intents")
      .setPath(UserPath)
      .setUrlParams(Schema.Struct({ ...ListIntentsParams.fields, mode: Mode.annotations(rule("must be one of: test, live")) }))
      .addSuccess(IntentPage)
      .addError(UserNotFoundResponse)
      .annotateContext(operation({
        summary: "List a user's intents in one mode",
        description: "A page of the user's Trade Intents of `mode`, newest first, filtered as `GET /api/v1/intents` filters.",
        responses: { 200: "A page of the user's intents" }
      }))
  )
  .add(
    HttpApiEndpoint.get("getUser", "/users/:user_id")
      .setPath(UserPath)
      .addSuccess(User)
      .addError(UserNotFoundResponse)
      .annotateContext(operation({
        summary: "Look a user up",
        description: "The user with its tier and limits.",
        responses: { 200: "The user" }
      }))
  )
  .add(
    HttpApiEndpoint.post("createLogin", "/users/:user_id/login")
      .setPath(UserPath)
      .setPayload(CreateLoginPayload)
      .addSuccess(CreatedLogin, { status: 201 })
      .addError(UserNotFoundResponse)
      .addError(EmailTakenResponse)
      .addError(LoginExistsResponse)
      .annotateContext(operation({
        summary: "Give a user a dashboard login (email and password)",
        description: "Lets an existing user sign in to the dashboard (when sign-up is closed, the only way to a login). The password is stored hashed.",
        responses: { 201: "The login (never its password)" }
      }))
  )
  .add(
    HttpApiEndpoint.post("createApiKey", "/users/:user_id/api-keys")
      .setPath(UserPath)
      .setPayload(CreateApiKeyPayload)
      .addSuccess(CreatedApiKey, { status: 201 })
      .addError(UserNotFoundResponse)
      .annotateContext(operation({
        summary: "Create an API key",
        description: "A key for the user in one mode (`test` or `live`) with the given scopes (both unless fewer are named) and an optional expiry. The key itself is in this response only; only its SHA-256 is stored.",
        responses: { 201: "The API key, with the key itself (shown once)" }
      }))
  )
  .add(
    HttpApiEndpoint.get("listApiKeys", "/users/:user_id/api-keys")
      .setPath(UserPath)
      .addSuccess(Schema.Struct({ items: Schema.Array(ApiKeyView) }))
      .addError(UserNotFoundResponse)
      .annotateContext(operation({
        summary: "List a user's API keys",
        description: "Every key of the user, both modes, revoked and expired ones included; never the keys themselves.",
        responses: { 200: "The user's API keys, without the keys" }
      }))
  )
  .add(revokeApiKey)
  .add(
    HttpApiEndpoint.post("createBroker", "/users/:user_id/brokers")
      .setPath(UserPath)
      .setPayload(CreateBrokerPayload)
      .addSuccess(BrokerView, { status: 201 })
      .addError(UserNotFoundResponse)
      .addError(UnprocessableResponse)
      .addError(BrokerCredentialsInvalidResponse)
      .addError(BrokerUnreachableResponse)
      .annotateContext(operation({
        summary: "Connect a broker",
        description: "A `mock` connection in test mode (no credentials, no environment), or an `alpaca` one in live mode, its credentials checked with Alpaca first and stored encrypted, in the `paper` environment unless `environment` says `live`.",
        responses: { 201: "The broker connection, without its credentials" }
      }))
  )
  .add(replaceBrokerCredentials)
  .add(
    HttpApiEndpoint.post("createWebhookEndpoint", "/users/:user_id/webhook-endpoints")
      .setPath(UserPath)
      .setPayload(CreateWebhookEndpointPayload)
      .addSuccess(CreatedWebhookEndpoint, { status: 201 })
      .addError(UserNotFoundResponse)
      .annotateContext(operation({
        summary: "Create a webhook endpoint",
        description: "An endpoint in one mode receiving the given event types (all six unless named). Test-mode URLs may be any http(s) URL; live-mode ones must be https and resolve to public addresses. The signing secret is in this response only.",
        responses: { 201: "The endpoint, with its signing secret (shown once)" }
      }))
  )
  .add(
    HttpApiEndpoint.get("listWebhookEndpoints", "/users/:user_id/webhook-endpoints")
      .setPath(UserPath)
      .addSuccess(Schema.Struct({ items: Schema.Array(WebhookEndpointView) }))
      .addError(UserNotFoundResponse)
      .annotateContext(operation({
        summary: "List a user's webhook endpoints",
        description: "Every endpoint of the user, both modes, enabled or not; never their secrets.",
        responses: { 200: "The user's webhook endpoints, without their secrets" }
      }))
  )
  .add(deleteWebhookEndpoint)
  .add(listDeliveries)
  .add(resendDelivery)
  .middleware(AdminAuth)
  .prefix("/admin/v1")
  .annotate(OpenApi.Description, "Operator API: users, API keys, broker connections and webhook endpoints. Bearer ADMIN_TOKEN.")
{}
