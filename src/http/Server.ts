import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiSwagger from "@effect/platform/HttpApiSwagger"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import { Api } from "../api/Api.js"
import { AdminHttpLive } from "./AdminHttp.js"
import * as ApiMiddleware from "./ApiMiddleware.js"
import { AdminAuthLive, ApiKeyAuthLive } from "./Auth.js"
import * as Edge from "./Edge.js"
import { DashboardAuthLive, PublicUrl, SignupPolicy } from "./DashboardAuth.js"
import * as DashboardAssets from "./DashboardAssets.js"
import { DashboardHttpLive, DashboardLoginHttpLive } from "./DashboardHttp.js"
import { HealthHttpLive } from "./HealthHttp.js"
import { EventsHttpLive } from "./EventsHttp.js"
import { IntentsHttpLive } from "./IntentsHttp.js"
import * as MetricsHttp from "./MetricsHttp.js"
import { TestHelpersHttpLive } from "./TestHelpersHttp.js"

/** The API definition with its handlers. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([
    IntentsHttpLive,
    EventsHttpLive,
    TestHelpersHttpLive,
    AdminHttpLive,
    DashboardLoginHttpLive,
    DashboardHttpLive,
    HealthHttpLive
  ])
)

/** What the HTTP side is configured with: the operator token and the failed-authentication limit. */
export interface Options {
  /** The operator API's bearer token; without one the operator API is closed. */
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  /** Failed authentications (API keys, admin tokens) per client address and minute before 429s; 20 unless set. */
  readonly authFailuresPerMinute?: number | undefined
  /** Where customers reach the service (`PUBLIC_URL`): the dashboard's cookies are `Secure` when it is https. */
  readonly publicUrl?: Option.Option<URL> | undefined
  /** Whether anyone may sign up in the dashboard; open unless set. */
  readonly signup?: "open" | "closed" | undefined
  /** The built dashboard (`dist/dashboard`), served at `/dashboard/`; its API is served either way. */
  readonly dashboardAssets?: string | undefined
}

/** The security handlers: bearer API keys (on the key cache in context) and the operator token. */
export const authentication = (options: Options) =>
  Layer.mergeAll(
    ApiKeyAuthLive({ authFailuresPerMinute: options.authFailuresPerMinute ?? 20 }),
    AdminAuthLive(options.adminToken, { failuresPerMinute: options.authFailuresPerMinute ?? 20 }),
    DashboardAuthLive
  )

/** The dashboard's settings, for the Layers that read them as they are built. */
const dashboardSettings = (options: Options) =>
  Layer.mergeAll(
    Layer.succeed(PublicUrl, options.publicUrl ?? Option.none()),
    Layer.succeed(SignupPolicy, options.signup ?? "open")
  )

/**
 * The HTTP service on the `HttpServer` in context: the API, its OpenAPI document at
 * `/api/v1/openapi.json`, a Swagger page at `/docs`, metrics at `/metrics`, and the edge middleware
 * around all of it.
 */
export const layer = (options: Options) =>
  HttpApiBuilder.serve(Edge.middleware).pipe(
    Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/api/v1/openapi.json" })),
    Layer.provide(options.dashboardAssets === undefined ? Layer.empty : DashboardAssets.layer(options.dashboardAssets)),
    Layer.provide(MetricsHttp.layer),
    Layer.provide(ApiMiddleware.layer),
    Layer.provide(ApiLive),
    Layer.provide(authentication(options)),
    Layer.provide(dashboardSettings(options)),
    HttpServer.withLogAddress
  )
