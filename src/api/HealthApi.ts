import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { UnavailableResponse } from "./ApiErrors.js"

/** 200 once the server accepts requests and the database answers; 503 otherwise. */
export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/healthz")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .addError(UnavailableResponse)
  )
{}
