import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { ApiKeyNotFound, BrokerNotFound, UserNotFound } from "../domain/Account.js"
import { Forbidden, QuotaExceeded, RateLimited, Unauthorized } from "../domain/Auth.js"
import { InternalError, Unavailable, Unprocessable, ValidationError } from "../domain/Errors.js"
import { DuplicateIntent, IntentNotCancelable, IntentNotFound } from "../domain/Intent.js"
import { DeliveryNotFound, WebhookEndpointDisabled, WebhookEndpointNotFound } from "../domain/Webhook.js"
import { CurrentRequestId } from "./RequestId.js"

/** The error body of every error response: exactly these fields (a 429 adds `retry_after`). */
export const ErrorBody = Schema.Struct({
  detail: Schema.String,
  error_code: Schema.String,
  request_id: Schema.String
})
export type ErrorBody = typeof ErrorBody.Type

/**
 * The wire form of a domain error: handlers fail with the tagged error, clients see
 * `{detail, error_code, request_id}` with `status`, and the derived client decodes it back.
 */
const wire = <A extends { readonly detail: string }, I, const Code extends string>(
  error: Schema.Schema<A, I>,
  options: { readonly status: number; readonly code: Code; readonly make: (detail: string) => A }
) =>
  Schema.transformOrFail(
    Schema.Struct({ detail: Schema.String, error_code: Schema.Literal(options.code), request_id: Schema.String }),
    Schema.typeSchema(error),
    {
      strict: true,
      decode: ({ detail }) => ParseResult.succeed(options.make(detail)),
      encode: (e) =>
        Effect.map(FiberRef.get(CurrentRequestId), (request_id) => ({
          detail: e.detail,
          error_code: options.code,
          request_id
        }))
    }
  ).annotations(HttpApiSchema.annotations({ status: options.status, identifier: `Error_${options.code}` }))

/** Like `wire`, for the 429s that also carry `retry_after`. */
const wireRetryAfter = <A extends { readonly detail: string; readonly retry_after: number }, I, const Code extends string>(
  error: Schema.Schema<A, I>,
  options: { readonly code: Code; readonly make: (detail: string, retryAfter: number) => A }
) =>
  Schema.transformOrFail(
    Schema.Struct({
      detail: Schema.String,
      error_code: Schema.Literal(options.code),
      request_id: Schema.String,
      retry_after: Schema.Int
    }),
    Schema.typeSchema(error),
    {
      strict: true,
      decode: ({ detail, retry_after }) => ParseResult.succeed(options.make(detail, retry_after)),
      encode: (e) =>
        Effect.map(FiberRef.get(CurrentRequestId), (request_id) => ({
          detail: e.detail,
          error_code: options.code,
          request_id,
          retry_after: e.retry_after
        }))
    }
  ).annotations(HttpApiSchema.annotations({ status: 429, identifier: `Error_${options.code}` }))

export const ValidationErrorResponse = wire(ValidationError, {
  status: 400,
  code: "validation_error",
  make: (detail) => new ValidationError({ detail })
})
export const UnauthorizedResponse = wire(Unauthorized, {
  status: 401,
  code: "unauthorized",
  make: (detail) => new Unauthorized({ detail })
})
export const ForbiddenResponse = wire(Forbidden, {
  status: 403,
  code: "forbidden",
  make: (detail) => new Forbidden({ detail })
})
export const BrokerNotFoundResponse = wire(BrokerNotFound, {
  status: 404,
  code: "broker_not_found",
  make: (detail) => new BrokerNotFound({ detail })
})
export const IntentNotFoundResponse = wire(IntentNotFound, {
  status: 404,
  code: "not_found",
  make: (detail) => new IntentNotFound({ detail })
})
export const UserNotFoundResponse = wire(UserNotFound, {
  status: 404,
  code: "user_not_found",
  make: (detail) => new UserNotFound({ detail })
})
export const ApiKeyNotFoundResponse = wire(ApiKeyNotFound, {
  status: 404,
  code: "api_key_not_found",
  make: (detail) => new ApiKeyNotFound({ detail })
})
export const WebhookEndpointNotFoundResponse = wire(WebhookEndpointNotFound, {
  status: 404,
  code: "webhook_endpoint_not_found",
  make: (detail) => new WebhookEndpointNotFound({ detail })
})
export const DeliveryNotFoundResponse = wire(DeliveryNotFound, {
  status: 404,
  code: "delivery_not_found",
  make: (detail) => new DeliveryNotFound({ detail })
})
export const WebhookEndpointDisabledResponse = wire(WebhookEndpointDisabled, {
  status: 409,
  code: "webhook_endpoint_disabled",
  make: (detail) => new WebhookEndpointDisabled({ detail })
})
export const DuplicateIntentResponse = wire(DuplicateIntent, {
  status: 409,
  code: "duplicate_intent_id",
  make: (detail) => new DuplicateIntent({ detail })
})
export const IntentNotCancelableResponse = wire(IntentNotCancelable, {
  status: 409,
  code: "intent_not_cancelable",
  make: (detail) => new IntentNotCancelable({ detail })
})
export const UnprocessableResponse = wire(Unprocessable, {
  status: 422,
  code: "unprocessable_entity",
  make: (detail) => new Unprocessable({ detail })
})
export const RateLimitedResponse = wireRetryAfter(RateLimited, {
  code: "rate_limit_exceeded",
  make: (detail, retry_after) => new RateLimited({ detail, retry_after })
})
export const QuotaExceededResponse = wireRetryAfter(QuotaExceeded, {
  code: "quota_exceeded",
  make: (detail, retry_after) => new QuotaExceeded({ detail, retry_after })
})
export const InternalErrorResponse = wire(InternalError, {
  status: 500,
  code: "internal_server_error",
  make: (detail) => new InternalError({ detail })
})

export const UnavailableResponse = wire(Unavailable, {
  status: 503,
  code: "service_unavailable",
  make: (detail) => new Unavailable({ detail })
})

/** Errors answered before a request reaches the API (no handler could fail with them). */
export const edgeErrors = {
  notFound: { status: 404, error_code: "not_found", detail: "Not found" },
  payloadTooLarge: { status: 413, error_code: "payload_too_large", detail: "Request body too large" },
  unsupportedMediaType: {
    status: 415,
    error_code: "unsupported_media_type",
    detail: "Content-Type must be application/json"
  },
  headersTooLarge: { status: 431, error_code: "headers_too_large", detail: "Request headers too large" },
  internal: { status: 500, error_code: "internal_server_error", detail: "Internal server error" },
  unavailable: {
    status: 503,
    error_code: "service_unavailable",
    detail: "The database is not answering; retry shortly (a creation retried with the same intent_id is never created twice)"
  }
} as const
