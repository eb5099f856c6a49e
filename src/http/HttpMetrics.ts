import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricSeries from "../MetricSeries.js"

/** The `route` label of a request no route takes. */
export const UNMATCHED = "unmatched"

/** Requests answered, by method, route template and status. */
export const requests = Metric.counter("tir_http_requests_total", {
  description: "HTTP requests answered, by method, route template and status."
})

/** Request latency, from the request reaching the edge middleware to its response, by method and route template. */
export const requestDuration = Metric.histogram(
  "tir_http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "HTTP request latency in seconds, by method and route template."
)

/**
 * The route template a request matches (`/api/v1/intents/:id`, never the raw path), or
 * `unmatched`: what the HTTP metrics are labelled with.
 */
export class RouteTemplates extends Context.Tag("RouteTemplates")<RouteTemplates, {
  /** The function that names a method and URL's route template, made once. */
  readonly matcher: Effect.Effect<(method: string, url: string) => string>
}>() {
  /**
   * The routes of the API's router (`HttpApiBuilder.Router`), read at the first request, once every
   * Layer has added its own. (The handlers run inside the router, where the outermost middleware,
   * which times and counts requests, cannot see the route they matched.)
   */
  static readonly layer = Layer.effect(
    this,
    Effect.gen(function*() {
      const router = yield* HttpApiBuilder.Router
      const matcher = yield* Effect.cached(Effect.map(router.router, (routes) =>
        makeMatcher([
          ...Chunk.map(routes.routes, (route) => ({ method: route.method, path: route.path })),
          ...Chunk.toReadonlyArray(routes.mounts).flatMap(([prefix]) => [
            { method: "*", path: prefix, template: `${prefix}/*` },
            { method: "*", path: `${prefix}/*`, template: `${prefix}/*` }
          ])
        ])))
      return { matcher }
    })
  ).pipe(Layer.provide(HttpApiBuilder.Router.Live))
}

interface Node {
  readonly statics: Map<string, Node>
  param: Node | undefined
  /** By method (`*` for any): the templates that end here, and those whose `*` takes the rest. */
  readonly ends: Map<string, string>
  readonly rest: Map<string, string>
}

const node = (): Node => ({ statics: new Map(), param: undefined, ends: new Map(), rest: new Map() })

const segmentsOf = (path: string) => path.split("/").filter((segment) => segment !== "")

/**
 * Matches a method and URL against route templates by the router's rules: static segments before
 * parameters before a trailing `*`, static segments case-insensitive, empty segments (a trailing or
 * doubled slash) ignored, `HEAD` as `GET` when no route takes `HEAD`, the query ignored.
 */
export const makeMatcher = (
  routes: Iterable<{ readonly method: string; readonly path: string; readonly template?: string }>
): (method: string, url: string) => string => {
  const root = node()
  for (const { method, path, template = path } of routes) {
    let at = root
    let rest = false
    for (const segment of segmentsOf(path)) {
      if (segment === "*") {
        rest = true
        break
      }
      if (segment.startsWith(":")) {
        at = at.param ??= node()
      } else {
        const key = segment.toLowerCase()
        const next = at.statics.get(key) ?? node()
        at.statics.set(key, next)
        at = next
      }
    }
    const table = rest ? at.rest : at.ends
    if (!table.has(method)) table.set(method, template)
  }
  const byMethod = (table: Map<string, string>, method: string) => table.get(method) ?? table.get("*")
  const find = (at: Node, segments: ReadonlyArray<string>, i: number, method: string): string | undefined => {
    if (i === segments.length) return byMethod(at.ends, method) ?? byMethod(at.rest, method)
    const next = at.statics.get(segments[i]!.toLowerCase())
    return (next === undefined ? undefined : find(next, segments, i + 1, method)) ??
      (at.param === undefined ? undefined : find(at.param, segments, i + 1, method)) ??
      byMethod(at.rest, method)
  }
  return (method, url) => {
    const query = url.indexOf("?")
    const segments = segmentsOf(query === -1 ? url : url.slice(0, query))
    return find(root, segments, 0, method) ?? (method === "HEAD" ? find(root, segments, 0, "GET") : undefined) ?? UNMATCHED
  }
}

const METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

/** Counts and times one answered request under its route template; `method` outside the usual ones as `other`. */
export const recordWith = (templates: Context.Tag.Service<RouteTemplates>) => {
  const update = (request: HttpServerRequest.HttpServerRequest, route: string, status: number, durationMillis: number) => {
    const method = request.method
    const known = METHODS.has(method) ? method : "other"
    requests.unsafeUpdate(1, MetricSeries.labels(["method", known], ["route", route], ["status", String(status)]))
    requestDuration.unsafeUpdate(durationMillis / 1000, MetricSeries.labels(["method", known], ["route", route]))
  }
  // Once made, the matcher is called directly and the update is one step of the runtime: going
  // through the cached effect (a lock and a clock read on each request) cost a lookup about 5% of
  // its CPU.
  let ready: ((method: string, url: string) => string) | undefined
  return (request: HttpServerRequest.HttpServerRequest, status: number, durationMillis: number): Effect.Effect<void> => {
    const match = ready
    return match !== undefined
      ? Effect.sync(() => update(request, match(request.method, request.url), status, durationMillis))
      : Effect.map(templates.matcher, (made) => {
        ready = made
        update(request, made(request.method, request.url), status, durationMillis)
      })
  }
}
