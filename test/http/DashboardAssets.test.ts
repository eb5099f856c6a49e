import { afterAll, describe, expect, layer } from "@effect/vitest"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import { tmpdir } from "node:os"
import * as Path from "node:path"
import * as DashboardAssets from "../../src/http/DashboardAssets.js"

// A built dashboard in miniature, and a secret beside it that no request may reach.
const root = mkdtempSync(Path.join(tmpdir(), "dashboard-assets-"))
const assetsDir = Path.join(root, "dashboard")
mkdirSync(assetsDir)
const INDEX = "<!doctype html><title>Dashboard</title><div id=\"app\"></div>"
writeFileSync(Path.join(assetsDir, "index.html"), INDEX)
writeFileSync(Path.join(assetsDir, "main-3FQ2ZK7A.js"), "console.log(1)")
writeFileSync(Path.join(assetsDir, "styles-QX7Z2K4B.css"), "body{}")
writeFileSync(Path.join(assetsDir, "icon-AB12CD34.svg"), "<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
writeFileSync(Path.join(assetsDir, "robots.txt"), "User-agent: *")
writeFileSync(Path.join(root, "secret.txt"), "TOP-SECRET")
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** An API with one route under /dashboard/api/, to show that API routes win over the app's pages. */
class PingGroup extends HttpApiGroup.make("ping").add(
  HttpApiEndpoint.get("ping", "/dashboard/api/v1/ping").addSuccess(Schema.String)
) {}
class PingApi extends HttpApi.make("ping").add(PingGroup) {}

const PingLive = HttpApiBuilder.group(PingApi, "ping", (handlers) => handlers.handle("ping", () => Effect.succeed("pong")))

const TestServer = HttpApiBuilder.serve().pipe(
  Layer.provide(DashboardAssets.layer(assetsDir)),
  Layer.provide(HttpApiBuilder.api(PingApi).pipe(Layer.provide(PingLive))),
  Layer.provideMerge(NodeHttpServer.layerTest)
)

interface Raw {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/** A GET with the path sent exactly as written (no URL normalisation of `..` or `%2e`). */
const get = (path: string) =>
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return yield* Effect.async<Raw, Error>((resume) => {
      const request = Http.get({ host: "127.0.0.1", port, path }, (response) => {
        let body = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => (body += chunk))
        response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, headers: response.headers, body })))
        response.on("error", (error) => resume(Effect.fail(error)))
      })
      request.on("error", (error) => resume(Effect.fail(error)))
    })
  })

const expectSecurityHeaders = (reply: Raw) => {
  expect(reply.headers["content-security-policy"]).toBe(
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
      "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
  )
  expect(reply.headers["x-content-type-options"]).toBe("nosniff")
  expect(reply.headers["referrer-policy"]).toBe("same-origin")
  expect(reply.headers["x-frame-options"]).toBe("DENY")
}

const expectIndex = (reply: Raw) => {
  expect(reply.status).toBe(200)
  expect(reply.headers["content-type"]).toBe("text/html; charset=utf-8")
  expect(reply.headers["cache-control"]).toBe("no-cache")
  expect(reply.body).toBe(INDEX)
  expectSecurityHeaders(reply)
}

layer(TestServer, { excludeTestServices: true })("dashboard assets", (it) => {
  describe("pages", () => {
    it.effect("/dashboard redirects to /dashboard/, keeping the query", () =>
      Effect.gen(function*() {
        const plain = yield* get("/dashboard")
        expect(plain.status).toBe(302)
        expect(plain.headers.location).toBe("/dashboard/")
        expectSecurityHeaders(plain)
        expect((yield* get("/dashboard?mode=live")).headers.location).toBe("/dashboard/?mode=live")
      }))

    it.effect("/dashboard/ is index.html, revalidated on every load", () =>
      Effect.gen(function*() {
        expectIndex(yield* get("/dashboard/"))
        expectIndex(yield* get("/dashboard/index.html"))
      }))

    it.effect("any other page path is index.html: the app routes in the browser", () =>
      Effect.gen(function*() {
        expectIndex(yield* get("/dashboard/intents/6f1c2d3e-0000-4000-8000-000000000001"))
        expectIndex(yield* get("/dashboard/intents?status=filled&page=2"))
        expectIndex(yield* get("/dashboard/api-keys"))
        expectIndex(yield* get("/dashboard/webhooks/whatever/deep"))
      }))
  })

  describe("assets", () => {
    it.effect("content-hashed files are cacheable for a year, with their content type", () =>
      Effect.gen(function*() {
        const script = yield* get("/dashboard/main-3FQ2ZK7A.js")
        expect(script.status).toBe(200)
        expect(script.body).toBe("console.log(1)")
        expect(script.headers["content-type"]).toBe("text/javascript; charset=utf-8")
        expect(script.headers["cache-control"]).toBe("public, max-age=31536000, immutable")
        expectSecurityHeaders(script)
        const styles = yield* get("/dashboard/styles-QX7Z2K4B.css")
        expect(styles.headers["content-type"]).toBe("text/css; charset=utf-8")
        expect(styles.headers["cache-control"]).toBe("public, max-age=31536000, immutable")
        const icon = yield* get("/dashboard/icon-AB12CD34.svg")
        expect(icon.headers["content-type"]).toBe("image/svg+xml")
      }))

    it.effect("files without a hash are revalidated", () =>
      Effect.gen(function*() {
        const robots = yield* get("/dashboard/robots.txt")
        expect(robots.status).toBe(200)
        expect(robots.headers["content-type"]).toBe("text/plain; charset=utf-8")
        expect(robots.headers["cache-control"]).toBe("no-cache")
      }))

    it.effect("a missing file is a 404, never the app's page", () =>
      Effect.gen(function*() {
        const stale = yield* get("/dashboard/main-ZZZZZZZZ.js")
        expect(stale.status).toBe(404)
        expect(stale.body).not.toContain("<!doctype html>")
        expectSecurityHeaders(stale)
      }))
  })

  describe("boundaries", () => {
    it.effect("paths that climb out of the assets folder are refused", () =>
      Effect.gen(function*() {
        for (
          const path of [
            "/dashboard/../secret.txt",
            "/dashboard/%2e%2e/secret.txt",
            "/dashboard/..%2fsecret.txt",
            "/dashboard/%2E%2E%2Fsecret.txt",
            "/dashboard/intents/../../secret.txt",
            "/dashboard/..%5csecret.txt",
            "/dashboard/./index.html",
            "/dashboard/%00index.html"
          ]
        ) {
          const reply = yield* get(path)
          expect(reply.status, path).toBe(404)
          expect(reply.body, path).not.toContain("TOP-SECRET")
          expect(reply.body, path).not.toContain("<!doctype html>")
        }
      }))

    it.effect("API routes win over the app's pages; unknown API paths are not answered with the app", () =>
      Effect.gen(function*() {
        const ping = yield* get("/dashboard/api/v1/ping")
        expect(ping.status).toBe(200)
        expect(JSON.parse(ping.body)).toBe("pong")
        for (const path of ["/dashboard/api/v1/nothing-here", "/dashboard/api/v1/", "/dashboard/api", "/dashboard/api/"]) {
          const reply = yield* get(path)
          expect(reply.status, path).toBe(404)
          expect(reply.headers["content-type"] ?? "", path).not.toMatch(/^text\/html/)
        }
      }))
  })
})
