import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as FakeAlpaca from "../../src/services/brokers/alpaca/FakeAlpaca.js"
import { alpacaEnv, fakeAlpacaCredentials } from "../support/Harness.js"
import * as Postgres from "../support/Postgres.js"
import { createIntent, eventually, psql, signUpOver, start, type Started, stop } from "../support/Process.js"

/** A fresh PostgreSQL database and a fake Alpaca, both gone afterwards. */
const withDatabaseAndAlpaca = (body: (url: string, fake: FakeAlpaca.FakeAlpaca) => Promise<void>) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const { url } = yield* Postgres.freshDatabaseUrl
        const fake = yield* FakeAlpaca.make()
        yield* Effect.promise(() => body(url, fake))
      })
    )
  )

/** What every instance shares: the database, the credentials key, Alpaca's endpoints. */
const envFor = (url: string, fake: FakeAlpaca.FakeAlpaca, extra: Record<string, string> = {}) => ({
  DATABASE_URL: url,
  ADMIN_TOKEN: "adm",
  CREDENTIALS_KEY: Crypto.randomBytes(32).toString("hex"),
  ROUTING_RETRY_SCHEDULE: "200ms,500ms,1s",
  ROUTING_LEASE: "3s",
  LOG_LEVEL: "info",
  ...alpacaEnv(fake),
  ...extra
})

/** A user with a live key and an Alpaca paper connection on the fake's default account. */
const liveUser = async (baseUrl: string) => {
  const { operator, userId } = await signUpOver(baseUrl, "adm")
  const path = { user_id: userId }
  const [key, broker] = await Effect.runPromise(Effect.all([
    operator.admin.createApiKey({ path, payload: { name: "live", mode: "live" } }),
    operator.admin.createBroker({
      path,
      payload: { name: "Alpaca paper", kind: "alpaca", mode: "live", environment: "paper", credentials: fakeAlpacaCredentials }
    })
  ]))
  return { key: key.key, brokerId: broker.id }
}

const market = (brokerId: string, intentId: string, symbol: string) => ({
  intent_id: intentId,
  symbol,
  side: "buy",
  quantity: 3,
  order_type: "market",
  broker_id: brokerId
})

const statusOf = (url: string, id: string) => psql(url, `SELECT status FROM intents WHERE id = '${id}'`)

const ordersAtAlpaca = (fake: FakeAlpaca.FakeAlpaca, id: string) =>
  fake.orders().filter((order) => order.client_order_id === `tir-${id}`)

/** The instance whose log says it follows the connection's stream. */
const holders = (instances: ReadonlyArray<Started>) =>
  instances.filter((instance) => instance.output().includes("following the broker's updates"))

describe("routing to Alpaca across processes, on PostgreSQL", () => {
  it("a process killed between Alpaca's accept and the record: the next instance adopts that one order and records its fill", () =>
    withDatabaseAndAlpaca(async (url, fake) => {
      const env = envFor(url, fake, { BROKER_STREAM_LEASE: "3s" })
      const first = await start(env)
      const { brokerId, key } = await liveUser(first.baseUrl)
      // Alpaca accepts (and fills) the order but its answer never comes: the worker waits on it.
      fake.setBehaviour("hang_after_accept", "KILL", 1)
      const id = await createIntent(first.baseUrl, key, market(brokerId, "killed-1", "KILL"))
      await eventually(() => ordersAtAlpaca(fake, id).length === 1, 10)
      await stop(first.child, "SIGKILL")
      fake.releaseHungRequests()

      const second = await start(env)
      await eventually(() => statusOf(url, id) === "filled", 30)
      expect(ordersAtAlpaca(fake, id)).toHaveLength(1)
      expect(psql(url, `SELECT count(*) FROM orders WHERE intent_id = '${id}'`)).toBe("1")
      expect(psql(url, `SELECT count(*) || '/' || sum(quantity)::float8 FROM fills`)).toBe("1/3")
      expect(fake.requests().filter((r) => r.method === "POST" && r.path === "/v2/orders")).toHaveLength(1)
      expect(await stop(second.child)).toBe(0)
    }), 90_000)

  it("two instances routing one stream of intents, each submission answered 504 or 429 once: one order per intent", () =>
    withDatabaseAndAlpaca(async (url, fake) => {
      const env = envFor(url, fake)
      const instances = [await start(env), await start(env)]
      const { brokerId, key } = await liveUser(instances[0]!.baseUrl)
      fake.setBehaviour("timeout_after_accept", "FIVE", 10)
      fake.setBehaviour("rate_limited", "FOUR", 10)
      const ids = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          createIntent(instances[i % 2]!.baseUrl, key, market(brokerId, `two-${i}`, i % 2 === 0 ? "FIVE" : "FOUR")))
      )
      await eventually(() => psql(url, "SELECT count(*) FROM intents WHERE status = 'filled'") === "20", 60)
      for (const id of ids) expect(ordersAtAlpaca(fake, id)).toHaveLength(1)
      expect(fake.orders()).toHaveLength(20)
      expect(psql(url, "SELECT count(*) || '/' || sum(quantity)::float8 FROM fills")).toBe("20/60")
      expect(await Promise.all(instances.map((instance) => stop(instance.child)))).toEqual([0, 0])
    }), 120_000)

  it("three instances hold one stream per account; after a SIGKILL of the holder another takes over within 30 s, and a fill meanwhile is recorded", () =>
    withDatabaseAndAlpaca(async (url, fake) => {
      // The default lease (15 s): the takeover bound is the product's, not a test setting.
      const env = envFor(url, fake)
      const instances = [await start(env), await start(env), await start(env)]
      const { brokerId, key } = await liveUser(instances[0]!.baseUrl)
      await eventually(() => fake.streamConnections().current === 1, 20)
      // Every instance has looked for streams to hold at least once (each looks every 5 s).
      await new Promise((resolve) => setTimeout(resolve, 6_000))
      expect(fake.streamConnections()).toStrictEqual({ current: 1, max: 1 })
      const [holder, ...others] = holders(instances)
      expect(others).toHaveLength(0)

      fake.setBehaviour("rest", "REST")
      const id = await createIntent(instances[0]!.baseUrl, key, market(brokerId, "rest-1", "REST"))
      await eventually(() => psql(url, `SELECT count(*) FROM orders WHERE intent_id = '${id}'`) === "1", 10)
      const killedAt = Date.now()
      await stop(holder!.child, "SIGKILL")
      const [order] = ordersAtAlpaca(fake, id)
      fake.fill(order!.id)

      await eventually(() => fake.streamConnections().current === 1, 30)
      expect(Date.now() - killedAt).toBeLessThan(30_000)
      await eventually(() => statusOf(url, id) === "filled", 30)
      expect(fake.streamConnections().max).toBe(1)
      const survivors = instances.filter((instance) => instance !== holder)
      expect(holders(survivors)).toHaveLength(1)
      expect(psql(url, `SELECT count(*) || '/' || sum(quantity)::float8 FROM fills`)).toBe("1/3")
      expect(await Promise.all(survivors.map((instance) => stop(instance.child)))).toEqual([0, 0])
    }), 120_000)
})
