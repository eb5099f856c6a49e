import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import { CurrentRequestId } from "../api/RequestId.js"

/** An error response built outside the API's typed errors (edge refusals, unknown routes, defects). */
export const errorResponse = (error: { readonly status: number; readonly error_code: string; readonly detail: string }) =>
  Effect.map(FiberRef.get(CurrentRequestId), (request_id) =>
    HttpServerResponse.unsafeJson(
      { detail: error.detail, error_code: error.error_code, request_id },
      { status: error.status }
    ))
