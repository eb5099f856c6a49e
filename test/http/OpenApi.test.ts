import { expect, layer } from "@effect/vitest"
import { createConfig, lintFromString } from "@redocly/openapi-core"
import * as Effect from "effect/Effect"
import * as TestServer from "../support/TestServer.js"
import { send } from "../support/TestServer.js"

type Json = Record<string, any>

const METHODS = ["get", "put", "post", "delete", "patch"]

const operations = (paths: Json) =>
  Object.entries<Json>(paths).flatMap(([path, item]) =>
    Object.entries<Json>(item).filter(([method]) => METHODS.includes(method)).map(([method, op]) => ({ path, method, op }))
  )

layer(TestServer.layerInMemory, { timeout: 30_000, excludeTestServices: true })("the OpenAPI document", (it) => {
  it.effect("is OpenAPI 3.1, complete, and lints without errors", () =>
    Effect.gen(function*() {
      const reply = yield* send("GET", "/api/v1/openapi.json")
      expect(reply.status).toBe(200)
      const spec = reply.body as Json
      expect(spec["openapi"]).toMatch(/^3\.1\.\d+$/)
      expect(spec["servers"]).toEqual([expect.objectContaining({ url: "/" })])

      const problems = yield* Effect.promise(async () =>
        lintFromString({
          source: reply.text,
          absoluteRef: "openapi.json",
          config: await createConfig({ extends: ["recommended"] })
        })
      )
      const errors = problems
        .filter((problem) => problem.severity === "error")
        .map((problem) => `${problem.ruleId}: ${problem.message} at ${problem.location[0]?.pointer ?? "?"}`)
      expect(errors, errors.join("\n")).toEqual([])

      const missing = operations(spec["paths"])
        .filter(({ op }) => !op["summary"] || !op["description"])
        .map(({ method, path }) => `${method} ${path}`)
      expect(missing).toEqual([])
      for (const { op } of operations(spec["paths"])) {
        for (const [status, response] of Object.entries<Json>(op["responses"])) {
          expect(response["headers"], status).toHaveProperty("X-Request-Id")
          expect(Object.keys(spec["components"]["schemas"]), `${status} described by a schema name`)
            .not.toContain(response["description"])
        }
      }

      const create = spec["paths"]["/api/v1/intents"]["post"]
      for (const name of ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Request-Id"]) {
        expect(create.responses["201"].headers).toHaveProperty(name)
      }
      expect(create.responses["201"].description).toBe("The Trade Intent, created: `pending`, no orders yet")
      expect(create.responses["429"].headers).toHaveProperty("Retry-After")
      expect(create.responses["503"].headers).toHaveProperty("Retry-After")
      expect(create.responses["409"].headers).toHaveProperty("Location")
      expect(JSON.stringify(create.responses["413"])).toContain("Error_payload_too_large")
      expect(JSON.stringify(create.responses["415"])).toContain("Error_unsupported_media_type")
      expect(create.requestBody.content["application/json"].example).toHaveProperty("intent_id")
      expect(create.responses["201"].content["application/json"].example).toHaveProperty("status", "pending")
      for (const [path, method] of [
        ["/api/v1/intents", "get"],
        ["/api/v1/intents/{id}", "get"],
        ["/api/v1/intents/{id}/cancel", "post"],
        ["/api/v1/events", "get"]
      ] as const) {
        expect(spec["paths"][path][method].responses["200"].content["application/json"], `${method} ${path}`)
          .toHaveProperty("example")
      }
      expect(spec["paths"]["/livez"]["get"].responses).not.toHaveProperty("503")

      const webhooks = spec["webhooks"] as Json
      expect(Object.keys(webhooks).sort()).toEqual([
        "intent.canceled",
        "intent.created",
        "intent.failed",
        "intent.filled",
        "intent.partially_filled",
        "intent.rejected",
        "webhook.test"
      ])
      for (const [type, item] of Object.entries<Json>(webhooks)) {
        const names = (item["post"].parameters as Array<Json>).filter((p) => p["in"] === "header").map((p) => p["name"])
        expect(names, type).toEqual(expect.arrayContaining(["sr-signature", "sr-timestamp", "sr-event-id"]))
        expect(JSON.stringify(item["post"].requestBody), type).toMatch(/WebhookEvent|WebhookTestEvent/)
      }
      expect(spec["components"]["schemas"]["WebhookEvent"].required).toEqual(["id", "type", "created_at", "data"])
    }))
})
