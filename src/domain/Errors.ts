import * as Schema from "effect/Schema"

/** How one error reaches a client: its HTTP status, its `error_code`, and its default detail. */
export interface WireError {
  readonly status: number
  readonly code: string
  /** Absent where every occurrence says more (which field, which status, how long to wait). */
  readonly detail?: string
}

/**
 * Every error a client can receive, declared once and named by the tag of the error that carries
 * it: the typed errors take their default detail from here, the API's error schemas their status
 * and code, and the refusals answered before the API (unknown routes, oversized requests,
 * malformed HTTP) their whole body.
 */
export const WireErrors = {
  ValidationError: { status: 400, code: "validation_error" },
  Unauthorized: { status: 401, code: "unauthorized", detail: "Invalid API key" },
  Forbidden: { status: 403, code: "forbidden", detail: "This API key does not have permission for this resource" },
  SessionRequired: { status: 401, code: "unauthorized", detail: "Sign in to continue" },
  InvalidLogin: { status: 401, code: "invalid_credentials", detail: "Invalid email or password" },
  CsrfRejected: { status: 403, code: "forbidden", detail: "Missing or invalid CSRF token" },
  SignupClosed: { status: 403, code: "signup_closed", detail: "Sign-up is closed: ask the operator for an account" },
  EmailTaken: { status: 409, code: "email_taken", detail: "An account with this email already exists" },
  LoginExists: { status: 409, code: "login_exists", detail: "This user already has a login" },
  LoginThrottled: { status: 429, code: "rate_limit_exceeded" },
  BrokerNotFound: { status: 404, code: "broker_not_found", detail: "Broker connection not found" },
  IntentNotFound: { status: 404, code: "not_found", detail: "Trade Intent not found" },
  EventNotFound: { status: 404, code: "not_found", detail: "Event not found" },
  UserNotFound: { status: 404, code: "user_not_found", detail: "User not found" },
  ApiKeyNotFound: { status: 404, code: "api_key_not_found", detail: "API key not found" },
  WebhookEndpointNotFound: { status: 404, code: "webhook_endpoint_not_found", detail: "Webhook endpoint not found" },
  DeliveryNotFound: { status: 404, code: "delivery_not_found", detail: "Delivery not found" },
  WebhookEndpointDisabled: {
    status: 409,
    code: "webhook_endpoint_disabled",
    detail: "The webhook endpoint is disabled (it answered 410 Gone, or its owner disabled it): enable it to receive events again"
  },
  DuplicateIntent: { status: 409, code: "duplicate_intent_id", detail: "Trade Intent with this intent_id already exists" },
  IntentNotCancelable: { status: 409, code: "intent_not_cancelable" },
  Unprocessable: { status: 422, code: "unprocessable_entity" },
  BrokerCredentialsInvalid: { status: 422, code: "broker_credentials_invalid", detail: "Alpaca refused the credentials" },
  RateLimited: { status: 429, code: "rate_limit_exceeded" },
  QuotaExceeded: { status: 429, code: "quota_exceeded", detail: "Monthly intent quota exceeded" },
  InternalError: { status: 500, code: "internal_server_error", detail: "Internal server error" },
  Unavailable: {
    status: 503,
    code: "service_unavailable",
    detail: "The database is not answering; retry shortly (a creation retried with the same intent_id is never created twice)"
  },
  BrokerUnreachable: { status: 503, code: "broker_unavailable", detail: "Alpaca is unavailable; try again later" },
  /** An unknown route, or a path that names nothing (it holds a NUL). */
  NotFound: { status: 404, code: "not_found", detail: "Not found" },
  PayloadTooLarge: { status: 413, code: "payload_too_large", detail: "Request body too large" },
  UnsupportedMediaType: { status: 415, code: "unsupported_media_type", detail: "Content-Type must be application/json" },
  HeadersTooLarge: { status: 431, code: "headers_too_large", detail: "Request headers too large" },
  RequestTimeout: { status: 408, code: "request_timeout", detail: "Request timed out" },
  BadRequest: { status: 400, code: "bad_request", detail: "Malformed HTTP request" }
} as const satisfies Record<string, WireError>
export type WireErrors = typeof WireErrors

/** A `detail` field whose constructor default is the error's detail in `WireErrors`. */
export const detail = (error: { readonly detail: string }) =>
  Schema.String.pipe(Schema.propertySignature, Schema.withConstructorDefault(() => error.detail))

/** Annotates a schema with the rule a client reads in a 400's detail, after the field's name. */
export const rule = (message: string) => ({ message: () => ({ message, override: true }) })

/** The request is malformed: bad JSON, a missing field, a wrong type, an unknown field. */
export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  detail: Schema.String
}) {}

/** The request is well formed but breaks a rule of the resource (missing limit_price, …). */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", {
  detail: Schema.String
}) {}

export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  detail: detail(WireErrors.InternalError)
}) {}

/** A dependency (the database) does not answer. */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  detail: detail(WireErrors.Unavailable)
}) {}

/** The largest value an `integer` (int4) column holds: a larger integer is a 400, never a 500. */
export const MAX_INT4 = 2_147_483_647

/** A string without a NUL character, which no PostgreSQL text column can hold. */
export const NulFreeString = Schema.String.pipe(Schema.filter((s) => !s.includes("\u0000"))).annotations(
  rule("must not contain a NUL character")
)
