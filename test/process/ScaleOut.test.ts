import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as FakeAlpaca from "../../src/services/brokers/alpaca/FakeAlpaca.js"
import { alpacaEnv, fakeAlpacaCredentials } from "../support/Harness.js"
import * as Postgres from "../support/Postgres.js"
import { call, createIntent, eventually, psql, signUpOver, start, type Started, stop } from "../support/Process.js"
import { awayFromMinuteEdge } from "../support/RateWindow.js"
import { isGenuine, type Receiver, receiver } from "../support/Receiver.js"

/**
 * A fresh PostgreSQL database, two local receivers answering 200 and a fake Alpaca (its variables
 * to start the instances with), all gone afterwards.
 */
const withDatabaseAndReceivers = (
  body: (url: string, receivers: readonly [Receiver, Receiver], alpaca: Record<string, string>) => Promise<void>
) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const { url } = yield* Postgres.freshDatabaseUrl
        const receivers = [yield* receiver(), yield* receiver()] as const
        const alpaca = alpacaEnv(yield* FakeAlpaca.make())
        yield* Effect.promise(() => body(url, receivers, alpaca))
      })
    )
  )

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** Settings every instance shares; a live broker connection needs the same key everywhere. */
const sharedEnv = (url: string, alpaca: Record<string, string>) => ({
  DATABASE_URL: url,
  ADMIN_TOKEN: "adm",
  CREDENTIALS_KEY: Crypto.randomBytes(32).toString("hex"),
  ROUTING_RETRY_SCHEDULE: "50ms",
  ...alpaca
})

const startThree = (env: Record<string, string>) => Promise.all([start(env), start(env), start(env)])

const stopAll = async (instances: ReadonlyArray<Started>) =>
  expect(await Promise.all(instances.map((instance) => stop(instance.child)))).toEqual(instances.map(() => 0))

const ErrorCode = Schema.decodeUnknownSync(Schema.Struct({ error_code: Schema.optional(Schema.String) }))

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: ReturnType<typeof ErrorCode>
}

/** `count` requests at once, request `i` to instance `i % 3`. */
const spread = (instances: ReadonlyArray<Started>, count: number, key: string, method: "GET" | "POST", body?: (i: number) => unknown) =>
  Promise.all(
    Array.from({ length: count }, async (_, i): Promise<Reply> => {
      const response = await fetch(`${instances[i % instances.length]!.baseUrl}/api/v1/intents`, {
        method,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body(i)) })
      })
      return { status: response.status, headers: response.headers, body: ErrorCode(await response.json()) }
    })
  )

const statuses = (replies: ReadonlyArray<Reply>) => {
  const counts: Record<number, number> = {}
  for (const reply of replies) counts[reply.status] = (counts[reply.status] ?? 0) + 1
  return counts
}

describe("three instances on one PostgreSQL, load spread round-robin", () => {
  for (const store of ["the database", "Redis"] as const) {
    it(`counting in ${store}: a free key's 60 a minute and a live quota of 5 hold across all three`, () =>
      withDatabaseAndReceivers(async (url, _receivers, alpacaVariables) => {
        const instances = await startThree({ ...sharedEnv(url, alpacaVariables), ...(store === "Redis" ? { REDIS_URL } : {}) })
        const { key, operator } = await signUpOver(instances[0]!.baseUrl, "adm", {
          name: "Free",
          tier: "free",
          requests_per_minute: undefined
        })
        await awayFromMinuteEdge()
        const burst = await spread(instances, 180, key, "GET")
        expect(statuses(burst)).toEqual({ 200: 60, 429: 120 })
        for (const reply of burst.filter((r) => r.status === 429)) {
          expect(reply.body.error_code).toBe("rate_limit_exceeded")
          expect(reply.headers.get("x-ratelimit-remaining")).toBe("0")
        }
        // One count for all three: each admitted request has its own place in it, whichever instance it reached.
        const admitted = burst.filter((r) => r.status === 200)
        expect(new Set(admitted.map((r) => Number(r.headers.get("x-ratelimit-remaining"))))).toEqual(
          new Set(Array.from({ length: 60 }, (_, i) => i))
        )
        expect(new Set(burst.map((r) => r.headers.get("x-ratelimit-reset"))).size).toBe(1)

        const quoted = await call(operator.admin.createUser({
          payload: { name: "Quota", tier: "enterprise", requests_per_minute: 10_000, intents_per_month: 5 }
        }))
        const path = { user_id: quoted.id }
        const live = await call(operator.admin.createApiKey({ path, payload: { name: "live", mode: "live" } }))
        const alpaca = await call(operator.admin.createBroker({
          path,
          payload: {
            name: "Alpaca",
            kind: "alpaca",
            mode: "live",
            credentials: fakeAlpacaCredentials
          }
        }))
        const creations = await spread(instances, 30, live.key, "POST", (i) => ({
          intent_id: `live-${i}`,
          symbol: "AAPL",
          side: "buy",
          quantity: 1,
          order_type: "market",
          broker_id: alpaca.id
        }))
        expect(statuses(creations)).toEqual({ 201: 5, 429: 25 })
        for (const reply of creations.filter((r) => r.status === 429)) expect(reply.body.error_code).toBe("quota_exceeded")
        expect(psql(url, `SELECT count(*) FROM intents WHERE user_id = '${quoted.id}' AND mode = 'live'`)).toBe("5")
        expect(psql(url, `SELECT sum(count) FROM intent_usage WHERE user_id = '${quoted.id}'`)).toBe("5")
        await stopAll(instances)
      }), 60_000)
  }

  it("300 market intents: each is routed and submitted once, and each event reaches each of two endpoints once", () =>
    withDatabaseAndReceivers(async (url, receivers, alpaca) => {
      const instances = await startThree(sharedEnv(url, alpaca))
      const { brokerId, key, operator, userId } = await signUpOver(instances[0]!.baseUrl, "adm")
      const endpoints = await Promise.all(
        receivers.map((hooks) =>
          call(operator.admin.createWebhookEndpoint({ path: { user_id: userId }, payload: { url: hooks.url, mode: "test" } }))
        )
      )

      const total = 300
      // Thirty clients; intent i goes to instance i % 3.
      await Effect.runPromise(Effect.forEach(
        Array.from({ length: total }, (_, i) => i),
        (i) =>
          Effect.promise(() =>
            createIntent(instances[i % instances.length]!.baseUrl, key, {
              intent_id: `scale-${i}`,
              symbol: "AAPL",
              side: "buy",
              quantity: 1,
              order_type: "market",
              broker_id: brokerId
            })
          ),
        { concurrency: 30, discard: true }
      ))
      await eventually(() => psql(url, "SELECT count(*) FROM intents WHERE status = 'filled'") === String(total), 20)
      // Each status change wrote its event in its own transaction: created and filled, nothing else.
      expect(psql(url, "SELECT count(*) FROM events")).toBe(String(2 * total))
      await eventually(
        () => psql(url, "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'") === String(4 * total),
        20
      )
      // A graceful stop lets deliveries in flight finish: a duplicate would reach the receivers before it ends.
      await stopAll(instances)

      expect(psql(url, "SELECT count(*) FROM intents")).toBe(String(total))
      expect(psql(url, "SELECT count(*) FROM mock_broker_orders")).toBe(String(total))
      expect(psql(url, "SELECT max(submissions) FROM mock_broker_orders")).toBe("1")
      expect(psql(url, "SELECT count(*), count(DISTINCT intent_id) FROM orders")).toBe(`${total}|${total}`)
      expect(psql(url, "SELECT count(*) FROM fills")).toBe(String(total))
      expect(psql(url, "SELECT count(*) FROM routing_jobs")).toBe("0")

      expect(psql(url, "SELECT count(*), count(DISTINCT (endpoint_id, event_id)), max(attempts) FROM webhook_deliveries"))
        .toBe(`${4 * total}|${4 * total}|1`)
      const events = new Set(psql(url, "SELECT string_agg(id, ',') FROM events").split(","))
      receivers.forEach((hooks, i) => {
        const ids = hooks.received.map((request) => String(request.headers["sr-event-id"]))
        expect(ids).toHaveLength(2 * total)
        expect(new Set(ids)).toEqual(events)
        expect(hooks.received.every((request) => isGenuine(request, endpoints[i]!.secret))).toBe(true)
      })
    }), 90_000)
})
