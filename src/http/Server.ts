import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiSwagger from "@effect/platform/HttpApiSwagger"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Layer from "effect/Layer"
import { Api } from "../api/Api.js"
import { AdminHttpLive } from "./AdminHttp.js"
import * as ApiMiddleware from "./ApiMiddleware.js"
import * as Edge from "./Edge.js"
import { HealthHttpLive } from "./HealthHttp.js"
import { IntentsHttpLive } from "./IntentsHttp.js"

/** The API definition with its handlers. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([IntentsHttpLive, AdminHttpLive, HealthHttpLive])
)

/**
 * The HTTP service on the `HttpServer` in context: the API, its OpenAPI document at
 * `/api/v1/openapi.json`, a Swagger page at `/docs`, and the edge middleware around all of it.
 */
export const layer = HttpApiBuilder.serve(Edge.middleware).pipe(
  Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/api/v1/openapi.json" })),
  Layer.provide(ApiMiddleware.layer),
  Layer.provide(ApiLive),
  HttpServer.withLogAddress
)
