import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { isGenuine, receiver, until } from "../support/Receiver.js"
import * as Schema from "effect/Schema"
import { type CreateIntentPayload, TradeIntent } from "../../src/domain/Intent.js"
import { admin, create, deliveries, deliveriesWhen, operator, order, signUp, subscribe } from "../support/Scenario.js"
import { waitFor } from "../support/Waiting.js"
import { servers } from "./Backends.js"

/** A webhook event as the receiver got it: the intent in `data` is on the wire (encoded). */
const Envelope = Schema.parseJson(Schema.Struct({
  id: Schema.String,
  type: Schema.String,
  created_at: Schema.String,
  data: Schema.encodedSchema(TradeIntent)
}))

const ALL_TYPES = [
  "intent.created",
  "intent.partially_filled",
  "intent.filled",
  "intent.canceled",
  "intent.rejected",
  "intent.failed"
]

const envelope = Schema.decodeUnknownSync(Envelope)

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`webhooks on ${name}`, (it) => {
    /** A user with a fast limit, an endpoint at a fresh receiver, and a market intent created. */
    const routedTo = (answer: Parameters<typeof receiver>[0] = () => 200, overrides: Partial<CreateIntentPayload> = {}) =>
      Effect.gen(function*() {
        const user = yield* signUp({ requests_per_minute: 10_000 })
        const hooks = yield* receiver(answer)
        const endpoint = yield* subscribe(user.userId, hooks.url)
        const created = yield* create(user.testKey, order(user.mockId, overrides))
        return { ...user, hooks, endpoint, intentId: created.id }
      })

    describe("endpoints in the operator API", () => {
      it.effect("created with a 64-hex secret shown once; listed without it; deleted", () =>
        Effect.gen(function*() {
          const user = yield* signUp()
          const endpoint = yield* subscribe(user.userId, "http://127.0.0.1:9/hooks")
          expect(endpoint).toMatchObject({ url: "http://127.0.0.1:9/hooks", mode: "test", events: ALL_TYPES, disabled_at: null })
          expect(endpoint.secret).toMatch(/^[0-9a-f]{64}$/)
          const filtered = yield* subscribe(user.userId, "https://example.test/x", { events: ["intent.filled", "intent.filled"] })
          expect(filtered.events).toEqual(["intent.filled"])

          const listed = yield* admin("GET", `/users/${user.userId}/webhook-endpoints`)
          expect(listed.status).toBe(200)
          const { items } = yield* Effect.flatMap(operator, ({ admin }) =>
            admin.listWebhookEndpoints({ path: { user_id: user.userId } }))
          expect(items.map((item) => item.id)).toEqual([endpoint.id, filtered.id])
          expect(listed.text).not.toContain(endpoint.secret)
          expect(listed.body).toHaveProperty(["items", 0, "id"], endpoint.id)
          expect(listed.body).not.toHaveProperty(["items", 0, "secret"])

          expect((yield* admin("DELETE", `/webhook-endpoints/${endpoint.id}`)).status).toBe(204)
          const again = yield* admin("DELETE", `/webhook-endpoints/${endpoint.id}`)
          expect(again.status).toBe(404)
          expect(again.body).toMatchObject({ error_code: "webhook_endpoint_not_found" })
          expect((yield* admin("GET", `/webhook-endpoints/${endpoint.id}/deliveries`)).status).toBe(404)
          expect((yield* admin("GET", `/webhook-endpoints/not-a-uuid/deliveries`)).status).toBe(404)
        }))

      it.effect("bad URLs and events are 400s that change nothing; live endpoints must be public https", () =>
        Effect.gen(function*() {
          const user = yield* signUp()
          const refused = [
            [{ url: "not a url", mode: "test" }, "url"],
            [{ url: "ftp://example.test/x", mode: "test" }, "http or https"],
            [{ url: "https://user:pw@example.test/x", mode: "test" }, "credentials"],
            [{ url: "http://8.8.8.8/x", mode: "live" }, "https"],
            [{ url: "https://127.0.0.1/x", mode: "live" }, "public"],
            [{ url: "https://localhost/x", mode: "live" }, "public"],
            [{ url: "https://10.1.2.3/x", mode: "live" }, "public"],
            [{ url: "https://192.168.0.10/x", mode: "live" }, "public"],
            [{ url: "https://169.254.169.254/latest", mode: "live" }, "public"],
            [{ url: "https://[::1]/x", mode: "live" }, "public"],
            [{ url: "https://[fd00::1]/x", mode: "live" }, "public"],
            [{ url: "http://127.0.0.1/x", mode: "test", events: [] }, "events"],
            [{ url: "http://127.0.0.1/x", mode: "test", events: ["intent.exploded"] }, "events"],
            [{ url: "http://127.0.0.1/x", mode: "paper" }, "mode"],
            [{ url: "http://127.0.0.1/x", mode: "test", secret: "mine" }, "secret"]
          ] as const
          for (const [body, mention] of refused) {
            const reply = yield* admin("POST", `/users/${user.userId}/webhook-endpoints`, body)
            expect(reply.status, JSON.stringify(body)).toBe(400)
            expect(reply.body).toMatchObject({ error_code: "validation_error", detail: expect.stringContaining(mention) })
          }
          const live = yield* admin("POST", `/users/${user.userId}/webhook-endpoints`, { url: "https://8.8.8.8/hooks", mode: "live" })
          expect(live.status).toBe(201)
          const listed = yield* Effect.flatMap(operator, ({ admin }) =>
            admin.listWebhookEndpoints({ path: { user_id: user.userId } }))
          expect(listed.items).toHaveLength(1)
          const unknown = yield* admin("POST", `/users/00000000-0000-4000-8000-000000000000/webhook-endpoints`, {
            url: "http://127.0.0.1/x",
            mode: "test"
          })
          expect(unknown.status).toBe(404)
          expect(unknown.body).toMatchObject({ error_code: "user_not_found" })
        }))
    })

    describe("delivery", () => {
      it.scoped("a market intent sends intent.created and intent.filled, signed as the scheme says, data as GET shows it", () =>
        Effect.gen(function*() {
          const { endpoint, hooks, intentId, testKey } = yield* routedTo()
          const intent = yield* waitFor(testKey, intentId, (i) => i.status === "filled")
          yield* until(() => hooks.received.length >= 2)
          const events = hooks.received.map((request) => envelope(request.body))
          expect(events.map((event) => event.type).sort()).toEqual(["intent.created", "intent.filled"])
          for (const request of hooks.received) {
            expect(isGenuine(request, endpoint.secret)).toBe(true)
            expect(request.headers["sr-event-id"]).toMatch(/^evt_[0-9a-f]{32}$/)
          }
          const filled = events.find((event) => event.type === "intent.filled")
          expect(Object.keys(filled ?? {})).toEqual(["id", "type", "created_at", "data"])
          expect(filled?.data).toEqual(Schema.encodeSync(TradeIntent)(intent))
          const created = events.find((event) => event.type === "intent.created")
          expect(created?.data).toMatchObject({ id: intentId, status: "pending", orders: [] })

          const listed = yield* deliveriesWhen(endpoint.id, (items) => items.every((d) => d.status === "succeeded"))
          expect(hooks.received).toHaveLength(2)
          expect(listed.map((d) => [d.type, d.status, d.attempts, d.last_status_code, d.next_attempt_at])).toEqual(
            expect.arrayContaining([
              ["intent.created", "succeeded", 1, 200, null],
              ["intent.filled", "succeeded", 1, 200, null]
            ])
          )
        }))

      it.scoped("a receiver that fails twice then succeeds gets the same event id three times", () =>
        Effect.gen(function*() {
          let createdSeen = 0
          const { endpoint, hooks } = yield* routedTo((request) =>
            envelope(request.body).type === "intent.created" && ++createdSeen <= 2 ? 500 : 200
          )
          yield* until(() => hooks.received.filter((r) => envelope(r.body).type === "intent.created").length >= 3)
          yield* until(() => hooks.received.some((r) => envelope(r.body).type === "intent.filled"))
          const attempts = hooks.received.filter((r) => envelope(r.body).type === "intent.created")
          expect(attempts).toHaveLength(3)
          expect(new Set(attempts.map((r) => r.headers["sr-event-id"])).size).toBe(1)
          expect(attempts.every((r) => isGenuine(r, endpoint.secret))).toBe(true)
          const listed = yield* deliveriesWhen(endpoint.id, (items) => items.some((d) => d.type === "intent.created" && d.status === "succeeded"))
          const created = listed.find((d) => d.type === "intent.created")
          expect(created).toMatchObject({ status: "succeeded", attempts: 3, last_status_code: 200, next_attempt_at: null })
          expect(created?.history.map((a) => a.status_code)).toEqual([500, 500, 200])
        }))

      it.scoped("another user's events never arrive, nor the same user's live events at a test endpoint", () =>
        Effect.gen(function*() {
          const ada = yield* routedTo()
          const bob = yield* routedTo()
          const liveId = (yield* create(ada.liveKey, order(ada.alpacaId))).id
          yield* waitFor(ada.liveKey, liveId, (i) => ["filled", "canceled", "rejected", "failed"].includes(i.status))
          yield* waitFor(ada.testKey, ada.intentId, (i) => i.status === "filled")
          yield* waitFor(bob.testKey, bob.intentId, (i) => i.status === "filled")
          yield* until(() => ada.hooks.received.length >= 2 && bob.hooks.received.length >= 2)
          yield* Effect.sleep("300 millis")
          const idsAt = (hooks: typeof ada.hooks) => new Set(hooks.received.map((r) => envelope(r.body).data.id))
          expect(idsAt(ada.hooks)).toEqual(new Set([ada.intentId]))
          expect(idsAt(bob.hooks)).toEqual(new Set([bob.intentId]))
        }))

      it.scoped("an endpoint subscribed to intent.filled gets only that", () =>
        Effect.gen(function*() {
          const user = yield* signUp({ requests_per_minute: 10_000 })
          const hooks = yield* receiver()
          yield* subscribe(user.userId, hooks.url, { events: ["intent.filled"] })
          const created = yield* create(user.testKey, order(user.mockId))
          yield* waitFor(user.testKey, created.id, (i) => i.status === "filled")
          yield* until(() => hooks.received.length >= 1)
          yield* Effect.sleep("200 millis")
          expect(hooks.received.map((r) => envelope(r.body).type)).toEqual(["intent.filled"])
        }))

      it.scoped("after the last retry the delivery is failed; a resend delivers it again", () =>
        Effect.gen(function*() {
          const { endpoint, hooks } = yield* routedTo(() => 503, { symbol: "HOLD", order_type: "limit", limit_price: 1 })
          // One event (intent.created); the schedule in tests is three retries 50 ms apart: four attempts.
          yield* until(() => hooks.received.length >= 4)
          const [failed] = yield* deliveriesWhen(endpoint.id, ([d]) => d?.status === "failed")
          expect(failed).toMatchObject({ status: "failed", attempts: 4, last_status_code: 503, next_attempt_at: null })
          yield* Effect.sleep("200 millis")
          expect(hooks.received).toHaveLength(4)

          hooks.respond(() => 204)
          const resent = yield* admin("POST", `/deliveries/${failed?.id}/resend`)
          expect(resent.status).toBe(202)
          expect(resent.body).toMatchObject({ id: failed?.id, status: "pending" })
          yield* until(() => hooks.received.length >= 5)
          expect(hooks.received[4]?.headers["sr-event-id"]).toBe(failed?.event_id)
          expect(hooks.received.every((r) => isGenuine(r, endpoint.secret))).toBe(true)
          const [after] = yield* deliveriesWhen(endpoint.id, ([d]) => d?.status === "succeeded")
          expect(after).toMatchObject({ attempts: 5, last_status_code: 204, next_attempt_at: null })
          expect(after?.history.map((a) => a.status_code)).toEqual([503, 503, 503, 503, 204])

          const missing = yield* admin("POST", `/deliveries/00000000-0000-4000-8000-000000000000/resend`)
          expect(missing.status).toBe(404)
          expect(missing.body).toMatchObject({ error_code: "delivery_not_found" })
        }))

      it.scoped("a 410 disables the endpoint: its pending deliveries fail, later events skip it, resend is refused", () =>
        Effect.gen(function*() {
          const { endpoint, hooks, intentId, mockId, testKey, userId } = yield* routedTo(() => 410)
          yield* waitFor(testKey, intentId, (i) => i.status === "filled")
          const settled = yield* deliveriesWhen(endpoint.id, (items) => items.length > 0 && items.every((d) => d.status === "failed"))
          const listed = yield* Effect.flatMap(operator, ({ admin }) => admin.listWebhookEndpoints({ path: { user_id: userId } }))
          const [view] = listed.items
          expect(view?.disabled_at).not.toBeNull()
          // No event was tried twice (deliveries already in flight may each have had their one POST).
          const before = hooks.received.length
          expect(new Set(hooks.received.map((r) => r.headers["sr-event-id"])).size).toBe(before)
          const refused = yield* admin("POST", `/deliveries/${settled[0]?.id}/resend`)
          expect(refused.status).toBe(409)
          expect(refused.body).toMatchObject({ error_code: "webhook_endpoint_disabled" })
          const next = yield* create(testKey, order(mockId))
          yield* waitFor(testKey, next.id, (i) => i.status === "filled")
          yield* Effect.sleep("200 millis")
          expect(hooks.received.length).toBe(before)
          expect((yield* deliveries(endpoint.id)).length).toBe(settled.length)
        }))

      it.scoped("redirects are not followed, and a receiver that does not answer in time is retried", () =>
        Effect.gen(function*() {
          let sent = 0
          const { endpoint, hooks } = yield* routedTo(
            (request) => {
              if (request.path !== "/hooks" || envelope(request.body).type !== "intent.created") return 200
              sent++
              return sent === 1 ? 302 : sent === 2 ? "hang" : 200
            },
            { symbol: "HOLD", order_type: "limit", limit_price: 1 }
          )
          const [delivery] = yield* deliveriesWhen(endpoint.id, ([d]) => d?.status === "succeeded")
          expect(delivery?.history.map((a) => a.status_code)).toEqual([302, null, 200])
          expect(delivery?.history[1]?.error).toMatch(/No answer within 2s/)
          expect(hooks.received.map((r) => r.path)).not.toContain("/redirected")
        }))
    })
  })
}
