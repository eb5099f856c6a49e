import * as Etag from "@effect/platform/Etag"
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpPlatform from "@effect/platform/HttpPlatform"
import type * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import { Api } from "../api/Api.js"
import { DashboardAuth } from "../api/DashboardApi.js"
import { AdminAuth, ApiKeyAuth } from "../api/Security.js"
import { Operators } from "../services/accounts/Operators.js"
import { MockMarket } from "../services/brokers/mock/MockMarket.js"
import { Events } from "../services/events/Events.js"
import { EventStreams } from "../services/events/EventStreams.js"
import { Health } from "../services/Health.js"
import { IntentRepository } from "../services/intents/IntentRepository.js"
import { Intents } from "../services/intents/Intents.js"
import { Logins } from "../services/logins/Logins.js"
import { Webhooks } from "../services/webhooks/Webhooks.js"
import { AdminHttpLive } from "./AdminHttp.js"
import * as ApiMiddleware from "./ApiMiddleware.js"
import { AdminAuthLive, ApiKeyAuthLive } from "./Auth.js"
import { DashboardAuthLive, PublicUrl, SignupPolicy } from "./DashboardAuth.js"
import * as DashboardAssets from "./DashboardAssets.js"
import { DashboardHttpLive, DashboardLoginHttpLive } from "./DashboardHttp.js"
import * as DocsHttp from "./DocsHttp.js"
import * as Edge from "./Edge.js"
import { EventsHttpLive } from "./EventsHttp.js"
import { HealthHttpLive } from "./HealthHttp.js"
import { IntentsHttpLive } from "./IntentsHttp.js"
import * as MetricsHttp from "./MetricsHttp.js"
import * as ResponseHeaders from "./ResponseHeaders.js"
import { TestHelpersHttpLive } from "./TestHelpersHttp.js"

/**
 * `layer` built with only the services `pick` keeps of its environment. The compiler checks that
 * every service it needs is kept, but not a `Context.Reference` it reads (`PublicUrl`,
 * `SignupPolicy`): one left out is read as its default. `HttpApiBuilder` merges the context a handler group was built in
 * into every request the group serves, and every service provided to the request after that copies
 * the merged context again: a group built beside every service of the application (about 50) made
 * each request copy them all several times.
 */
const builtWithOnly = <ROut, E, R>(
  layer: Layer.Layer<ROut, E, R>,
  pick: (context: Context.Context<R>) => Context.Context<R>
): Layer.Layer<ROut, E, R> =>
  Layer.scopedContext(Effect.gen(function*() {
    // The application's memo map: the router the group adds its routes to is the one served.
    const memoMap = yield* Layer.CurrentMemoMap
    const scope = yield* Effect.scope
    return yield* Layer.buildWithMemoMap(layer, memoMap, scope).pipe(Effect.mapInputContext(pick))
  }))

const { Router } = HttpApiBuilder

/** The API definition with its handlers, each group built with the services it uses. */
export const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([
    builtWithOnly(IntentsHttpLive, Context.pick(Router, ApiKeyAuth, Intents)),
    builtWithOnly(EventsHttpLive, Context.pick(Router, ApiKeyAuth, Events, EventStreams)),
    builtWithOnly(TestHelpersHttpLive, Context.pick(Router, ApiKeyAuth, MockMarket)),
    builtWithOnly(AdminHttpLive, Context.pick(Router, AdminAuth, Operators, Webhooks, Logins, Intents)),
    builtWithOnly(DashboardLoginHttpLive, Context.pick(Router, Logins, PublicUrl, SignupPolicy)),
    builtWithOnly(
      DashboardHttpLive,
      Context.pick(Router, DashboardAuth, Logins, Operators, Webhooks, Intents, IntentRepository, Events, EventStreams, PublicUrl)
    ),
    builtWithOnly(HealthHttpLive, Context.pick(Router, Health))
  ])
)

/** What the server and its requests read from their context: the platform's services. */
type RequestServices = HttpServer.HttpServer | Scope.Scope | HttpRouter.HttpRouter.DefaultServices

/**
 * Serves the API as `HttpApiBuilder.serve` does, behind the edge middleware, with only what requests
 * read from their context: the platform's services, and the platform's body limit set to the
 * edge's (`Edge.MAX_BODY_BYTES`) once for all requests. Requests run with the context the server
 * was started in, and every service provided to a request (its route, its principal) copies that
 * context: with the whole application's services in it (about 50), those copies were a tenth of a
 * lookup's CPU. The handlers and the edge middleware keep what they took when they were built.
 * Every answer gets the request's id and the headers its handling added
 * (`ResponseHeaders.writtenOnEveryAnswer`).
 */
const serve = Layer.scopedDiscard(
  Effect.gen(function*() {
    const app = yield* HttpApiBuilder.httpApp
    const edge = yield* Edge.make
    yield* HttpServer.serveEffect(app, edge).pipe(
      ResponseHeaders.writtenOnEveryAnswer,
      Effect.mapInputContext((context: Context.Context<RequestServices>) => Context.pick(
        HttpServer.HttpServer,
        Scope.Scope,
        HttpPlatform.HttpPlatform,
        Etag.Generator,
        FileSystem.FileSystem,
        Path.Path
      )(context).pipe(Context.add(HttpIncomingMessage.MaxBodySize, Option.some(FileSystem.Size(Edge.MAX_BODY_BYTES)))))
    )
  })
).pipe(Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer]))

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

/** Where the API's OpenAPI document is served. */
const OPENAPI_PATH = "/api/v1/openapi.json"

/**
 * The HTTP service on the `HttpServer` in context: the API, its OpenAPI document at
 * `/api/v1/openapi.json`, a Swagger page at `/docs`, metrics at `/metrics`, and the edge middleware
 * around all of it.
 */
export const layer = (options: Options) =>
  serve.pipe(
    Layer.provide(DocsHttp.layer(OPENAPI_PATH)),
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: OPENAPI_PATH })),
    Layer.provide(options.dashboardAssets === undefined ? Layer.empty : DashboardAssets.layer(options.dashboardAssets)),
    Layer.provide(MetricsHttp.layer),
    Layer.provide(ApiMiddleware.layer),
    Layer.provide(ApiLive),
    Layer.provide(authentication(options)),
    Layer.provide(dashboardSettings(options)),
    HttpServer.withLogAddress
  )
