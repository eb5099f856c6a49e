import { describe, expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { IntentId } from "../../src/domain/Ids.js"
import { TradeIntent } from "../../src/domain/Intent.js"
import { awayFromMinuteEdge } from "../support/RateWindow.js"
import { admin, marketOrder, signUp } from "../support/Scenario.js"
import { bodyOf, ErrorBody, keysOf, type Reply, RetryBody, send, WithId } from "../support/TestServer.js"
import { waitFor } from "../support/Waiting.js"
import { servers } from "./Backends.js"

/** The exact error body of the error table, with `request_id` equal to the `X-Request-Id` header. */
const expectError = (reply: Reply, status: number, error_code: string, detail: string | RegExp) => {
  expect(reply.status).toBe(status)
  expect(keysOf(reply)).toEqual(
    status === 429 ? ["detail", "error_code", "request_id", "retry_after"] : ["detail", "error_code", "request_id"]
  )
  expect(reply.body).toMatchObject({ error_code, request_id: reply.headers["x-request-id"] })
  const actual = bodyOf(ErrorBody, reply).detail
  if (typeof detail === "string") expect(actual).toBe(detail)
  else expect(actual).toMatch(detail)
  expect(reply.headers["x-request-id"]).toMatch(/^req_[0-9a-f]{32}$/)
}

const post = (key: string, json: unknown) => send("POST", "/api/v1/intents", { key, json })

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`v1 intents over HTTP on ${name}`, (it) => {
    describe("POST /api/v1/intents", () => {
      it.effect("201: the full Trade Intent, pending, with no orders", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const body = marketOrder(mockId, { intent_id: "first-order" })
          const reply = yield* post(testKey, body)
          expect(reply.status).toBe(201)
          expect(reply.body).toEqual({
            id: expect.stringMatching(/^[0-9a-f-]{36}$/),
            intent_id: "first-order",
            symbol: "AAPL",
            side: "buy",
            quantity: 10,
            order_type: "market",
            limit_price: null,
            stop_price: null,
            time_in_force: "day",
            extended_hours: false,
            status: "pending",
            status_reason: null,
            broker_id: mockId,
            orders: [],
            created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/),
            updated_at: expect.stringMatching(/Z$/)
          })
          expect(reply.headers["content-type"]).toBe("application/json")
          expect(reply.headers["x-request-id"]).toMatch(/^req_/)
          expect(reply.headers["x-ratelimit-limit"]).toBe("60")
          expect(reply.headers["x-ratelimit-remaining"]).toBe("59")
          expect(Number(reply.headers["x-ratelimit-reset"])).toBeGreaterThan(Date.now() / 1000 - 1)
        }))

      it.effect("ids: the intent's and its order's are version 7 UUIDs, its events' evt_ ids; each led by the millisecond it was made in", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const before = Date.now()
          const created = bodyOf(WithId, yield* post(testKey, marketOrder(mockId, { intent_id: "ids:1" })))
          const intent = yield* waitFor(testKey, IntentId.make(created.id), ({ status }) => status === "filled")
          // The feed shows an event once every transaction older than it has ended, on the whole
          // server: other test files' transactions may hold it back a moment.
          const events = yield* send("GET", `/api/v1/events?intent_id=${created.id}`, { key: testKey }).pipe(
            Effect.map((reply) => bodyOf(Schema.Struct({ items: Schema.Array(WithId) }), reply).items),
            Effect.repeat(Schedule.spaced("50 millis").pipe(
              Schedule.upTo("10 seconds"),
              Schedule.whileInput((items: ReadonlyArray<typeof WithId.Type>) => items.length < 2),
              Schedule.passthrough
            ))
          )
          const after = Date.now()
          const madeAt = (hex: string) => parseInt(hex.replaceAll("-", "").slice(0, 12), 16)
          const v7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
          const uuids = [intent.id, ...intent.orders.map((order) => order.id)]
          expect(uuids).toHaveLength(2)
          for (const id of uuids) expect(id).toMatch(v7)
          expect(events).toHaveLength(2)
          for (const { id } of events) expect(id).toMatch(/^evt_[0-9a-f]{32}$/)
          for (const made of [...uuids.map(madeAt), ...events.map(({ id }) => madeAt(id.slice(4)))]) {
            expect(made).toBeGreaterThanOrEqual(before)
            expect(made).toBeLessThanOrEqual(after)
          }
        }))

      it.effect("201: limit, stop and stop_limit orders keep their prices and options", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const reply = yield* post(testKey, marketOrder(mockId, {
            order_type: "stop_limit",
            limit_price: 101.25,
            stop_price: 100.5,
            time_in_force: "gtc",
            extended_hours: true,
            quantity: 0.5,
            side: "sell",
            symbol: "brk.b"
          }))
          expect(reply.status).toBe(201)
          expect(reply.body).toMatchObject({
            order_type: "stop_limit",
            limit_price: 101.25,
            stop_price: 100.5,
            time_in_force: "gtc",
            extended_hours: true,
            quantity: 0.5,
            side: "sell",
            symbol: "BRK.B"
          })
        }))

      it.effect("400: malformed JSON, a body that is no object, missing fields, wrong types and enums", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const valid = marketOrder(mockId)
          const { symbol: _, ...noSymbol } = valid
          const cases: ReadonlyArray<readonly [Reply, string]> = [
            [yield* send("POST", "/api/v1/intents", { key: testKey, body: "{\"intent_id\": " }), "Request body must be valid JSON"],
            [yield* send("POST", "/api/v1/intents", { key: testKey, body: "" }), "Request body must be a JSON object"],
            [yield* post(testKey, [valid]), "Request body must be a JSON object"],
            [yield* post(testKey, "text"), "Request body must be a JSON object"],
            [yield* post(testKey, noSymbol), "symbol is required"],
            [yield* post(testKey, { ...valid, side: "hold" }), "side must be one of: buy, sell"],
            [yield* post(testKey, { ...valid, order_type: "twap" }), "order_type must be one of: market, limit, stop, stop_limit"],
            [yield* post(testKey, { ...valid, time_in_force: "opg" }), "time_in_force must be one of: day, gtc, ioc, fok"],
            [yield* post(testKey, { ...valid, quantity: "10" }), "quantity must be a number"],
            [yield* post(testKey, { ...valid, limit_price: "1" }), "limit_price must be a number"],
            [yield* post(testKey, { ...valid, extended_hours: "yes" }), "extended_hours must be a boolean"],
            [yield* post(testKey, { ...valid, intent_id: "has space" }), "intent_id must be 1 to 128 characters of A-Z a-z 0-9 _ . : -"],
            [yield* post(testKey, { ...valid, intent_id: "x".repeat(129) }), "intent_id must be 1 to 128 characters of A-Z a-z 0-9 _ . : -"],
            [yield* post(testKey, { ...valid, symbol: "AAPL US" }), "symbol must be 1 to 32 characters of A-Z a-z 0-9 . - /"],
            [yield* post(testKey, { ...valid, broker_id: "" }), "broker_id must be a string of 1 to 128 characters"],
            [yield* post(testKey, { ...valid, colour: "red" }), "colour is not a known field"]
          ]
          for (const [reply, detail] of cases) expectError(reply, 400, "validation_error", detail)
          const list = yield* send("GET", "/api/v1/intents", { key: testKey })
          expect(list.body).toMatchObject({ total_items: 0 })
        }))

      it.effect("401: missing, non-Bearer, malformed, unknown, revoked and expired keys", () =>
        Effect.gen(function*() {
          const { key, mockId, testKey } = yield* signUp()
          const body = marketOrder(mockId)
          const revoked = yield* key("test")
          expect((yield* admin("DELETE", `/api-keys/${revoked.id}`)).status).toBe(204)
          const expiring = yield* key("test", { expires_at: DateTime.unsafeMake(Date.now() + 1500) })
          yield* Effect.sleep("1600 millis")
          const replies = [
            yield* send("POST", "/api/v1/intents", { json: body }),
            yield* send("POST", "/api/v1/intents", { json: body, headers: { authorization: `Basic ${testKey}` } }),
            yield* send("POST", "/api/v1/intents", { json: body, headers: { authorization: testKey } }),
            yield* post("sk_test_short", body),
            yield* post(`sk_prod_${"a".repeat(32)}`, body),
            yield* post(`sk_test_${"a".repeat(32)}`, body),
            yield* post(revoked.key, body),
            yield* post(expiring.key, body),
            yield* send("GET", "/api/v1/intents", {})
          ]
          for (const reply of replies) expectError(reply, 401, "unauthorized", "Invalid API key")
        }))

      it.effect("403: a key without the scope, and keys of one mode with a connection of the other", () =>
        Effect.gen(function*() {
          const { alpacaId, key, liveKey, mockId, testKey } = yield* signUp()
          const readOnly = yield* key("test", { scopes: ["intents:read"] })
          const writeOnly = yield* key("test", { scopes: ["intents:write"] })
          const detail = "This API key does not have permission for this resource"
          expectError(yield* post(readOnly.key, marketOrder(mockId)), 403, "forbidden", detail)
          expectError(yield* send("GET", "/api/v1/intents", { key: writeOnly.key }), 403, "forbidden", detail)
          expectError(yield* post(testKey, marketOrder(alpacaId)), 403, "forbidden", detail)
          expectError(yield* post(liveKey, marketOrder(mockId)), 403, "forbidden", detail)
          expect((yield* send("GET", "/api/v1/intents", { key: readOnly.key })).status).toBe(200)
        }))

      it.effect("404: a broker_id that is no connection of this user", () =>
        Effect.gen(function*() {
          const ada = yield* signUp()
          const bob = yield* signUp()
          for (const brokerId of [bob.mockId, "00000000-0000-0000-0000-000000000000", "my-broker"]) {
            expectError(yield* post(ada.testKey, marketOrder(brokerId)), 404, "broker_not_found", "Broker connection not found")
          }
        }))

      it.effect("409: a second intent with the same intent_id, pointing at the first", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          // Both requests in one minute's count, whose remainder the second answer shows.
          yield* Effect.promise(awayFromMinuteEdge)
          const body = marketOrder(mockId, { intent_id: "once" })
          const first = yield* post(testKey, body)
          const again = yield* post(testKey, { ...body, quantity: 99 })
          expectError(again, 409, "duplicate_intent_id", "Trade Intent with this intent_id already exists")
          const id = bodyOf(WithId, first).id
          expect(again.headers["location"]).toBe(`/api/v1/intents/${id}`)
          // The key's limit reaches an error answer too, beside the handler's Location header.
          expect(again.headers["x-ratelimit-limit"]).toBe("60")
          expect(again.headers["x-ratelimit-remaining"]).toBe("58")
          const located = yield* send("GET", again.headers["location"]!, { key: testKey })
          expect(located.body).toMatchObject({ id, quantity: 10 })
        }))

      it.effect("409: twenty simultaneous POSTs with one intent_id give one 201 and nineteen 409s", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp({ requests_per_minute: 1000 })
          const body = marketOrder(mockId, { intent_id: "race-1" })
          const replies = yield* Effect.all(Array.from({ length: 20 }, () => post(testKey, body)), {
            concurrency: "unbounded"
          })
          expect(replies.map((r) => r.status).sort()).toEqual([201, ...Array(19).fill(409)])
          // Creations that arrive together share a batch: each 409 still points at the one intent.
          const [created] = replies.filter((r) => r.status === 201)
          const id = bodyOf(WithId, created).id
          for (const reply of replies.filter((r) => r.status === 409)) {
            expect(reply.headers["location"]).toBe(`/api/v1/intents/${id}`)
          }
          const list = yield* send("GET", "/api/v1/intents", { key: testKey })
          expect(list.body).toMatchObject({ total_items: 1 })
        }))

      it.effect("413 and 415: oversized bodies and bodies that are not JSON, before any parsing", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const big = JSON.stringify({ ...marketOrder(mockId), padding: "x".repeat(70_000) })
          expectError(
            yield* send("POST", "/api/v1/intents", { key: testKey, body: big }),
            413,
            "payload_too_large",
            "Request body too large"
          )
          expectError(
            yield* send("POST", "/api/v1/intents", {
              key: testKey,
              body: JSON.stringify(marketOrder(mockId)),
              headers: { "content-type": "text/plain" }
            }),
            415,
            "unsupported_media_type",
            "Content-Type must be application/json"
          )
        }))

      it.effect("422: the order rules and the prices' own, in the documented wording", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const order = (o: Record<string, unknown>) => post(testKey, marketOrder(mockId, o))
          const cases: ReadonlyArray<readonly [Reply, string]> = [
            [yield* order({ order_type: "limit" }), "limit_price is required for limit orders"],
            [yield* order({ order_type: "stop_limit", stop_price: 1 }), "limit_price is required for limit orders"],
            [yield* order({ order_type: "stop" }), "stop_price is required for stop orders"],
            [yield* order({ order_type: "stop_limit", limit_price: 1 }), "stop_price is required for stop orders"],
            [yield* order({ order_type: "limit", limit_price: null }), "limit_price is required for limit orders"],
            [yield* order({ quantity: 0 }), "quantity must be greater than 0"],
            [yield* order({ quantity: -5 }), "quantity must be greater than 0"],
            [yield* order({ quantity: 0.0000000001 }), "quantity must have at most 9 decimal places"],
            [yield* order({ order_type: "limit", limit_price: 0 }), "limit_price must be greater than 0"],
            [yield* order({ order_type: "stop", stop_price: -1 }), "stop_price must be greater than 0"],
            [yield* order({ limit_price: 10 }), "limit_price is not allowed for market orders"],
            [yield* order({ order_type: "limit", limit_price: 10, stop_price: 9 }), "stop_price is not allowed for limit orders"]
          ]
          for (const [reply, detail] of cases) expectError(reply, 422, "unprocessable_entity", detail)
          const list = yield* send("GET", "/api/v1/intents", { key: testKey })
          expect(list.body).toMatchObject({ total_items: 0 })
        }))

      it.effect("429: over the key's per-minute limit, with retry_after and the headers", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp({ requests_per_minute: 3 })
          // The four requests in one minute's count: straddling two, the fourth would be admitted.
          yield* Effect.promise(awayFromMinuteEdge)
          for (let i = 0; i < 3; i++) expect((yield* send("GET", "/api/v1/intents", { key: testKey })).status).toBe(200)
          const limited = yield* post(testKey, marketOrder(mockId))
          expectError(limited, 429, "rate_limit_exceeded", /^Rate limit exceeded\. Retry after \d+ seconds\.$/)
          const retryAfter = bodyOf(RetryBody, limited).retry_after
          expect(retryAfter).toBeGreaterThanOrEqual(1)
          expect(retryAfter).toBeLessThanOrEqual(60)
          expect(bodyOf(RetryBody, limited).detail).toBe(`Rate limit exceeded. Retry after ${retryAfter} seconds.`)
          expect(limited.headers["retry-after"]).toBe(String(retryAfter))
          expect(limited.headers["x-ratelimit-limit"]).toBe("3")
          expect(limited.headers["x-ratelimit-remaining"]).toBe("0")
        }))

      it.effect("429: live intents over the monthly quota; test intents are free", () =>
        Effect.gen(function*() {
          const { alpacaId, liveKey, mockId, testKey } = yield* signUp({ intents_per_month: 2 })
          expect((yield* post(liveKey, marketOrder(alpacaId))).status).toBe(201)
          expect((yield* post(liveKey, marketOrder(alpacaId))).status).toBe(201)
          const over = yield* post(liveKey, marketOrder(alpacaId))
          expectError(over, 429, "quota_exceeded", "Monthly intent quota exceeded")
          expect(bodyOf(RetryBody, over).retry_after).toBeGreaterThan(0)
          for (let i = 0; i < 3; i++) expect((yield* post(testKey, marketOrder(mockId))).status).toBe(201)
        }))
    })

    describe("lookups and the list", () => {
      it.effect("GET by id and by intent_id return the same intent; others' and the other mode's are not found", () =>
        Effect.gen(function*() {
          const ada = yield* signUp()
          const bob = yield* signUp()
          // HOLD rests at the mock broker: the intent stays as created while we look.
          const created = bodyOf(
            Schema.encodedSchema(TradeIntent),
            yield* post(ada.testKey, marketOrder(ada.mockId, { intent_id: "lookup:1", symbol: "HOLD" }))
          )
          yield* waitFor(ada.testKey, IntentId.make(created.id), (intent) => intent.orders.length > 0)
          const byId = yield* send("GET", `/api/v1/intents/${created.id}`, { key: ada.testKey })
          const byExternal = yield* send("GET", "/api/v1/intents/by-external-id/lookup:1", { key: ada.testKey })
          expect(byId.status).toBe(200)
          expect(byId.body).toMatchObject({ ...created, orders: expect.any(Array), updated_at: expect.any(String) })
          expect(byExternal.body).toEqual(byId.body)
          const notFound = [
            yield* send("GET", `/api/v1/intents/${created.id}`, { key: bob.testKey }),
            yield* send("GET", `/api/v1/intents/${created.id}`, { key: ada.liveKey }),
            yield* send("GET", "/api/v1/intents/by-external-id/lookup:1", { key: bob.testKey }),
            yield* send("GET", "/api/v1/intents/by-external-id/lookup:1", { key: ada.liveKey }),
            yield* send("GET", "/api/v1/intents/not-a-uuid", { key: ada.testKey }),
            yield* send("GET", "/api/v1/intents/by-external-id/nope", { key: ada.testKey })
          ]
          for (const reply of notFound) expectError(reply, 404, "not_found", "Trade Intent not found")
        }))

      it.effect("GET /api/v1/intents: newest first, the page envelope, filters, and bad parameters", () =>
        Effect.gen(function*() {
          const { mockId, testKey } = yield* signUp()
          const ids: Array<string> = []
          for (let i = 0; i < 5; i++) {
            // Resting limit orders: they stay pending at the mock broker.
            const reply = yield* post(testKey, marketOrder(mockId, {
              symbol: i < 2 ? "MSFT" : "AAPL",
              order_type: "limit",
              limit_price: 90,
              time_in_force: "gtc"
            }))
            ids.unshift(bodyOf(WithId, reply).id)
            yield* Effect.sleep("5 millis")
          }
          const page = yield* send("GET", "/api/v1/intents?page=2&page_size=2", { key: testKey })
          expect(page.body).toMatchObject({ page: 2, page_size: 2, total_items: 5, total_pages: 3 })
          expect(bodyOf(Schema.Struct({ items: Schema.Array(WithId) }), page).items.map((i) => i.id)).toEqual(ids.slice(2, 4))
          const defaults = yield* send("GET", "/api/v1/intents", { key: testKey })
          expect(defaults.body).toMatchObject({ page: 1, page_size: 20, total_items: 5, total_pages: 1 })
          const past = yield* send("GET", "/api/v1/intents?page=7", { key: testKey })
          expect(past.body).toEqual({ items: [], page: 7, page_size: 20, total_items: 5, total_pages: 1 })
          const msft = yield* send("GET", "/api/v1/intents?symbol=msft&status=pending", { key: testKey })
          expect(msft.body).toMatchObject({ total_items: 2 })
          const byBroker = yield* send("GET", `/api/v1/intents?broker_id=${mockId}`, { key: testKey })
          expect(byBroker.body).toMatchObject({ total_items: 5 })

          const bad: ReadonlyArray<readonly [string, string]> = [
            ["page=0", "page must be an integer of at least 1"],
            ["page=abc", "page must be an integer of at least 1"],
            ["page=1.5", "page must be an integer of at least 1"],
            ["page_size=0", "page_size must be an integer from 1 to 100"],
            ["page_size=101", "page_size must be an integer from 1 to 100"],
            ["status=done", "status must be one of: pending, partially_filled, filled, canceled, rejected, failed"]
          ]
          for (const [query, detail] of bad) {
            expectError(yield* send("GET", `/api/v1/intents?${query}`, { key: testKey }), 400, "validation_error", detail)
          }
        }))
    })

    describe("the rest of the surface", () => {
      it.effect("unknown routes are 404 with the error body", () =>
        Effect.gen(function*() {
          expectError(yield* send("GET", "/api/v2/intents", {}), 404, "not_found", "Not found")
          expectError(yield* send("DELETE", "/api/v1/intents", {}), 404, "not_found", "Not found")
        }))

      it.effect("/healthz, /readyz and /livez answer 200 ok", () =>
        Effect.gen(function*() {
          for (const path of ["/healthz", "/readyz", "/livez"]) {
            const reply = yield* send("GET", path)
            expect(reply.status).toBe(200)
            expect(reply.body).toEqual({ status: "ok" })
          }
        }))

      it.effect("the OpenAPI document and the Swagger page", () =>
        Effect.gen(function*() {
          const doc = yield* send("GET", "/api/v1/openapi.json")
          expect(doc.status).toBe(200)
          const Json = Schema.Record({ key: Schema.String, value: Schema.Unknown })
          const spec = bodyOf(Schema.Struct({ paths: Schema.Record({ key: Schema.String, value: Json }) }), doc)
          expect(Object.keys(spec.paths)).toEqual(expect.arrayContaining([
            "/api/v1/intents",
            "/api/v1/intents/{id}",
            "/api/v1/intents/by-external-id/{intent_id}",
            "/api/v1/events",
            "/api/v1/events/{event_id}",
            "/api/v1/events/stream",
            "/api/v1/intents/{id}/events"
          ]))
          const stream = Schema.decodeUnknownSync(Schema.Struct({ responses: Json }))(spec.paths["/api/v1/events/stream"]?.["get"])
          expect(JSON.stringify(stream.responses["200"])).toContain("text/event-stream")
          const create = Schema.decodeUnknownSync(Schema.Struct({ responses: Json }))(spec.paths["/api/v1/intents"]?.["post"])
          expect(Object.keys(create.responses)).toEqual(
            expect.arrayContaining(["201", "400", "401", "403", "404", "409", "422", "429", "500"])
          )
          expect(JSON.stringify(create.responses["400"])).not.toContain("HttpApiDecodeError")
          const docs = yield* send("GET", "/docs")
          expect(docs.status).toBe(200)
          expect(docs.text).toContain("swagger")
          // The Swagger UI's files are served beside the page, not built into it.
          const script = yield* send("GET", "/docs/swagger-ui-bundle.js")
          expect({ status: script.status, type: script.headers["content-type"] }).toEqual({
            status: 200,
            type: "text/javascript; charset=utf-8"
          })
          expect(script.text).toContain("SwaggerUIBundle")
          expect((yield* send("GET", "/docs/swagger-ui.css")).headers["content-type"]).toBe("text/css; charset=utf-8")
          expect((yield* send("GET", "/docs/init.js")).text).toContain(`"/api/v1/openapi.json"`)
        }))
    })
  })
}
