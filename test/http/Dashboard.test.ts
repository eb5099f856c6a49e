import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Browser from "../support/Browser.js"
import { admin, marketOrder } from "../support/Scenario.js"
import { bodyOf, send, WithId } from "../support/TestServer.js"
import * as TestServer from "../support/TestServer.js"
import { servers } from "./Backends.js"
import * as Database from "../../src/sql/Database.js"
import type * as Server from "../../src/http/Server.js"

const Items = Schema.Struct({ items: Schema.Array(Schema.Struct({ id: Schema.String })) })
const Key = Schema.Struct({ id: Schema.String, key: Schema.String })
const PASSWORD = "correct horse battery"

/**
 * Failed logins are counted in fixed 15-minute windows: a test that fails many times in a row
 * starts in a fresh window when the current one ends within a minute, so that no window ends
 * halfway through it and resets the count it checks.
 */
const awayFromWindowEnd = Effect.suspend(() => {
  const left = 15 * 60_000 - (Date.now() % (15 * 60_000))
  return left < 60_000 ? Effect.sleep(`${left + 200} millis`) : Effect.void
})

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`dashboard accounts and sessions on ${name}`, (it) => {
    describe("sign-up and login", () => {
      it.effect("signs up with a session cookie that is HttpOnly, SameSite=Lax, scoped to the dashboard", () =>
        Effect.gen(function*() {
          const browser = Browser.make()
          const email = Browser.email("cookie")
          const reply = yield* browser.call("POST", "signup", {
            json: { email: `  ${email.toUpperCase()} `, name: "Ada", password: PASSWORD }
          })
          expect(reply.status).toBe(201)
          expect(reply.body).toMatchObject({ email, user: { name: "Ada", tier: "free", requests_per_minute: 60 } })
          expect(reply.text).not.toContain(PASSWORD)
          const cookie = reply.setCookies.find((c) => c.name === "tir_session")
          expect(cookie?.options).toMatchObject({ httpOnly: true, sameSite: "lax", path: "/dashboard" })
          expect(cookie?.options?.secure).not.toBe(true)
          expect(cookie?.value).not.toBe("")
          expect(reply.text).not.toContain(cookie?.value)
          const session = yield* browser.call("GET", "session")
          expect(session.status).toBe(200)
          expect(session.body).toMatchObject({ email, csrf_token: browser.csrf })

          const taken = yield* Browser.make().call("POST", "signup", { json: { email, name: "Eve", password: PASSWORD } })
          expect(taken.status).toBe(409)
          expect(taken.body).toMatchObject({ error_code: "email_taken" })
        }))

      it.effect("refuses bad sign-ups with the field at fault and creates nothing", () =>
        Effect.gen(function*() {
          const email = Browser.email("bad")
          const short = yield* Browser.make().call("POST", "signup", { json: { email, name: "A", password: "short" } })
          expect(short.status).toBe(400)
          expect(short.body).toMatchObject({ error_code: "validation_error", detail: expect.stringContaining("password") })
          const noEmail = yield* Browser.make().call("POST", "signup", { json: { email: "nope", name: "A", password: PASSWORD } })
          expect(noEmail.status).toBe(400)
          expect(noEmail.body).toMatchObject({ detail: expect.stringContaining("email") })
          const login = yield* Browser.make().call("POST", "login", { json: { email, password: "short" } })
          expect(login.status).toBe(401)
        }))

      it.effect("logs in with the right password only, saying the same for an unknown email", () =>
        Effect.gen(function*() {
          const { email } = yield* Browser.signedUp("login")
          const wrong = yield* Browser.make().call("POST", "login", { json: { email, password: "wrong password!" } })
          const unknown = yield* Browser.make().call("POST", "login", {
            json: { email: Browser.email("nobody"), password: PASSWORD }
          })
          for (const reply of [wrong, unknown]) {
            expect(reply.status).toBe(401)
            expect(reply.body).toMatchObject({ error_code: "invalid_credentials", detail: "Invalid email or password" })
            expect(reply.setCookies).toEqual([])
          }
          const browser = Browser.make()
          const right = yield* browser.call("POST", "login", { json: { email: email.toUpperCase(), password: PASSWORD } })
          expect(right.status).toBe(200)
          expect((yield* browser.call("GET", "session")).status).toBe(200)
        }))

      it.effect("throttles failures per email, but a browser that logged in before is not locked out", () =>
        Effect.gen(function*() {
          yield* awayFromWindowEnd
          const { email } = yield* Browser.signedUp("throttle")
          const owner = Browser.make()
          expect((yield* owner.call("POST", "login", { json: { email, password: PASSWORD } })).status).toBe(200)
          expect(owner.cookie("tir_device")).toBeDefined()

          const attacker = Browser.make()
          for (let i = 0; i < 10; i++) {
            expect((yield* attacker.call("POST", "login", { json: { email, password: `guess number ${i}` } })).status)
              .toBe(401)
          }
          const throttled = yield* attacker.call("POST", "login", { json: { email, password: PASSWORD } })
          expect(throttled.status).toBe(429)
          expect(throttled.body).toMatchObject({ error_code: "rate_limit_exceeded", retry_after: expect.any(Number) })
          expect(Number(throttled.headers["retry-after"])).toBeGreaterThan(0)
          expect(throttled.setCookies).toEqual([])

          const again = yield* owner.call("POST", "login", { json: { email, password: PASSWORD } })
          expect(again.status).toBe(200)
        }), 120_000) // awayFromWindowEnd may wait up to a minute
    })

    describe("CSRF", () => {
      it.effect("refuses a change without the session's token, with another's, or from another origin", () =>
        Effect.gen(function*() {
          const { browser } = yield* Browser.signedUp("csrf")
          const payload = { json: { name: "k", mode: "test" } }
          const missing = yield* browser.call("POST", "api-keys", { ...payload, csrf: false })
          const wrong = yield* browser.call("POST", "api-keys", { ...payload, csrf: "not-the-token" })
          const foreign = yield* browser.call("POST", "api-keys", { ...payload, headers: { origin: "https://evil.example" } })
          for (const reply of [missing, wrong, foreign]) {
            expect(reply.status).toBe(403)
            expect(reply.body).toMatchObject({ error_code: "forbidden", detail: "Missing or invalid CSRF token" })
          }
          expect(bodyOf(Items, yield* browser.call("GET", "api-keys?mode=test")).items).toEqual([])
          expect((yield* browser.call("POST", "api-keys", payload)).status).toBe(201)

          const signup = yield* Browser.make().call("POST", "signup", {
            json: { email: Browser.email("x"), name: "x", password: PASSWORD },
            headers: { origin: "https://evil.example" }
          })
          expect(signup.status).toBe(403)
          const loginFromElsewhere = yield* Browser.make().call("POST", "login", {
            json: { email: "a@b.co", password: PASSWORD },
            headers: { origin: "https://evil.example" }
          })
          expect(loginFromElsewhere.status).toBe(403)
        }))
    })

    describe("sessions", () => {
      it.effect("without a session every call is 401", () =>
        Effect.gen(function*() {
          for (const path of ["session", "overview?mode=test", "api-keys?mode=test", "intents?mode=test"]) {
            const reply = yield* Browser.make().call("GET", path)
            expect(reply.status).toBe(401)
            expect(reply.body).toMatchObject({ error_code: "unauthorized", detail: "Sign in to continue" })
          }
        }))

      it.effect("a session idle for 14 days has expired; one used within them has not", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const stale = yield* Browser.signedUp("idle")
          const fresh = yield* Browser.signedUp("busy")
          yield* sql`UPDATE sessions SET last_seen_at = now() - interval '14 days 1 minute'
                     WHERE user_id = (SELECT user_id FROM logins WHERE email = ${stale.email})`
          yield* sql`UPDATE sessions SET last_seen_at = now() - interval '13 days 23 hours'
                     WHERE user_id = (SELECT user_id FROM logins WHERE email = ${fresh.email})`
          expect((yield* stale.browser.call("GET", "session")).status).toBe(401)
          expect((yield* fresh.browser.call("GET", "session")).status).toBe(200)
          const seen = yield* sql<{ readonly recent: boolean }>`
            SELECT last_seen_at > now() - interval '1 hour' AS recent FROM sessions
            WHERE user_id = (SELECT user_id FROM logins WHERE email = ${fresh.email})`
          expect(seen[0]?.recent).toBe(true)
        }))

      it.effect("logout revokes this session; sign out everywhere revokes them all", () =>
        Effect.gen(function*() {
          const { browser, email } = yield* Browser.signedUp("logout")
          const other = Browser.make()
          expect((yield* other.call("POST", "login", { json: { email, password: PASSWORD } })).status).toBe(200)
          const stolen = browser.cookie("tir_session") ?? ""

          const out = yield* browser.call("POST", "logout")
          expect(out.status).toBe(204)
          expect(out.setCookies.find((c) => c.name === "tir_session")?.value).toBe("")
          const replayed = Browser.make()
          replayed.setCookie("tir_session", stolen)
          expect((yield* replayed.call("GET", "session")).status).toBe(401)
          expect((yield* other.call("GET", "session")).status).toBe(200)

          const third = Browser.make()
          expect((yield* third.call("POST", "login", { json: { email, password: PASSWORD } })).status).toBe(200)
          expect((yield* other.call("POST", "logout-everywhere")).status).toBe(204)
          expect((yield* other.call("GET", "session")).status).toBe(401)
          expect((yield* third.call("GET", "session")).status).toBe(401)
        }))

      it.effect("a password change needs the current one, revokes every other session and keeps this browser in", () =>
        Effect.gen(function*() {
          const { browser, email } = yield* Browser.signedUp("password")
          const other = Browser.make()
          expect((yield* other.call("POST", "login", { json: { email, password: PASSWORD } })).status).toBe(200)
          const oldToken = browser.cookie("tir_session") ?? ""

          const wrong = yield* browser.call("POST", "account/password", {
            json: { current_password: "not my password", new_password: "a brand new password" }
          })
          expect(wrong.status).toBe(422)
          expect(wrong.body).toMatchObject({ detail: "current_password is not the account's password" })
          const weak = yield* browser.call("POST", "account/password", {
            json: { current_password: PASSWORD, new_password: "short" }
          })
          expect(weak.status).toBe(400)

          const changed = yield* browser.call("POST", "account/password", {
            json: { current_password: PASSWORD, new_password: "a brand new password" }
          })
          expect(changed.status).toBe(200)
          expect(browser.cookie("tir_session")).not.toBe(oldToken)
          expect((yield* browser.call("GET", "session")).status).toBe(200)
          expect((yield* other.call("GET", "session")).status).toBe(401)
          const replayed = Browser.make()
          replayed.setCookie("tir_session", oldToken)
          expect((yield* replayed.call("GET", "session")).status).toBe(401)
          expect((yield* Browser.make().call("POST", "login", { json: { email, password: PASSWORD } })).status).toBe(401)
          expect(
            (yield* Browser.make().call("POST", "login", { json: { email, password: "a brand new password" } })).status
          ).toBe(200)
        }))

      it.effect("renames the account", () =>
        Effect.gen(function*() {
          const { browser } = yield* Browser.signedUp("rename")
          const renamed = yield* browser.call("PATCH", "account", { json: { name: "Grace" } })
          expect(renamed.status).toBe(200)
          expect((yield* browser.call("GET", "session")).body).toMatchObject({ user: { name: "Grace" } })
        }))
    })

    describe("operator logins", () => {
      it.effect("the operator API gives an existing user a login, once", () =>
        Effect.gen(function*() {
          const user = bodyOf(WithId, yield* admin("POST", "/users", { name: "Ops made", tier: "pro" }))
          const email = Browser.email("ops")
          const created = yield* admin("POST", `/users/${user.id}/login`, { email, password: PASSWORD })
          expect(created.status).toBe(201)
          expect(created.body).toMatchObject({ user_id: user.id, email })
          expect(created.text).not.toContain(PASSWORD)
          const browser = Browser.make()
          const login = yield* browser.call("POST", "login", { json: { email, password: PASSWORD } })
          expect(login.body).toMatchObject({ user: { id: user.id, tier: "pro" } })

          const twice = yield* admin("POST", `/users/${user.id}/login`, { email: Browser.email("ops"), password: PASSWORD })
          expect(twice.status).toBe(409)
          expect(twice.body).toMatchObject({ error_code: "login_exists" })
          const other = bodyOf(WithId, yield* admin("POST", "/users", { name: "Other", tier: "free" }))
          const taken = yield* admin("POST", `/users/${other.id}/login`, { email, password: PASSWORD })
          expect(taken.status).toBe(409)
          expect(taken.body).toMatchObject({ error_code: "email_taken" })
          const missing = yield* admin("POST", "/users/00000000-0000-0000-0000-000000000000/login", {
            email: Browser.email("none"),
            password: PASSWORD
          })
          expect(missing.status).toBe(404)
        }))
    })

    describe("a user's own things", () => {
      it.effect("another user's key, broker, endpoint, intent and delivery are all 404", () =>
        Effect.gen(function*() {
          const owner = (yield* Browser.signedUp("owner")).browser
          const intruder = (yield* Browser.signedUp("intruder")).browser
          const key = bodyOf(Key, yield* owner.call("POST", "api-keys", { json: { name: "mine", mode: "test" } }))
          const broker = bodyOf(WithId, yield* owner.call("POST", "brokers", { json: { name: "m", kind: "mock", mode: "test" } }))
          const endpoint = bodyOf(WithId, yield* owner.call("POST", "webhook-endpoints", {
            json: { url: "http://127.0.0.1:9/hook", mode: "test" }
          }))
          const intent = bodyOf(WithId, yield* send("POST", "/api/v1/intents", { key: key.key, json: marketOrder(broker.id) }))
          const deliveries = yield* owner.call("GET", `webhook-endpoints/${endpoint.id}/deliveries`).pipe(
            Effect.map((reply) => bodyOf(Items, reply).items),
            Effect.repeat(Schedule.spaced("20 millis").pipe(
              Schedule.whileInput((items: ReadonlyArray<{ readonly id: string }>) => items.length === 0),
              Schedule.passthrough
            )),
            Effect.timeout("10 seconds")
          )
          const delivery = deliveries[0]!

          const probes = [
            ["DELETE", `api-keys/${key.id}`],
            ["DELETE", `brokers/${broker.id}`],
            ["PUT", `brokers/${broker.id}/credentials`],
            ["DELETE", `webhook-endpoints/${endpoint.id}`],
            ["POST", `webhook-endpoints/${endpoint.id}/rotate-secret`],
            ["POST", `webhook-endpoints/${endpoint.id}/disable`],
            ["POST", `webhook-endpoints/${endpoint.id}/test`],
            ["GET", `webhook-endpoints/${endpoint.id}/deliveries`],
            ["POST", `deliveries/${delivery.id}/resend`],
            ["GET", `intents/${intent.id}?mode=test`],
            ["GET", `intents/${intent.id}/events?mode=test`],
            ["POST", `intents/${intent.id}/cancel?mode=test`]
          ] as const
          for (const [method, path] of probes) {
            const reply = yield* intruder.call(method, path, method === "PUT"
              ? { json: { api_key_id: "a", api_secret_key: "b" } }
              : {})
            expect({ path, status: reply.status }).toEqual({ path, status: 404 })
          }
          for (const path of ["api-keys?mode=test", "brokers?mode=test", "webhook-endpoints?mode=test", "intents?mode=test"]) {
            expect(bodyOf(Items, yield* intruder.call("GET", path)).items).toEqual([])
          }
          // The owner's things are untouched.
          expect(bodyOf(Items, yield* owner.call("GET", "api-keys?mode=test")).items.map((k) => k.id)).toEqual([key.id])
          expect((yield* send("GET", `/api/v1/intents/${intent.id}`, { key: key.key })).status).toBe(200)
          expect((yield* owner.call("GET", `intents/${intent.id}?mode=live`)).status).toBe(404)
        }))

      it.effect("a revoked key gets 401 at once; a disconnected broker keeps its intents and names no new one", () =>
        Effect.gen(function*() {
          const { browser } = yield* Browser.signedUp("revoke")
          const key = bodyOf(Key, yield* browser.call("POST", "api-keys", { json: { name: "bot", mode: "test" } }))
          const broker = bodyOf(WithId, yield* browser.call("POST", "brokers", { json: { name: "m", kind: "mock", mode: "test" } }))
          const intent = bodyOf(WithId, yield* send("POST", "/api/v1/intents", { key: key.key, json: marketOrder(broker.id) }))

          expect((yield* browser.call("DELETE", `brokers/${broker.id}`)).status).toBe(204)
          expect(bodyOf(Items, yield* browser.call("GET", "brokers?mode=test")).items).toEqual([])
          const refused = yield* send("POST", "/api/v1/intents", {
            key: key.key,
            json: marketOrder(broker.id, { intent_id: "after-disconnect" })
          })
          expect(refused.status).toBe(404)
          expect(refused.body).toMatchObject({ error_code: "broker_not_found" })
          expect((yield* browser.call("GET", `intents/${intent.id}?mode=test`)).body).toMatchObject({ broker_id: broker.id })
          expect((yield* browser.call("DELETE", `brokers/${broker.id}`)).status).toBe(404)

          expect((yield* browser.call("DELETE", `api-keys/${key.id}`)).status).toBe(204)
          expect((yield* send("GET", "/api/v1/intents", { key: key.key })).status).toBe(401)
        }))

      it.effect("the overview counts this month's live intents against the quota and shows recent intents", () =>
        Effect.gen(function*() {
          const { browser } = yield* Browser.signedUp("overview")
          const key = bodyOf(Key, yield* browser.call("POST", "api-keys", { json: { name: "bot", mode: "test" } }))
          const broker = bodyOf(WithId, yield* browser.call("POST", "brokers", { json: { name: "m", kind: "mock", mode: "test" } }))
          const intent = bodyOf(WithId, yield* send("POST", "/api/v1/intents", { key: key.key, json: marketOrder(broker.id) }))
          const test = yield* browser.call("GET", "overview?mode=test")
          expect(test.body).toMatchObject({
            mode: "test",
            tier: "free",
            intents_per_month: 100,
            live_intents_this_month: 0,
            recent_intents: [{ id: intent.id }],
            failing_endpoints: []
          })
          expect((yield* browser.call("GET", "overview?mode=live")).body).toMatchObject({ recent_intents: [] })
          expect((yield* browser.call("GET", "overview?mode=paper")).status).toBe(400)
        }))
    })

    // Last: it spends the failures of the tests' one client address.
    describe("address throttling", () => {
      it.effect("throttles one address's failures across emails, yet a valid login from it passes", () =>
        Effect.gen(function*() {
          yield* awayFromWindowEnd
          const { email } = yield* Browser.signedUp("address")
          const sprayer = Browser.make()
          const statuses: Array<number> = []
          for (let i = 0; i < 55; i++) {
            const reply = yield* sprayer.call("POST", "login", {
              json: { email: Browser.email(`spray${i}`), password: "not the password" }
            })
            statuses.push(reply.status)
          }
          // 401s until the address has failed 50 times in this window (earlier tests failed some), 429s after.
          const firstThrottled = statuses.indexOf(429)
          expect(firstThrottled).toBeGreaterThan(0)
          expect(statuses.slice(0, firstThrottled).every((status) => status === 401)).toBe(true)
          expect(statuses.slice(firstThrottled).every((status) => status === 429)).toBe(true)
          // Someone else behind the same address, in a browser that never logged in before:
          const newcomer = Browser.make()
          expect((yield* newcomer.call("POST", "login", { json: { email, password: PASSWORD } })).status).toBe(200)
          const wrong = yield* Browser.make().call("POST", "login", { json: { email, password: "a wrong guess!" } })
          expect(wrong.status).toBe(429)
          expect(wrong.setCookies).toEqual([])
        }), 120_000) // awayFromWindowEnd may wait up to a minute
    })
  })
}

/** A server on a fresh in-memory PGlite with the given HTTP options. */
const serverWith = (options: Partial<Server.Options>) =>
  TestServer.layerWith(Database.migrated(Database.pglite(undefined)), options).pipe(Layer.orDie)

const closed = serverWith({ signup: "closed" })

layer(closed, { timeout: 60_000, excludeTestServices: true })("dashboard with sign-up closed", (it) => {
  it.effect("refuses sign-ups; logins the operator made still work", () =>
    Effect.gen(function*() {
      const refused = yield* Browser.make().call("POST", "signup", {
        json: { email: Browser.email("closed"), name: "x", password: PASSWORD }
      })
      expect(refused.status).toBe(403)
      expect(refused.body).toMatchObject({ error_code: "signup_closed" })
      const user = bodyOf(WithId, yield* admin("POST", "/users", { name: "Invited", tier: "free" }))
      const email = Browser.email("invited")
      expect((yield* admin("POST", `/users/${user.id}/login`, { email, password: PASSWORD })).status).toBe(201)
      expect((yield* Browser.make().call("POST", "login", { json: { email, password: PASSWORD } })).status).toBe(200)
    }))
})

const behindHttps = serverWith({ publicUrl: Option.some(new URL("https://router.example.com")) })

layer(behindHttps, { timeout: 60_000, excludeTestServices: true })("dashboard behind an https PUBLIC_URL", (it) => {
  it.effect("signs up with a session cookie that is Secure", () =>
    Effect.gen(function*() {
      const reply = yield* Browser.make().call("POST", "signup", {
        json: { email: Browser.email("secure"), name: "Ada", password: PASSWORD }
      })
      expect(reply.status).toBe(201)
      const cookie = reply.setCookies.find((c) => c.name === "tir_session")
      expect(cookie?.options).toMatchObject({ secure: true, httpOnly: true, path: "/dashboard" })
    }))
})
