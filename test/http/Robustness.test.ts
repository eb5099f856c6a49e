import { describe, expect, layer } from "@effect/vitest"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Services from "../../src/Services.js"
import * as InMemoryIntentRepository from "../../src/services/intents/InMemoryIntentRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { marketOrder, signUp } from "../support/Scenario.js"
import * as TestServer from "../support/TestServer.js"
import { bodyOf, ErrorBody, keysOf, send } from "../support/TestServer.js"

const ERROR_KEYS = ["detail", "error_code", "request_id"]

const required = ["intent_id", "symbol", "side", "quantity", "order_type", "broker_id"] as const

/** One way to spoil a valid body: each yields a request that must be refused. */
const spoiled = (valid: Record<string, unknown>) =>
  FastCheck.oneof(
    FastCheck.constantFrom(...required).map((field) => {
      const { [field]: _, ...rest } = valid
      return rest
    }),
    FastCheck.tuple(
      FastCheck.constantFrom(...required, "time_in_force", "extended_hours", "limit_price", "stop_price"),
      FastCheck.oneof(FastCheck.object(), FastCheck.array(FastCheck.integer()), FastCheck.constant("")),
    ).map(([field, value]) => ({ ...valid, [field]: value })),
    FastCheck.tuple(FastCheck.constantFrom("side", "order_type", "time_in_force"), FastCheck.string())
      .filter(([, value]) => !["buy", "sell", "market", "limit", "stop", "stop_limit", "day", "gtc", "ioc", "fok"].includes(value))
      .map(([field, value]) => ({ ...valid, [field]: value })),
    FastCheck.double({ max: 0, noNaN: true }).map((quantity) => ({ ...valid, quantity })),
    FastCheck.constantFrom("limit", "stop", "stop_limit").map((order_type) => ({ ...valid, order_type })),
    FastCheck.string({ minLength: 1, maxLength: 10 })
      .filter((key) => !(key in valid) && !["limit_price", "stop_price", "time_in_force", "extended_hours"].includes(key))
      .map((key) => ({ ...valid, [key]: 1 })),
    FastCheck.uuid().map((broker_id) => ({ ...valid, broker_id }))
  )

layer(TestServer.layerInMemory, { timeout: 60_000, excludeTestServices: true })("bodies that must be refused", (it) => {
  it.effect("no invalid body ever creates an intent, and every refusal carries the error body", () =>
    Effect.gen(function*() {
      const { mockId, testKey } = yield* signUp({ requests_per_minute: 100_000 })
      const run = Runtime.runPromise(yield* Effect.runtime<HttpClient.HttpClient>())
      const refuse = (body: unknown) =>
        run(Effect.gen(function*() {
          const reply = yield* send("POST", "/api/v1/intents", { key: testKey, json: body })
          expect([400, 404, 422]).toContain(reply.status)
          expect(keysOf(reply)).toEqual(ERROR_KEYS)
          expect(bodyOf(ErrorBody, reply).detail.length).toBeGreaterThan(0)
          expect(bodyOf(ErrorBody, reply).request_id).toBe(reply.headers["x-request-id"])
        }))
      yield* Effect.promise(() =>
        FastCheck.assert(FastCheck.asyncProperty(spoiled(marketOrder(mockId)), refuse), { numRuns: 150 })
      )
      yield* Effect.promise(() =>
        FastCheck.assert(
          FastCheck.asyncProperty(
            FastCheck.jsonValue().filter((v) => typeof v !== "object" || v === null || Array.isArray(v) || !("intent_id" in v)),
            refuse
          ),
          { numRuns: 100 }
        )
      )
      const list = yield* send("GET", "/api/v1/intents", { key: testKey })
      expect(list.body).toMatchObject({ total_items: 0 })
    }))
})

/** An intent repository whose reads fail unexpectedly, with internals in the failure. */
const failingReads = Layer.effect(
  IntentRepository,
  Effect.map(InMemoryIntentRepository.make, (repository) => ({
    ...repository,
    findJson: () => Effect.die(new Error("connection to 10.0.0.7:5432 refused; password=hunter2"))
  }))
)

const brokenServer = TestServer.withFakeAlpacas((alpaca) =>
  TestServer.serve(
    Services.withPorts(
      // The later Layer of a merge wins: the failing repository replaces the in-memory one.
      Layer.merge(Services.portsInMemory({ ...TestServer.options, alpaca }), failingReads)
    )
  )
)

layer(brokenServer, { timeout: 60_000, excludeTestServices: true })("unexpected failures", (it) => {
  describe("500", () => {
    it.effect("answer with the error body and leak nothing internal", () =>
      Effect.gen(function*() {
        const { testKey } = yield* signUp()
        const reply = yield* send("GET", "/api/v1/intents/00000000-0000-0000-0000-000000000000", { key: testKey })
        expect(reply.status).toBe(500)
        expect(reply.body).toEqual({
          detail: "Internal server error",
          error_code: "internal_server_error",
          request_id: reply.headers["x-request-id"]
        })
        expect(reply.text).not.toMatch(/hunter2|10\.0\.0\.7|Error/)
      }))
  })
})
