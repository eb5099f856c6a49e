import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import type { ErrorBody } from "../api/ApiErrors.js"
import { CurrentRequestId } from "../api/RequestId.js"
import type { WireError } from "../domain/Errors.js"

/** An error answered outside the API's typed errors: an entry of `WireErrors` that has its detail. */
export type Refusal = WireError & { readonly detail: string }

/** A refusal's body: the fields every error response has. */
export const errorBody = (refusal: Refusal, requestId: string): ErrorBody => ({
  detail: refusal.detail,
  error_code: refusal.code,
  request_id: requestId
})

/** A refusal as a response (edge refusals, unknown routes, defects), with the request's id. */
export const errorResponse = (refusal: Refusal) =>
  Effect.map(FiberRef.get(CurrentRequestId), (requestId) =>
    HttpServerResponse.unsafeJson(errorBody(refusal, requestId), { status: refusal.status }))
