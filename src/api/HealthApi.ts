import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { UnavailableResponse } from "./ApiErrors.js"

const Ok = Schema.Struct({ status: Schema.Literal("ok") })

/** Probes for load balancers and orchestrators: alive, and ready to serve. */
export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/healthz")
      .addSuccess(Ok)
      .addError(UnavailableResponse)
      .annotate(OpenApi.Summary, "Ready: the server accepts requests and the database answers (the same as /readyz)")
  )
  .add(
    HttpApiEndpoint.get("ready", "/readyz")
      .addSuccess(Ok)
      .addError(UnavailableResponse)
      .annotate(OpenApi.Summary, "Ready: 200 while the database answers within 2 s, 503 otherwise (take the instance out of rotation)")
  )
  .add(
    HttpApiEndpoint.get("live", "/livez")
      .addSuccess(Ok)
      .annotate(OpenApi.Summary, "Alive: 200 whenever the process serves HTTP, whatever its dependencies (restart it only when this fails)")
  )
{}
