import { describe, expect, layer } from "@effect/vitest"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Http from "node:http"
import { admin, marketOrder, operator, signUp } from "../support/Scenario.js"
import { ADMIN_TOKEN, bodyOf, keysOf, type Reply, send, WithId } from "../support/TestServer.js"
import { servers } from "./Backends.js"

const expectError = (reply: Reply, status: number, error_code: string, detail: string) => {
  expect({ status: reply.status, body: reply.body }).toEqual({
    status,
    body: { detail, error_code, request_id: reply.headers["x-request-id"] }
  })
}

const adminHeaders = { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" }

/** A raw chunked POST (no Content-Length) to the listening test server: status and body. */
const postChunked = (path: string, headers: Record<string, string>, chunks: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return yield* Effect.async<{ status: number; body: unknown }, Error>((resume) => {
      const request = Http.request(
        { host: "127.0.0.1", port, path, method: "POST", headers: { ...headers, "transfer-encoding": "chunked" } },
        (response) => {
          let text = ""
          response.setEncoding("utf8")
          response.on("data", (chunk: string) => (text += chunk))
          response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body: JSON.parse(text) })))
          response.on("error", (error) => resume(Effect.fail(error)))
        }
      )
      request.on("error", (error) => resume(Effect.fail(error)))
      for (const chunk of chunks) request.write(chunk)
      request.end()
    })
  })

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`hardening on ${name}`, (it) => {
    describe("item 13", () => {
      it.effect("item 13: a NUL byte in a path id is a 404 with the error body", () =>
        Effect.gen(function*() {
          const { testKey } = yield* signUp()
          const publicPaths: ReadonlyArray<readonly ["GET" | "POST" | "DELETE", string]> = [
            ["GET", "/api/v1/intents/ab%00c"],
            ["GET", "/api/v1/intents/by-external-id/ab%00c"],
            ["POST", "/api/v1/intents/ab%00c/cancel"]
          ]
          for (const [method, path] of publicPaths) {
            expectError(yield* send(method, path, { key: testKey }), 404, "not_found", "Not found")
          }
          const adminPaths: ReadonlyArray<readonly ["GET" | "POST" | "DELETE", string, unknown?]> = [
            ["GET", "/users/a%00b"],
            ["POST", "/users/a%00b/api-keys", { name: "x", mode: "test" }],
            ["GET", "/users/a%00b/api-keys"],
            ["POST", "/users/a%00b/brokers", { name: "x", kind: "mock", mode: "test" }],
            ["POST", "/users/a%00b/webhook-endpoints", { url: "http://example.com/", mode: "test" }],
            ["GET", "/users/a%00b/webhook-endpoints"],
            ["DELETE", "/api-keys/a%00b"],
            ["DELETE", "/webhook-endpoints/a%00b"],
            ["GET", "/webhook-endpoints/a%00b/deliveries"],
            ["POST", "/deliveries/a%00b/resend"]
          ]
          for (const [method, path, json] of adminPaths) {
            expectError(yield* admin(method, path, json), 404, "not_found", "Not found")
          }
        }))

      it.effect("item 13: a NUL byte in a query parameter is a 400 naming the parameter", () =>
        Effect.gen(function*() {
          const { testKey, userId } = yield* signUp()
          for (const field of ["symbol", "broker_id"]) {
            expectError(
              yield* send("GET", `/api/v1/intents?${field}=a%00b`, { key: testKey }),
              400,
              "validation_error",
              `${field} must not contain a NUL character`
            )
          }
          const endpoint = yield* admin("POST", `/users/${userId}/webhook-endpoints`, { url: "http://example.com/", mode: "test" })
          const endpointId = bodyOf(WithId, endpoint).id
          const limit = yield* admin("GET", `/webhook-endpoints/${endpointId}/deliveries?limit=1%00`)
          expectError(limit, 400, "validation_error", "limit must be an integer from 1 to 1000")
        }))

      it.effect("item 13: a NUL byte in a body string is a 400 naming the field, and creates nothing", () =>
        Effect.gen(function*() {
          const { mockId, testKey, userId } = yield* signUp()
          const cases: ReadonlyArray<readonly [Reply, string]> = [
            [yield* admin("POST", "/users", { name: "a\u0000b", tier: "free" }), "name"],
            [yield* admin("POST", `/users/${userId}/api-keys`, { name: "a\u0000", mode: "test" }), "name"],
            [yield* admin("POST", `/users/${userId}/brokers`, { name: "a\u0000", kind: "mock", mode: "test" }), "name"],
            [
              yield* admin("POST", `/users/${userId}/brokers`, {
                name: "a",
                kind: "alpaca",
                mode: "live",
                credentials: { api_key_id: "AK\u0000", api_secret_key: "s" }
              }),
              "credentials.api_key_id"
            ],
            [yield* admin("POST", `/users/${userId}/webhook-endpoints`, { url: "http://a.com/\u0000", mode: "test" }), "url"],
            [yield* send("POST", "/api/v1/intents", { key: testKey, json: marketOrder(mockId, { broker_id: "b\u0000" }) }), "broker_id"],
            [yield* send("POST", "/api/v1/intents", { key: testKey, json: marketOrder(mockId, { intent_id: "x\u0000" }) }), "intent_id"],
            [yield* send("POST", "/api/v1/intents", { key: testKey, json: marketOrder(mockId, { symbol: "A\u0000" }) }), "symbol"]
          ]
          for (const [reply, field] of cases) {
            expectError(reply, 400, "validation_error", `${field} must not contain a NUL character`)
          }
          const { admin: operatorApi } = yield* operator
          expect((yield* operatorApi.listApiKeys({ path: { user_id: userId } })).items).toHaveLength(2)
          expect((yield* operatorApi.listWebhookEndpoints({ path: { user_id: userId } })).items).toHaveLength(0)
          expect((yield* send("GET", "/api/v1/intents", { key: testKey })).body).toMatchObject({ total_items: 0 })
        }))

      it.effect("item 13: an integer beyond its int4 column is a 400 naming the field, not a 500", () =>
        Effect.gen(function*() {
          const { testKey } = yield* signUp()
          for (const field of ["requests_per_minute", "intents_per_month"]) {
            expectError(
              yield* admin("POST", "/users", { name: "Big", tier: "enterprise", [field]: 3_000_000_000 }),
              400,
              "validation_error",
              `${field} must be an integer from 1 to 2147483647`
            )
          }
          const largest = yield* admin("POST", "/users", {
            name: "Big",
            tier: "enterprise",
            requests_per_minute: 2_147_483_647,
            intents_per_month: 2_147_483_647
          })
          expect(largest.status).toBe(201)
          for (const page of ["3000000000", "1e300"]) {
            expectError(
              yield* send("GET", `/api/v1/intents?page=${page}`, { key: testKey }),
              400,
              "validation_error",
              "page must be at most 2147483647"
            )
          }
        }))
    })

    describe("item 14", () => {
      it.effect("item 14: a chunked body over 64 KiB is a 413 with the error body, not a connection reset", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const headers = { authorization: `Bearer ${testKey}`, "content-type": "application/json" }
          const big = JSON.stringify(marketOrder(mockId, { symbol: "AAPL", padding: "x".repeat(100 * 1024) }))
          const chunks = big.match(/[\s\S]{1,8192}/g) ?? []
          const refused = yield* postChunked("/api/v1/intents", headers, chunks)
          expect(refused.status).toBe(413)
          expect(refused.body).toMatchObject({ error_code: "payload_too_large", detail: "Request body too large" })
          expect(keysOf(refused)).toEqual(["detail", "error_code", "request_id"])
          const adminRefused = yield* postChunked("/admin/v1/users", adminHeaders, [big])
          expect(adminRefused.status).toBe(413)
          // A chunked body within the limit is read as usual.
          const small = JSON.stringify(marketOrder(mockId))
          const created = yield* postChunked("/api/v1/intents", headers, [small.slice(0, 10), small.slice(10)])
          expect(created.status).toBe(201)
          expect((yield* send("GET", "/api/v1/intents", { key: testKey })).body).toMatchObject({ total_items: 1 })
        }))
    })

    describe("item 15", () => {
      const raw = (broker: string, fields: string) =>
        `{"intent_id":"ext-${Math.random().toString(36).slice(2)}","symbol":"AAPL","side":"buy","order_type":"market",` +
        `"broker_id":"${broker}",${fields}}`

      it.effect("item 15: a number a double cannot hold exactly is a 400 naming the field, never rounded", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const post = (body: string) => send("POST", "/api/v1/intents", { key: testKey, body })
          expectError(
            yield* post(raw(mockId, `"quantity":123456789.123456789`)),
            400,
            "validation_error",
            "quantity cannot be represented exactly: send at most 15 significant digits"
          )
          expectError(
            yield* post(raw(mockId, `"quantity":1,"order_type":"limit","limit_price":100.00000000000000001`).replace(`"order_type":"market",`, "")),
            400,
            "validation_error",
            "limit_price cannot be represented exactly: send at most 15 significant digits"
          )
          expectError(yield* post(raw(mockId, `"quantity":1e400`)), 400, "validation_error", "quantity is too large")
          expect((yield* send("GET", "/api/v1/intents", { key: testKey })).body).toMatchObject({ total_items: 0 })
          // Digits that a double holds exactly are kept as sent, however they are written.
          const exact = yield* post(raw(mockId, `"quantity":123456.123456789`))
          expect(exact.status).toBe(201)
          expect(exact.text).toMatch(/"quantity"\s*:\s*123456\.123456789\s*,/)
          const padded = yield* post(raw(mockId, `"quantity":10.5000000000000000000`))
          expect(padded.status).toBe(201)
          expect(padded.body).toMatchObject({ quantity: 10.5 })
          // The 422 on decimal places stays, counted on the digits sent.
          expectError(
            yield* post(raw(mockId, `"quantity":0.0000000001`)),
            422,
            "unprocessable_entity",
            "quantity must have at most 9 decimal places"
          )
        }))

      it.effect("item 15: an object that names a key twice is a 400, at any depth", () =>
        Effect.gen(function*() {
          const { mockId, testKey, userId } = yield* signUp()
          expectError(
            yield* send("POST", "/api/v1/intents", { key: testKey, body: raw(mockId, `"quantity":1,"side":"sell"`) }),
            400,
            "validation_error",
            "side is given more than once"
          )
          expect((yield* send("GET", "/api/v1/intents", { key: testKey })).body).toMatchObject({ total_items: 0 })
          const nested = yield* send("POST", `/admin/v1/users/${userId}/brokers`, {
            headers: adminHeaders,
            body: `{"name":"A","kind":"alpaca","mode":"live","credentials":{"api_key_id":"a","api_key_id":"b","api_secret_key":"s"}}`
          })
          expectError(nested, 400, "validation_error", "credentials.api_key_id is given more than once")
        }))
    })
  })
}
