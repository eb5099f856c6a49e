import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiSwagger from "@effect/platform/HttpApiSwagger"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import { Api } from "../api/Api.js"
import { AdminHttpLive } from "./AdminHttp.js"
import * as ApiMiddleware from "./ApiMiddleware.js"
import { AdminAuthLive, ApiKeyAuthLive } from "./Auth.js"
import * as Edge from "./Edge.js"
import { HealthHttpLive } from "./HealthHttp.js"
import { EventsHttpLive } from "./EventsHttp.js"
import { IntentsHttpLive } from "./IntentsHttp.js"

/** The API definition with its handlers. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([IntentsHttpLive, EventsHttpLive, AdminHttpLive, HealthHttpLive])
)

/** What the HTTP side is configured with: the operator token and the failed-authentication limit. */
export interface Options {
  /** The operator API's bearer token; without one the operator API is closed. */
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  /** Failed authentications (API keys, admin tokens) per client address and minute before 429s; 20 unless set. */
  readonly authFailuresPerMinute?: number | undefined
}

/** The security handlers: bearer API keys (on the key cache in context) and the operator token. */
export const authentication = (options: Options) =>
  Layer.merge(
    ApiKeyAuthLive({ authFailuresPerMinute: options.authFailuresPerMinute ?? 20 }),
    AdminAuthLive(options.adminToken, { failuresPerMinute: options.authFailuresPerMinute ?? 20 })
  )

/**
 * The HTTP service on the `HttpServer` in context: the API, its OpenAPI document at
 * `/api/v1/openapi.json`, a Swagger page at `/docs`, and the edge middleware around all of it.
 */
export const layer = (options: Options) =>
  HttpApiBuilder.serve(Edge.middleware).pipe(
    Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/api/v1/openapi.json" })),
    Layer.provide(ApiMiddleware.layer),
    Layer.provide(ApiLive),
    Layer.provide(authentication(options)),
    HttpServer.withLogAddress
  )
