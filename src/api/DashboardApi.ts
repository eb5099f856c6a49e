import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { type User, Tier } from "../domain/Account.js"
import { rule } from "../domain/Errors.js"
import { EventCursorFromString } from "../domain/Event.js"
import { BrokerId, IntentId, Mode, WebhookEndpointId } from "../domain/Ids.js"
import { TradeIntent } from "../domain/Intent.js"
import { Email, Password, Session, SESSION_COOKIE } from "../domain/Login.js"
import { Delivery } from "../domain/Webhook.js"
import {
  ApiKeyView,
  BrokerView,
  CreateApiKeyPayload,
  CreateBrokerPayload,
  CreatedApiKey,
  CreatedWebhookEndpoint,
  CreateWebhookEndpointPayload,
  deleteWebhookEndpoint,
  listDeliveries,
  replaceBrokerCredentials,
  resendDelivery,
  revokeApiKey,
  WebhookEndpointView
} from "./AdminApi.js"
import {
  BrokerCredentialsInvalidResponse,
  BrokerNotFoundResponse,
  BrokerUnreachableResponse,
  CsrfRejectedResponse,
  EmailTakenResponse,
  IntentNotCancelableResponse,
  IntentNotFoundResponse,
  InternalErrorResponse,
  InvalidLoginResponse,
  LoginThrottledResponse,
  pathId,
  RateLimitedResponse,
  SessionRequiredResponse,
  SignupClosedResponse,
  UnprocessableResponse,
  ValidationErrorResponse,
  WebhookEndpointDisabledResponse,
  WebhookEndpointNotFoundResponse
} from "./ApiErrors.js"
import { EventTimeline } from "./EventsApi.js"
import { IntentPage, ListIntentsParams } from "./IntentsApi.js"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** The signed-in user of a dashboard request. */
export interface Account {
  readonly user: User
  readonly email: string
  /** The session's id (not its token): what "sign out" revokes. */
  readonly sessionId: string
  /** The session's CSRF token, for the browser to send back on changes. */
  readonly csrfToken: string
}

export class CurrentAccount extends Context.Tag("CurrentAccount")<CurrentAccount, Account>() {}

/** The session cookie: `HttpOnly`, `SameSite=Lax`, `Secure` when the service's public URL is https. */
export const sessionCookie = HttpApiSecurity.apiKey({ key: SESSION_COOKIE, in: "cookie" })

/**
 * The dashboard's gate: a live session (401 otherwise) and, on every call that changes something,
 * the session's CSRF token in `X-CSRF-Token` and no foreign `Origin` (403 otherwise).
 */
export class DashboardAuth extends HttpApiMiddleware.Tag<DashboardAuth>()("DashboardAuth", {
  provides: CurrentAccount,
  failure: Schema.Union(SessionRequiredResponse, CsrfRejectedResponse),
  security: { session: sessionCookie }
}) {}

/** Which side of the test/live switch a page shows. */
const ModeParams = Schema.Struct({ mode: Mode.annotations(rule("must be one of: test, live")) })

export const SignupPayload = Schema.Struct({
  email: Email,
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations(
    rule("must be a string of 1 to 200 characters")
  ),
  password: Password
}).annotations(strict)

export const LoginPayload = Schema.Struct({
  email: Schema.String.pipe(Schema.maxLength(254)).annotations(rule("must be a string")),
  password: Schema.String.pipe(Schema.maxLength(1000)).annotations(rule("must be a string"))
}).annotations(strict)

export const ChangePasswordPayload = Schema.Struct({
  current_password: Schema.String.pipe(Schema.maxLength(1000)).annotations(rule("must be a string")),
  new_password: Password
}).annotations(strict)

export const UpdateAccountPayload = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations(
    rule("must be a string of 1 to 200 characters")
  )
}).annotations(strict)

/** An endpoint as the dashboard lists it: how many of its recent deliveries are failing. */
export class DashboardEndpoint extends Schema.Class<DashboardEndpoint>("DashboardEndpoint")({
  ...WebhookEndpointView.fields,
  /** Deliveries of the last 7 days that failed for good or are being retried after a failure. */
  failing_deliveries: Schema.Int
}) {}

/** The overview page: the account's limits and usage, and what needs attention, in one mode. */
export class Overview extends Schema.Class<Overview>("Overview")({
  mode: Mode,
  tier: Tier,
  requests_per_minute: Schema.Int,
  intents_per_month: Schema.Int,
  /** Live intents created this calendar month (UTC), counted against `intents_per_month`. */
  live_intents_this_month: Schema.Int,
  recent_intents: Schema.Array(TradeIntent),
  /** This mode's endpoints that are disabled or have failing deliveries. */
  failing_endpoints: Schema.Array(DashboardEndpoint)
}) {}

const BrokerPath = Schema.Struct({ broker_id: pathId(BrokerId, "BrokerNotFound") })
const EndpointPath = Schema.Struct({ endpoint_id: pathId(WebhookEndpointId, "WebhookEndpointNotFound") })
const IntentPath = Schema.Struct({ id: pathId(IntentId, "IntentNotFound") })

/** Signing up and in: the calls a browser makes before it has a session. */
export class DashboardLoginApi extends HttpApiGroup.make("dashboardLogin")
  .add(
    HttpApiEndpoint.post("signup", "/signup")
      .setPayload(SignupPayload)
      .addSuccess(Session, { status: 201 })
      .addError(SignupClosedResponse)
      .addError(EmailTakenResponse)
      .addError(CsrfRejectedResponse)
      .annotate(OpenApi.Summary, "Create an account and sign in")
  )
  .add(
    HttpApiEndpoint.post("login", "/login")
      .setPayload(LoginPayload)
      .addSuccess(Session)
      .addError(InvalidLoginResponse)
      .addError(LoginThrottledResponse)
      .addError(CsrfRejectedResponse)
      .annotate(OpenApi.Summary, "Sign in: sets the session cookie")
  )
  .prefix("/dashboard/api/v1")
  .annotate(OpenApi.Description, "The dashboard's sign-up and sign-in.")
{}

/** Everything a signed-in customer does in the dashboard, on their own things only. */
export class DashboardAppApi extends HttpApiGroup.make("dashboard")
  .add(HttpApiEndpoint.get("session", "/session").addSuccess(Session))
  .add(HttpApiEndpoint.post("logout", "/logout").addSuccess(Schema.Void, { status: 204 }))
  .add(
    HttpApiEndpoint.post("logoutEverywhere", "/logout-everywhere")
      .addSuccess(Schema.Void, { status: 204 })
      .annotate(OpenApi.Summary, "Revoke every session of the account, this one included")
  )
  .add(HttpApiEndpoint.patch("updateAccount", "/account").setPayload(UpdateAccountPayload).addSuccess(Session))
  .add(
    HttpApiEndpoint.post("changePassword", "/account/password")
      .setPayload(ChangePasswordPayload)
      .addSuccess(Session)
      .addError(UnprocessableResponse)
      .annotate(OpenApi.Summary, "Change the password: every other session is revoked, this browser gets a new one")
  )
  .add(HttpApiEndpoint.get("overview", "/overview").setUrlParams(ModeParams).addSuccess(Overview))
  .add(
    HttpApiEndpoint.get("listApiKeys", "/api-keys")
      .setUrlParams(ModeParams)
      .addSuccess(Schema.Struct({ items: Schema.Array(ApiKeyView) }))
  )
  .add(HttpApiEndpoint.post("createApiKey", "/api-keys").setPayload(CreateApiKeyPayload).addSuccess(CreatedApiKey, { status: 201 }))
  .add(revokeApiKey)
  .add(
    HttpApiEndpoint.get("listBrokers", "/brokers")
      .setUrlParams(ModeParams)
      .addSuccess(Schema.Struct({ items: Schema.Array(BrokerView) }))
  )
  .add(
    HttpApiEndpoint.post("createBroker", "/brokers")
      .setPayload(CreateBrokerPayload)
      .addSuccess(BrokerView, { status: 201 })
      .addError(UnprocessableResponse)
      .addError(BrokerCredentialsInvalidResponse)
      .addError(BrokerUnreachableResponse)
  )
  .add(replaceBrokerCredentials)
  .add(
    HttpApiEndpoint.del("disconnectBroker", "/brokers/:broker_id")
      .setPath(BrokerPath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(BrokerNotFoundResponse)
      .annotate(OpenApi.Summary, "Disconnect: its intents keep their history; new intents naming it get 404")
  )
  .add(
    HttpApiEndpoint.get("listWebhookEndpoints", "/webhook-endpoints")
      .setUrlParams(ModeParams)
      .addSuccess(Schema.Struct({ items: Schema.Array(DashboardEndpoint) }))
  )
  .add(
    HttpApiEndpoint.post("createWebhookEndpoint", "/webhook-endpoints")
      .setPayload(CreateWebhookEndpointPayload)
      .addSuccess(CreatedWebhookEndpoint, { status: 201 })
  )
  .add(deleteWebhookEndpoint)
  .add(
    HttpApiEndpoint.post("rotateWebhookSecret", "/webhook-endpoints/:endpoint_id/rotate-secret")
      .setPath(EndpointPath)
      .addSuccess(CreatedWebhookEndpoint)
      .addError(WebhookEndpointNotFoundResponse)
      .annotate(OpenApi.Summary, "A new signing secret, shown once; the old one stops signing at once")
  )
  .add(
    HttpApiEndpoint.post("disableWebhookEndpoint", "/webhook-endpoints/:endpoint_id/disable")
      .setPath(EndpointPath)
      .addSuccess(WebhookEndpointView)
      .addError(WebhookEndpointNotFoundResponse)
  )
  .add(
    HttpApiEndpoint.post("enableWebhookEndpoint", "/webhook-endpoints/:endpoint_id/enable")
      .setPath(EndpointPath)
      .addSuccess(WebhookEndpointView)
      .addError(WebhookEndpointNotFoundResponse)
  )
  .add(
    HttpApiEndpoint.post("sendTestEvent", "/webhook-endpoints/:endpoint_id/test")
      .setPath(EndpointPath)
      .addSuccess(Delivery, { status: 202 })
      .addError(WebhookEndpointNotFoundResponse)
      .addError(WebhookEndpointDisabledResponse)
      .annotate(OpenApi.Summary, "Send a signed `webhook.test` event to this endpoint only")
  )
  .add(listDeliveries)
  .add(resendDelivery)
  .add(
    HttpApiEndpoint.get("listIntents", "/intents")
      .setUrlParams(Schema.Struct({ ...ListIntentsParams.fields, ...ModeParams.fields }))
      .addSuccess(IntentPage)
  )
  .add(
    HttpApiEndpoint.get("getIntent", "/intents/:id")
      .setPath(IntentPath)
      .setUrlParams(ModeParams)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
  )
  .add(
    HttpApiEndpoint.get("intentEvents", "/intents/:id/events")
      .setPath(IntentPath)
      .setUrlParams(ModeParams)
      .addSuccess(EventTimeline)
      .addError(IntentNotFoundResponse)
  )
  .add(
    HttpApiEndpoint.post("cancelIntent", "/intents/:id/cancel")
      .setPath(IntentPath)
      .setUrlParams(ModeParams)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .addError(IntentNotCancelableResponse)
  )
  .add(
    HttpApiEndpoint.get("streamEvents", "/events/stream")
      .setUrlParams(Schema.Struct({ ...ModeParams.fields, after: Schema.optional(EventCursorFromString) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(EventCursorFromString) }))
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
      .addError(RateLimitedResponse)
      .annotate(OpenApi.Summary, "Follow this mode's events as they commit (Server-Sent Events), for live pages")
  )
  .middleware(DashboardAuth)
  .prefix("/dashboard/api/v1")
  .annotate(OpenApi.Description, "The dashboard's API: cookie session, and X-CSRF-Token on every change.")
{}

/**
 * The dashboard's part of the HTTP contract on its own, for the browser's typed client: it keeps
 * the operator and v1 APIs (and their security) out of the web bundle.
 */
export class DashboardApi extends HttpApi.make("dashboard")
  .add(DashboardLoginApi)
  .add(DashboardAppApi)
  .addError(ValidationErrorResponse)
  .addError(InternalErrorResponse)
{}
