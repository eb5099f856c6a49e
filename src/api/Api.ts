import * as HttpApi from "@effect/platform/HttpApi"
import * as OpenApi from "@effect/platform/OpenApi"
import { AdminApi } from "./AdminApi.js"
import { InternalErrorResponse, ValidationErrorResponse } from "./ApiErrors.js"
import { DashboardAppApi, DashboardLoginApi } from "./DashboardApi.js"
import { EventsApi } from "./EventsApi.js"
import { HealthApi } from "./HealthApi.js"
import { IntentsApi } from "./IntentsApi.js"
import { dropDecodeError } from "./OpenApiPatch.js"

/** The whole HTTP contract: the server, the OpenAPI document and the typed client derive from it. */
export class Api extends HttpApi.make("trade-intent-router")
  .add(IntentsApi)
  .add(EventsApi)
  .add(AdminApi)
  .add(DashboardLoginApi)
  .add(DashboardAppApi)
  .add(HealthApi)
  .addError(ValidationErrorResponse)
  .addError(InternalErrorResponse)
  .annotate(OpenApi.Title, "Trade Intent Router")
  .annotate(OpenApi.Version, "1")
  .annotate(OpenApi.Transform, dropDecodeError)
{}
