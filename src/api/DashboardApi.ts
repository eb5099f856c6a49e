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
import { exampleCanceledIntent, exampleEvent, exampleIntent, exampleIntentPage, operation } from "./OpenApiDocs.js"

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
      .annotateContext(operation({
        summary: "Create an account and sign in",
        description: "Creates a `free` user with a dashboard login and signs it in (sets the session cookie), when the deployment allows sign-up. No session needed; a foreign `Origin` is refused.",
        responses: { 201: "The new session: the user, the email and the CSRF token" }
      }))
  )
  .add(
    HttpApiEndpoint.post("login", "/login")
      .setPayload(LoginPayload)
      .addSuccess(Session)
      .addError(InvalidLoginResponse)
      .addError(LoginThrottledResponse)
      .addError(CsrfRejectedResponse)
      .annotateContext(operation({
        summary: "Sign in: sets the session cookie",
        description: "Checks the email and password and sets the session cookie; repeated failures from one address are throttled (429). No session needed; a foreign `Origin` is refused.",
        responses: { 200: "The session: the user, the email and the CSRF token" }
      }))
  )
  .prefix("/dashboard/api/v1")
  .annotate(OpenApi.Description, "The dashboard's sign-up and sign-in.")
{}

/** Everything a signed-in customer does in the dashboard, on their own things only. */
export class DashboardAppApi extends HttpApiGroup.make("dashboard")
  .add(HttpApiEndpoint.get("session", "/session").addSuccess(Session)
      .annotateContext(operation({
        summary: "The signed-in session",
        description: "Who is signed in, and the CSRF token to send as `X-CSRF-Token` on every change.",
        responses: { 200: "The session: the user, the email and the CSRF token" }
      })))
  .add(HttpApiEndpoint.post("logout", "/logout").addSuccess(Schema.Void, { status: 204 })
      .annotateContext(operation({
        summary: "Sign out",
        description: "Revokes this session and clears its cookie; other sessions stay signed in.",
        responses: { 204: "Signed out" }
      })))
  .add(
    HttpApiEndpoint.post("logoutEverywhere", "/logout-everywhere")
      .addSuccess(Schema.Void, { status: 204 })
      .annotateContext(operation({
        summary: "Revoke every session of the account, this one included",
        description: "Signs the account out of every browser, this one included.",
        responses: { 204: "Every session revoked" }
      }))
  )
  .add(HttpApiEndpoint.patch("updateAccount", "/account").setPayload(UpdateAccountPayload).addSuccess(Session)
      .annotateContext(operation({
        summary: "Rename the account",
        description: "Changes the account's display name.",
        responses: { 200: "The session, with the renamed user" }
      })))
  .add(
    HttpApiEndpoint.post("changePassword", "/account/password")
      .setPayload(ChangePasswordPayload)
      .addSuccess(Session)
      .addError(UnprocessableResponse)
      .annotateContext(operation({
        summary: "Change the password",
        description: "Checks the current password (422 when wrong), stores the new one hashed, revokes every other session and gives this browser a new one.",
        responses: { 200: "The new session" }
      }))
  )
  .add(HttpApiEndpoint.get("overview", "/overview").setUrlParams(ModeParams).addSuccess(Overview)
      .annotateContext(operation({
        summary: "The overview page, in one mode",
        description: "The account's tier, limits and this month's live intents, its recent intents, and the endpoints that are disabled or failing, in the given mode.",
        responses: { 200: "The overview" }
      })))
  .add(
    HttpApiEndpoint.get("listApiKeys", "/api-keys")
      .setUrlParams(ModeParams)
      .addSuccess(Schema.Struct({ items: Schema.Array(ApiKeyView) }))
      .annotateContext(operation({
        summary: "List the account's API keys, in one mode",
        description: "The account's keys of the given mode, revoked and expired ones included; never the keys themselves.",
        responses: { 200: "The API keys, without the keys" }
      }))
  )
  .add(HttpApiEndpoint.post("createApiKey", "/api-keys").setPayload(CreateApiKeyPayload).addSuccess(CreatedApiKey, { status: 201 })
      .annotateContext(operation({
        summary: "Create an API key",
        description: "A key for the account in one mode with the given scopes and optional expiry; the key itself is in this response only.",
        responses: { 201: "The API key, with the key itself (shown once)" }
      })))
  .add(revokeApiKey)
  .add(
    HttpApiEndpoint.get("listBrokers", "/brokers")
      .setUrlParams(ModeParams)
      .addSuccess(Schema.Struct({ items: Schema.Array(BrokerView) }))
      .annotateContext(operation({
        summary: "List the account's broker connections, in one mode",
        description: "The connections of the given mode; never their credentials.",
        responses: { 200: "The broker connections" }
      }))
  )
  .add(
    HttpApiEndpoint.post("createBroker", "/brokers")
      .setPayload(CreateBrokerPayload)
      .addSuccess(BrokerView, { status: 201 })
      .addError(UnprocessableResponse)
      .addError(BrokerCredentialsInvalidResponse)
      .addError(BrokerUnreachableResponse)
      .annotateContext(operation({
        summary: "Connect a broker",
        description: "A `mock` connection in test mode, or an `alpaca` one in live mode with its credentials, checked with Alpaca first and stored encrypted.",
        responses: { 201: "The broker connection, without its credentials" }
      }))
  )
  .add(replaceBrokerCredentials)
  .add(
    HttpApiEndpoint.del("disconnectBroker", "/brokers/:broker_id")
      .setPath(BrokerPath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(BrokerNotFoundResponse)
      .annotateContext(operation({
        summary: "Disconnect a broker",
        description: "Removes the connection: its intents keep their history; new intents naming it get 404.",
        responses: { 204: "Disconnected" }
      }))
  )
  .add(
    HttpApiEndpoint.get("listWebhookEndpoints", "/webhook-endpoints")
      .setUrlParams(ModeParams)
      .addSuccess(Schema.Struct({ items: Schema.Array(DashboardEndpoint) }))
      .annotateContext(operation({
        summary: "List the account's webhook endpoints, in one mode",
        description: "The endpoints of the given mode, each with its count of failing deliveries of the last 7 days; never their secrets.",
        responses: { 200: "The webhook endpoints" }
      }))
  )
  .add(
    HttpApiEndpoint.post("createWebhookEndpoint", "/webhook-endpoints")
      .setPayload(CreateWebhookEndpointPayload)
      .addSuccess(CreatedWebhookEndpoint, { status: 201 })
      .annotateContext(operation({
        summary: "Create a webhook endpoint",
        description: "An endpoint in one mode for the given event types (all six unless named); the signing secret is in this response only.",
        responses: { 201: "The endpoint, with its signing secret (shown once)" }
      }))
  )
  .add(deleteWebhookEndpoint)
  .add(
    HttpApiEndpoint.post("rotateWebhookSecret", "/webhook-endpoints/:endpoint_id/rotate-secret")
      .setPath(EndpointPath)
      .addSuccess(CreatedWebhookEndpoint)
      .addError(WebhookEndpointNotFoundResponse)
      .annotateContext(operation({
        summary: "Rotate an endpoint's signing secret",
        description: "A new signing secret, shown once; the old one stops signing at once.",
        responses: { 200: "The endpoint, with its new signing secret (shown once)" }
      }))
  )
  .add(
    HttpApiEndpoint.post("disableWebhookEndpoint", "/webhook-endpoints/:endpoint_id/disable")
      .setPath(EndpointPath)
      .addSuccess(WebhookEndpointView)
      .addError(WebhookEndpointNotFoundResponse)
      .annotateContext(operation({
        summary: "Disable a webhook endpoint",
        description: "Stops deliveries to the endpoint: its pending deliveries fail and new events are not sent to it.",
        responses: { 200: "The endpoint, disabled" }
      }))
  )
  .add(
    HttpApiEndpoint.post("enableWebhookEndpoint", "/webhook-endpoints/:endpoint_id/enable")
      .setPath(EndpointPath)
      .addSuccess(WebhookEndpointView)
      .addError(WebhookEndpointNotFoundResponse)
      .annotateContext(operation({
        summary: "Enable a webhook endpoint",
        description: "The endpoint receives new events again; failed deliveries can be re-sent.",
        responses: { 200: "The endpoint, enabled" }
      }))
  )
  .add(
    HttpApiEndpoint.post("sendTestEvent", "/webhook-endpoints/:endpoint_id/test")
      .setPath(EndpointPath)
      .addSuccess(Delivery, { status: 202 })
      .addError(WebhookEndpointNotFoundResponse)
      .addError(WebhookEndpointDisabledResponse)
      .annotateContext(operation({
        summary: "Send a test event",
        description: "Sends a signed `webhook.test` event to this endpoint only, to check that it receives and verifies deliveries.",
        responses: { 202: "The test delivery, queued" }
      }))
  )
  .add(listDeliveries)
  .add(resendDelivery)
  .add(
    HttpApiEndpoint.get("listIntents", "/intents")
      .setUrlParams(Schema.Struct({ ...ListIntentsParams.fields, ...ModeParams.fields }))
      .addSuccess(IntentPage)
      .annotateContext(operation({
        summary: "List the account's Trade Intents, in one mode",
        description: "The same page as `GET /api/v1/intents`, for the signed-in account and the given mode.",
        responses: { 200: "A page of Trade Intents with the totals" },
        examples: { 200: exampleIntentPage }
      }))
  )
  .add(
    HttpApiEndpoint.get("getIntent", "/intents/:id")
      .setPath(IntentPath)
      .setUrlParams(ModeParams)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .annotateContext(operation({
        summary: "Look a Trade Intent up",
        description: "One of the account's intents in the given mode, with its orders and fills.",
        responses: { 200: "The Trade Intent" },
        examples: { 200: exampleIntent }
      }))
  )
  .add(
    HttpApiEndpoint.get("intentEvents", "/intents/:id/events")
      .setPath(IntentPath)
      .setUrlParams(ModeParams)
      .addSuccess(EventTimeline)
      .addError(IntentNotFoundResponse)
      .annotateContext(operation({
        summary: "A Trade Intent's events, oldest first",
        description: "The timeline of one of the account's intents in the given mode.",
        responses: { 200: "The intent's events, oldest first" },
        examples: { 200: { items: [exampleEvent] } }
      }))
  )
  .add(
    HttpApiEndpoint.post("cancelIntent", "/intents/:id/cancel")
      .setPath(IntentPath)
      .setUrlParams(ModeParams)
      .addSuccess(TradeIntent)
      .addError(IntentNotFoundResponse)
      .addError(IntentNotCancelableResponse)
      .annotateContext(operation({
        summary: "Cancel a Trade Intent",
        description: "The same cancel as `POST /api/v1/intents/{id}/cancel`, for one of the account's intents in the given mode.",
        responses: { 200: "The Trade Intent after the cancel" },
        examples: { 200: exampleCanceledIntent }
      }))
  )
  .add(
    HttpApiEndpoint.get("streamEvents", "/events/stream")
      .setUrlParams(Schema.Struct({ ...ModeParams.fields, after: Schema.optional(EventCursorFromString) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(EventCursorFromString) }))
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
      .addError(RateLimitedResponse)
      .annotateContext(operation({
        summary: "Follow this mode's events as they commit (Server-Sent Events)",
        description: "The account's events of the given mode as they commit, for live pages: the same stream as `GET /api/v1/events/stream`.",
        responses: { 200: "An open `text/event-stream` of events" }
      }))
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
