import { describe, expect, it } from "@effect/vitest"
import { withDatabase } from "../support/Postgres.js"
import { call, signUpOver, start, stop } from "../support/Process.js"
import { awayFromMinuteEdge } from "../support/RateWindow.js"

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** 200 GETs at once with one free key, alternating between the servers: the statuses. */
const burst = async (servers: ReadonlyArray<string>, key: string) =>
  Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const response = await fetch(`${servers[i % servers.length]}/api/v1/intents`, { headers: { authorization: `Bearer ${key}` } })
      await response.body?.cancel()
      return response.status
    })
  )

describe("limits across server processes on one PostgreSQL", () => {
  for (const store of ["the database", "Redis"] as const) {
    it(`two instances counting in ${store}: 200 requests at once on a free key admit exactly 60`, () =>
      withDatabase(async (url) => {
        const env = { DATABASE_URL: url, ADMIN_TOKEN: "adm", ...(store === "Redis" ? { REDIS_URL } : {}) }
        const [a, b] = await Promise.all([start(env), start(env)])
        const { key } = await signUpOver(a.baseUrl, "adm", { name: "Free", tier: "free", requests_per_minute: undefined })
        await awayFromMinuteEdge()
        const statuses = await burst([a.baseUrl, b.baseUrl], key)
        expect(statuses.filter((s) => s === 200)).toHaveLength(60)
        expect(statuses.filter((s) => s === 429)).toHaveLength(140)
        expect(await stop(a.child)).toBe(0)
        expect(await stop(b.child)).toBe(0)
      }), 90_000)
  }

  it("a key revoked through one instance is refused at once there and within moments on the other (cached keys)", () =>
    withDatabase(async (url) => {
      const env = { DATABASE_URL: url, ADMIN_TOKEN: "adm" }
      const [a, b] = await Promise.all([start(env), start(env)])
      const { key, keyId, operator } = await signUpOver(a.baseUrl, "adm")
      const get = async (baseUrl: string) => {
        const response = await fetch(`${baseUrl}/api/v1/intents`, { headers: { authorization: `Bearer ${key}` } })
        await response.body?.cancel()
        return response.status
      }
      // Both instances have now looked the key up (and may cache it).
      for (let i = 0; i < 3; i++) expect([await get(a.baseUrl), await get(b.baseUrl)]).toEqual([200, 200])
      await call(operator.admin.revokeApiKey({ path: { key_id: keyId } }))
      expect(await get(a.baseUrl)).toBe(401)
      const deadline = Date.now() + 2_000
      while ((await get(b.baseUrl)) !== 401) {
        if (Date.now() > deadline) throw new Error("the other instance still accepts the revoked key")
        await new Promise((r) => setTimeout(r, 20))
      }
      expect(await stop(a.child)).toBe(0)
      expect(await stop(b.child)).toBe(0)
    }), 60_000)

  it("item 7: a key created through one instance works on the other at once, from an address blocked for bad keys there", () =>
    withDatabase(async (url) => {
      const env = { DATABASE_URL: url, ADMIN_TOKEN: "adm", AUTH_FAILURES_PER_MINUTE: "3" }
      const [a, b] = await Promise.all([start(env), start(env)])
      const get = async (baseUrl: string, key: string) => {
        const response = await fetch(`${baseUrl}/api/v1/intents`, { headers: { authorization: `Bearer ${key}` } })
        await response.body?.cancel()
        return response.status
      }
      /** Retries until `expected` (the notification may still be on its way), for at most 2 s. */
      const until = async (baseUrl: string, key: string, expected: (status: number) => boolean) => {
        const deadline = Date.now() + 2_000
        for (;;) {
          const status = await get(baseUrl, key)
          if (expected(status)) return status
          if (Date.now() > deadline) throw new Error(`${baseUrl} still answers ${status}`)
          await new Promise((r) => setTimeout(r, 20))
        }
      }
      await awayFromMinuteEdge()
      const guesses = []
      for (let i = 0; i < 5; i++) guesses.push(await get(b.baseUrl, `sk_test_${"B".repeat(31)}${i}`))
      expect(guesses).toEqual([401, 401, 401, 429, 429])
      const { key, keyId, operator } = await signUpOver(a.baseUrl, "adm")
      expect(await until(b.baseUrl, key, (s) => s === 200)).toBe(200)
      expect(await get(b.baseUrl, `sk_test_${"B".repeat(32)}`)).toBe(429)
      await call(operator.admin.revokeApiKey({ path: { key_id: keyId } }))
      expect(await get(a.baseUrl, key)).toBe(401)
      expect(await until(b.baseUrl, key, (s) => s !== 200)).toBe(429)
      expect(await stop(a.child)).toBe(0)
      expect(await stop(b.child)).toBe(0)
    }), 60_000)

  it("oversized headers get 431 and oversized bodies 413, with the error body, from the real server", () =>
    withDatabase(async (url) => {
      const server = await start({ DATABASE_URL: url, ADMIN_TOKEN: "adm" })
      const headers = await fetch(`${server.baseUrl}/api/v1/intents`, { headers: { "x-padding": "a".repeat(20_000) } })
      expect(headers.status).toBe(431)
      expect(await headers.json()).toMatchObject({ error_code: "headers_too_large", request_id: expect.stringMatching(/^req_/) })
      const body = await fetch(`${server.baseUrl}/api/v1/intents`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer sk_test_x" },
        body: JSON.stringify({ padding: "a".repeat(70_000) })
      })
      expect(body.status).toBe(413)
      expect(await body.json()).toMatchObject({ error_code: "payload_too_large" })
      expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200)
      expect(await stop(server.child)).toBe(0)
    }), 60_000)
})
