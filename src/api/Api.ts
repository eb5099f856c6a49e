import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { EventType } from "../domain/Webhook.js"
import { AdminApi } from "./AdminApi.js"
import { InternalErrorResponse, ValidationErrorResponse } from "./ApiErrors.js"
import { DashboardAppApi, DashboardLoginApi } from "./DashboardApi.js"
import { EventsApi } from "./EventsApi.js"
import { HealthApi } from "./HealthApi.js"
import { IntentsApi } from "./IntentsApi.js"
import { WebhookEvent, WebhookTestEvent } from "./OpenApiDocs.js"
import { completeDocument, dropDecodeError } from "./OpenApiPatch.js"
import { TestHelpersApi } from "./TestHelpersApi.js"

const complete = completeDocument(EventType.literals)

/** The whole HTTP contract: the server, the OpenAPI document and the typed client derive from it. */
export class Api extends HttpApi.make("trade-intent-router")
  .add(IntentsApi)
  .add(EventsApi)
  .add(TestHelpersApi)
  .add(AdminApi)
  .add(DashboardLoginApi)
  .add(DashboardAppApi)
  .add(HealthApi)
  .addError(ValidationErrorResponse)
  .addError(InternalErrorResponse)
  .annotate(HttpApi.AdditionalSchemas, [WebhookEvent, WebhookTestEvent])
  .annotateContext(OpenApi.annotations({
    title: "Trade Intent Router",
    version: "1",
    description: "Accepts trade intents over a JSON REST API (`/api/v1`, API key), routes them to brokers and " +
      "signs webhooks about their events. Also the operator API (`/admin/v1`, `ADMIN_TOKEN`), the dashboard's " +
      "API (`/dashboard/api/v1`, session cookie) and the health probes. Every response carries `X-Request-Id`; " +
      "every error body is `{detail, error_code, request_id}`.",
    license: { name: "MIT", url: "https://opensource.org/license/mit" },
    // Relative: the document is served by the instance it describes, whatever its host and port.
    servers: [{ url: "/", description: "The instance serving this document" }],
    transform: (spec) => complete(dropDecodeError(spec))
  }))
{}
