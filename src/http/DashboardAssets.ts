import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { RouteNotFound } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { readdirSync, readFileSync } from "node:fs"
import * as Path from "node:path"
import * as ResponseHeaders from "./ResponseHeaders.js"

/** The dashboard runs only its own code, styles and images, and talks only to this origin. */
export const CONTENT_SECURITY_POLICY = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

/** The headers of every response under `/dashboard`, errors included. */
export const securityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY"
}

const contentTypes: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".webp": "image/webp",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2"
}

/** A content-hashed name as the dashboard build writes it (`main-3FQ2ZK7A.js`): its content never changes. */
const HASHED = /-[A-Z0-9]{8}\.[a-z0-9]+(?:\.map)?$/

const IMMUTABLE = "public, max-age=31536000, immutable"

interface Asset {
  readonly body: Uint8Array
  readonly contentType: string
  readonly cacheControl: string
}

/**
 * Every file of the built dashboard, by its path relative to `dir` (with `/`), read once: requests
 * are answered from this map only, so no request path ever reaches the file system.
 */
const readAssets = (dir: string): Map<string, Asset> => {
  const assets = new Map<string, Asset>()
  const walk = (relative: string) => {
    for (const entry of readdirSync(Path.join(dir, relative), { withFileTypes: true })) {
      const name = relative === "" ? entry.name : `${relative}/${entry.name}`
      if (entry.isDirectory()) walk(name)
      else if (entry.isFile()) {
        assets.set(name, {
          body: readFileSync(Path.join(dir, name)),
          contentType: contentTypes[Path.extname(name).toLowerCase()] ?? "application/octet-stream",
          cacheControl: HASHED.test(entry.name) ? IMMUTABLE : "no-cache"
        })
      }
    }
  }
  walk("")
  return assets
}

const respond = (asset: Asset) =>
  HttpServerResponse.uint8Array(asset.body, {
    contentType: asset.contentType,
    headers: { "cache-control": asset.cacheControl }
  })

/** A name with a static file's extension: a missing one is a 404, never the app's page. */
const looksLikeFile = (path: string) => Object.hasOwn(contentTypes, Path.extname(path).toLowerCase())

/**
 * Serves the built dashboard (`scripts/build-dashboard.ts`) from `assetsDir`: `/dashboard` redirects
 * to `/dashboard/`, its files are served (content-hashed ones cacheable forever, index.html
 * revalidated), and any other page path gets index.html, the app routing in the browser. Paths
 * under `/dashboard/api/` that no API route took are left to the JSON 404, as are paths that
 * climb out (`..`) and missing files. The files are read once, when the Layer is built: a new
 * build is served after a restart, and a page never mixes two builds.
 */
export const layer = (assetsDir: string) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const assets = yield* Effect.try(() => readAssets(Path.resolve(assetsDir))).pipe(
        Effect.tapError(() => Effect.logWarning("the dashboard is not built: /dashboard answers 404").pipe(
          Effect.annotateLogs({ assetsDir })
        )),
        Effect.orElseSucceed(() => new Map<string, Asset>())
      )
      const withSecurityHeaders = ResponseHeaders.add(securityHeaders)

      // One handler for both routes: the router takes `/dashboard/` for `/dashboard` too.
      const serve = Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        yield* withSecurityHeaders
        const notFound = new RouteNotFound({ request })
        const [pathname = "", ...query] = request.url.split("?")
        if (pathname === "/dashboard") {
          return HttpServerResponse.redirect(`/dashboard/${query.length === 0 ? "" : `?${query.join("?")}`}`, { status: 302 })
        }
        const rest = pathname.slice("/dashboard/".length)
        if (rest === "api" || rest.startsWith("api/")) return yield* notFound
        const path = yield* Effect.try(() => decodeURIComponent(rest)).pipe(Effect.orElse(() => notFound))
        const segments = path.split("/")
        if (segments.includes("..") || segments.includes(".") || /[\\\0]/.test(path)) return yield* notFound
        const asset = assets.get(path === "" ? "index.html" : path)
        if (asset !== undefined) return respond(asset)
        const index = assets.get("index.html")
        if (index === undefined || looksLikeFile(path)) return yield* notFound
        return respond(index)
      })
      yield* router.get("/dashboard", serve)
      yield* router.get("/dashboard/*", serve)
    })
  )
