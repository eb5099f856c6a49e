import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { UnavailableResponse } from "./ApiErrors.js"
import { operation } from "./OpenApiDocs.js"

const Ok = Schema.Struct({ status: Schema.Literal("ok") })

/** Probes for load balancers and orchestrators: alive, and ready to serve. */
export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/healthz")
      .addSuccess(Ok)
      .addError(UnavailableResponse)
      .annotateContext(operation({
        summary: "Ready: the server accepts requests and the database answers (the same as /readyz)",
        description: "Kept for load balancers configured with `/healthz`: answers exactly like `/readyz`. No authentication.",
        responses: { 200: "Ready", 503: "The database does not answer within 2 s (`service_unavailable`)" },
        examples: { 200: { status: "ok" } }
      }))
  )
  .add(
    HttpApiEndpoint.get("ready", "/readyz")
      .addSuccess(Ok)
      .addError(UnavailableResponse)
      .annotateContext(operation({
        summary: "Ready: 200 while the database answers within 2 s, 503 otherwise",
        description: "The readiness probe: take the instance out of rotation while it answers 503. No authentication.",
        responses: { 200: "Ready", 503: "The database does not answer within 2 s (`service_unavailable`)" },
        examples: { 200: { status: "ok" } }
      }))
  )
  .add(
    HttpApiEndpoint.get("live", "/livez")
      .addSuccess(Ok)
      .annotateContext(operation({
        summary: "Alive: 200 whenever the process serves HTTP, whatever its dependencies",
        description: "The liveness probe: restart the instance only when this fails. It checks no dependency, so a " +
          "database outage never restarts the fleet. No authentication.",
        responses: { 200: "Alive" },
        examples: { 200: { status: "ok" } }
      }))
  )
  .annotate(OpenApi.Description, "Probes for load balancers and orchestrators: liveness and readiness.")
{}
