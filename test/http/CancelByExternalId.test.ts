import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { CreateIntentPayload } from "../../src/domain/Intent.js"
import { create, order, signUp } from "../support/Scenario.js"
import { client, send } from "../support/TestServer.js"
import { waitFor } from "../support/Waiting.js"
import { servers } from "./Backends.js"

const cancelPath = (intentId: string) => `/api/v1/intents/by-external-id/${intentId}/cancel`

const expectNotFound = (reply: { readonly status: number; readonly body: unknown }, detail = "Trade Intent not found") => {
  expect(reply.status).toBe(404)
  expect(reply.body).toMatchObject({ error_code: "not_found", detail })
}

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`cancel by intent_id on ${name}`, (it) => {
    /** A user with an intent created as `overrides` says, once `done` holds for it. */
    const intentOf = (
      overrides: Partial<CreateIntentPayload>,
      done: (intent: { readonly status: string; readonly orders: ReadonlyArray<unknown> }) => boolean
    ) =>
      Effect.gen(function*() {
        const user = yield* signUp({ requests_per_minute: 10_000 })
        const { id } = yield* create(user.testKey, order(user.mockId, overrides))
        return { ...user, id, intent: yield* waitFor(user.testKey, id, done) }
      })

    /** A limit buy below the mock's price of 100: it rests at the broker as a `new` order. */
    const resting = (intentId: string) =>
      intentOf(
        { intent_id: intentId, order_type: "limit", limit_price: 90, time_in_force: "gtc" },
        (intent) => intent.orders.length > 0
      )

    describe("POST /api/v1/intents/by-external-id/{intent_id}/cancel", () => {
      it.effect("200: a resting intent is canceled at the broker, and GET by id shows the same intent", () =>
        Effect.gen(function*() {
          const { id, intent, testKey } = yield* resting("resting:1")
          expect(intent.status).toBe("pending")
          const canceled = yield* send("POST", cancelPath("resting:1"), { key: testKey })
          expect(canceled.status).toBe(200)
          expect(canceled.body).toMatchObject({
            id,
            intent_id: "resting:1",
            status: "canceled",
            status_reason: "Canceled by the client"
          })
          expect(canceled.body).toHaveProperty(["orders", 0, "status"], "canceled")
          const byId = yield* send("GET", `/api/v1/intents/${id}`, { key: testKey })
          expect(byId.body).toEqual(canceled.body)
        }))

      it.effect("200 through the typed client too; the cancel by id still answers on its own route", () =>
        Effect.gen(function*() {
          const first = yield* resting("typed-1")
          const { intents } = yield* client(first.testKey)
          const canceled = yield* intents.cancelIntentByExternalId({ path: { intent_id: "typed-1" } })
          expect(canceled).toMatchObject({ id: first.id, status: "canceled" })

          const second = yield* resting("typed-2")
          const byId = yield* send("POST", `/api/v1/intents/${second.id}/cancel`, { key: second.testKey })
          expect(byId.body).toMatchObject({ id: second.id, intent_id: "typed-2", status: "canceled" })
        }))

      it.effect("404: another user's, the other mode's and unknown intent_ids; the intent is left alone", () =>
        Effect.gen(function*() {
          const { id, liveKey, testKey } = yield* resting("mine-1")
          const other = yield* signUp()
          for (const [key, intentId] of [[other.testKey, "mine-1"], [liveKey, "mine-1"], [testKey, "nope"]] as const) {
            expectNotFound(yield* send("POST", cancelPath(intentId), { key }))
          }
          const still = yield* send("GET", `/api/v1/intents/${id}`, { key: testKey })
          expect(still.body).toMatchObject({ status: "pending" })
        }))

      it.effect("404, never 500: a NUL or odd characters in intent_id, and paths near the cancel by id", () =>
        Effect.gen(function*() {
          const { testKey } = yield* resting("by-external-id")
          expectNotFound(yield* send("POST", cancelPath("ab%00c"), { key: testKey }), "Not found")
          const odd = [
            "a%20b",
            "%FF",
            "%C3%28",
            "%ED%A0%80",
            "%E2%82",
            "%F0%9F%98%80",
            "a%2Fb",
            "%2E%2E",
            "a'%3B--",
            "x".repeat(2000)
          ]
          for (const intentId of odd) {
            const reply = yield* send("POST", cancelPath(intentId), { key: testKey })
            expect(reply.status, intentId).toBe(404)
            expect(reply.body).toMatchObject({ error_code: "not_found" })
          }
          // No intent_id at all: the cancel by id, with the malformed id "by-external-id".
          expectNotFound(yield* send("POST", "/api/v1/intents/by-external-id/cancel", { key: testKey }))
          // An intent_id that reads like the route's own words still names the intent.
          const canceled = yield* send("POST", cancelPath("by-external-id"), { key: testKey })
          expect(canceled.body).toMatchObject({ intent_id: "by-external-id", status: "canceled" })
        }))

      it.effect("409: a final intent, by its intent_id", () =>
        Effect.gen(function*() {
          const { testKey } = yield* intentOf({ intent_id: "filled-1" }, (intent) => intent.status === "filled")
          const reply = yield* send("POST", cancelPath("filled-1"), { key: testKey })
          expect(reply.status).toBe(409)
          expect(reply.body).toMatchObject({
            error_code: "intent_not_cancelable",
            detail: "Trade Intent cannot be canceled in status filled"
          })
        }))

      it.effect("403: a key without intents:write, and the intent is left alone", () =>
        Effect.gen(function*() {
          const { id, key, testKey } = yield* resting("guarded-1")
          const readOnly = yield* key("test", { scopes: ["intents:read"] })
          const reply = yield* send("POST", cancelPath("guarded-1"), { key: readOnly.key })
          expect(reply.status).toBe(403)
          expect(reply.body).toMatchObject({ error_code: "forbidden" })
          const still = yield* send("GET", `/api/v1/intents/${id}`, { key: testKey })
          expect(still.body).toMatchObject({ status: "pending" })
        }))
    })

    describe("the typed client's listIntents", () => {
      it.effect("may leave page and page_size out: the server answers page 1 of 20", () =>
        Effect.gen(function*() {
          const { testKey } = yield* signUp()
          const { intents } = yield* client(testKey)
          const page = yield* intents.listIntents({ urlParams: {} })
          expect(page).toMatchObject({ page: 1, page_size: 20, total_items: 0 })
          const second = yield* intents.listIntents({ urlParams: { page: 2, page_size: 5 } })
          expect(second).toMatchObject({ page: 2, page_size: 5 })
        }))
    })
  })
}
