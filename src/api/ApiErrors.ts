import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import {
  ApiKeyNotFound,
  BrokerCredentialsInvalid,
  BrokerNotFound,
  BrokerUnreachable,
  UserNotFound
} from "../domain/Account.js"
import { Forbidden, QuotaExceeded, RateLimited, Unauthorized } from "../domain/Auth.js"
import type { WireError } from "../domain/Errors.js"
import { InternalError, Unavailable, Unprocessable, ValidationError, WireErrors } from "../domain/Errors.js"
import { EventNotFound } from "../domain/Event.js"
import {
  CsrfRejected,
  EmailTaken,
  InvalidLogin,
  LoginExists,
  LoginThrottled,
  SessionRequired,
  SignupClosed
} from "../domain/Login.js"
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
 * The wire form of a typed error, with its status and code from `WireErrors`: handlers fail with
 * the tagged error, clients see `{detail, error_code, request_id}` plus the `carried` fields of
 * the error, and the derived client decodes it back.
 */
/** How the OpenAPI document describes each error response (not its schema's identifier). */
const responseDescriptions: { readonly [Tag in keyof WireErrors]?: string } = {
  ValidationError: "The request is malformed: bad JSON, a missing field, a wrong type, an unknown field (`validation_error`)",
  Unauthorized: "The bearer token is missing, malformed, unknown, revoked or expired (`unauthorized`)",
  Forbidden: "The API key lacks the scope this call needs, or names the other mode's data (`forbidden`)",
  SessionRequired: "No live session: sign in first (`unauthorized`)",
  InvalidLogin: "Wrong email or password (`invalid_credentials`)",
  CsrfRejected: "Missing or wrong `X-CSRF-Token`, or a foreign `Origin` (`forbidden`)",
  SignupClosed: "Sign-up is closed on this deployment (`signup_closed`)",
  EmailTaken: "An account already has this email (`email_taken`)",
  LoginExists: "This user already has a login (`login_exists`)",
  LoginThrottled: "Too many failed sign-ins: wait `Retry-After` seconds (`rate_limit_exceeded`)",
  BrokerNotFound: "No such broker connection for this user and mode (`broker_not_found`)",
  IntentNotFound: "No such intent for this key's user and mode (`not_found`)",
  EventNotFound: "No such event for this key's user and mode, or older than 30 days (`not_found`)",
  UserNotFound: "No such user (`user_not_found`)",
  ApiKeyNotFound: "No such API key (`api_key_not_found`)",
  WebhookEndpointNotFound: "No such webhook endpoint (`webhook_endpoint_not_found`)",
  DeliveryNotFound: "No such delivery (`delivery_not_found`)",
  WebhookEndpointDisabled: "The webhook endpoint is disabled: enable it first (`webhook_endpoint_disabled`)",
  DuplicateIntent: "An intent already holds this intent_id; `Location` points at it (`duplicate_intent_id`)",
  IntentNotCancelable: "The intent is final and cannot be canceled (`intent_not_cancelable`)",
  Unprocessable: "Well formed, but against a rule of the resource (`unprocessable_entity`)",
  BrokerCredentialsInvalid: "Alpaca refused the credentials (`broker_credentials_invalid`)",
  RateLimited: "Over the rate limit: wait `Retry-After` seconds (`rate_limit_exceeded`)",
  QuotaExceeded: "The monthly intent quota is used up (`quota_exceeded`)",
  InternalError: "An unexpected failure; nothing about it is sent, quote `request_id` (`internal_server_error`)",
  Unavailable: "The database is not answering: retry after `Retry-After` seconds (`service_unavailable`)",
  BrokerUnreachable: "Alpaca is not answering: try again later (`broker_unavailable`)"
}

const wire = <A extends { readonly _tag: keyof WireErrors; readonly detail: string }, I>(
  error: Schema.Schema<A, I> & { readonly _tag: A["_tag"] },
  carried: Readonly<Record<string, Schema.Schema.AnyNoContext>> = {}
) => {
  const { code, status }: WireError = WireErrors[error._tag]
  const carriedFields = Schema.Struct(carried)
  return Schema.transformOrFail(
    Schema.Struct({ ...ErrorBody.fields, error_code: Schema.Literal(code), ...carried }),
    Schema.typeSchema(error),
    {
      strict: true,
      decode: (body) => ParseResult.decodeUnknown(error)({ ...body, _tag: error._tag }),
      encode: (e) =>
        Effect.zipWith(
          ParseResult.validate(carriedFields)(e),
          FiberRef.get(CurrentRequestId),
          (fields, request_id) => ({ ...fields, detail: e.detail, error_code: code, request_id })
        )
    }
  ).annotations(HttpApiSchema.annotations({
    status,
    identifier: `Error_${code}`,
    description: responseDescriptions[error._tag] ?? `\`${code}\``
  }))
}

export const ValidationErrorResponse = wire(ValidationError)
export const UnauthorizedResponse = wire(Unauthorized)
export const ForbiddenResponse = wire(Forbidden)
export const BrokerNotFoundResponse = wire(BrokerNotFound)
export const IntentNotFoundResponse = wire(IntentNotFound)
export const EventNotFoundResponse = wire(EventNotFound)
export const UserNotFoundResponse = wire(UserNotFound)
export const ApiKeyNotFoundResponse = wire(ApiKeyNotFound)
export const WebhookEndpointNotFoundResponse = wire(WebhookEndpointNotFound)
export const DeliveryNotFoundResponse = wire(DeliveryNotFound)
export const WebhookEndpointDisabledResponse = wire(WebhookEndpointDisabled)
export const DuplicateIntentResponse = wire(DuplicateIntent)
export const IntentNotCancelableResponse = wire(IntentNotCancelable)
export const UnprocessableResponse = wire(Unprocessable)
export const BrokerCredentialsInvalidResponse = wire(BrokerCredentialsInvalid)
export const BrokerUnreachableResponse = wire(BrokerUnreachable)
export const RateLimitedResponse = wire(RateLimited, { retry_after: Schema.Int })
export const QuotaExceededResponse = wire(QuotaExceeded, { retry_after: Schema.Int })
export const SessionRequiredResponse = wire(SessionRequired)
export const InvalidLoginResponse = wire(InvalidLogin)
export const CsrfRejectedResponse = wire(CsrfRejected)
export const SignupClosedResponse = wire(SignupClosed)
export const EmailTakenResponse = wire(EmailTaken)
export const LoginExistsResponse = wire(LoginExists)
export const LoginThrottledResponse = wire(LoginThrottled, { retry_after: Schema.Int })
export const InternalErrorResponse = wire(InternalError)
export const UnavailableResponse = wire(Unavailable)

/** The typed errors that say an id names nothing. */
const notFoundTags = [
  "IntentNotFound",
  "EventNotFound",
  "UserNotFound",
  "ApiKeyNotFound",
  "BrokerNotFound",
  "WebhookEndpointNotFound",
  "DeliveryNotFound"
] as const satisfies ReadonlyArray<keyof WireErrors>
type NotFoundTag = typeof notFoundTags[number]

/** The decode issue's message of a malformed path id: never shown, it names the error to answer. */
const malformedIdMessage = (notFound: NotFoundTag) => `malformed path id (${notFound})`

/**
 * A branded id read from a path. A malformed id names nothing, so it is answered as the
 * resource's `notFound`, exactly like an unknown id; `malformedPathId` recognises its decode issue.
 */
export const pathId = <A, I, R>(id: Schema.Schema<A, I, R>, notFound: NotFoundTag) =>
  id.annotations({ message: () => ({ message: malformedIdMessage(notFound), override: true }) })

/** The not-found error a request's decode issue stands for, when it is a malformed `pathId`. */
export const malformedPathId = (issue: { readonly message: string } | undefined) => {
  const notFound = notFoundTags.find((tag) => issue?.message === malformedIdMessage(tag))
  return notFound === undefined ? undefined : WireErrors[notFound]
}
