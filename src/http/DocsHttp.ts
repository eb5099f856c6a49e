import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import * as Path from "node:path"

/** Where `swagger-ui-dist` keeps the Swagger UI's built files. */
const swaggerUi = Path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"))

/** The page: the Swagger UI's own script and styles, started by `init.js` on the API's OpenAPI document (`title` escaped). */
const page = (title: string) =>
  `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>${title.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)} Documentation</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css" />
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`

/** Starts the Swagger UI on the OpenAPI document at `specPath`. */
const init = (specPath: string) =>
  `window.onload = () => {
  window.ui = SwaggerUIBundle({ url: ${JSON.stringify(specPath)}, dom_id: "#swagger-ui" })
}
`

/** The page and its start-up script, asked for again each time: they name the document's path. */
const FRESH = { "cache-control": "no-cache", "x-content-type-options": "nosniff" }

/** The Swagger UI's files change only with its package: a browser may keep them for an hour. */
const CACHED = { "cache-control": "public, max-age=3600", "x-content-type-options": "nosniff" }

/** One of the Swagger UI's files, read from disk for each request: none of it is held in memory between requests. */
const file = (name: string, contentType: string) =>
  Effect.map(
    Effect.promise(() => readFile(Path.join(swaggerUi, name))),
    (body) => HttpServerResponse.uint8Array(body, { contentType, headers: CACHED })
  )

/**
 * A Swagger page at `/docs`, titled as the API in context, for its OpenAPI document at `specPath`.
 * The Swagger UI's script (over a megabyte) is served from `swagger-ui-dist`'s files as the
 * browser asks for it, instead of being built into the page and kept in memory for the process's
 * life.
 */
export const layer = (specPath: string) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const { api } = yield* HttpApi.Api
      const title = Option.getOrElse(Context.getOption(api.annotations, OpenApi.Title), () => "API")
      const html = HttpServerResponse.html(page(title)).pipe(HttpServerResponse.setHeaders(FRESH))
      const script = HttpServerResponse.text(init(specPath), { contentType: "text/javascript; charset=utf-8", headers: FRESH })
      yield* router.get("/docs", Effect.succeed(html))
      yield* router.get("/docs/init.js", Effect.succeed(script))
      yield* router.get("/docs/swagger-ui-bundle.js", file("swagger-ui-bundle.js", "text/javascript; charset=utf-8"))
      yield* router.get("/docs/swagger-ui.css", file("swagger-ui.css", "text/css; charset=utf-8"))
    })
  )
