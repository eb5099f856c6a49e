import { describe, expect, it } from "@effect/vitest"
import { withDatabase } from "../support/Postgres.js"
import { createIntent, eventually, psql, signUpOver, start, stop } from "../support/Process.js"

const order = (brokerId: string, i: number, symbol = "AAPL") => ({
  intent_id: `drill-${i}`,
  symbol,
  side: "buy",
  quantity: 3,
  order_type: "market",
  broker_id: brokerId
})

const env = (url: string) => ({
  DATABASE_URL: url,
  ADMIN_TOKEN: "adm",
  ROUTING_RETRY_SCHEDULE: "400ms,400ms,400ms",
  ROUTING_LEASE: "1s"
})

describe("routing across processes on PostgreSQL", () => {
  it("a process killed with SIGKILL after its 201s: after a restart every intent is final with one broker order", () =>
    withDatabase(async (url) => {
      const first = await start(env(url))
      const { brokerId, key } = await signUpOver(first.baseUrl, "adm")
      // FAIL intents are still being retried when the process dies; market ones may or may not be routed.
      const ids = await Promise.all(
        Array.from({ length: 60 }, (_, i) => createIntent(first.baseUrl, key, order(brokerId, i, i % 5 === 0 ? "FAIL" : "AAPL")))
      )
      await stop(first.child, "SIGKILL")
      expect(Number(psql(url, "SELECT count(*) FROM routing_jobs"))).toBeGreaterThan(0)

      const second = await start(env(url))
      await eventually(() => psql(url, "SELECT count(*) FROM intents WHERE status = 'pending'") === "0", 30)
      expect(psql(url, "SELECT count(*) FROM intents")).toBe(String(ids.length))
      expect(psql(url, "SELECT count(*) FROM intents WHERE symbol = 'AAPL' AND status = 'filled'")).toBe("48")
      expect(psql(url, "SELECT count(*) FROM intents WHERE symbol = 'FAIL' AND status = 'failed'")).toBe("12")
      // Exactly one order per routed intent, at the broker and in our records.
      expect(psql(url, "SELECT count(*) FROM mock_broker_orders")).toBe("48")
      expect(psql(url, "SELECT count(*) FROM orders")).toBe("48")
      expect(psql(url, "SELECT count(DISTINCT intent_id) FROM orders")).toBe("48")
      expect(psql(url, "SELECT count(*) FROM fills")).toBe("48")
      // Every transition has its one event.
      expect(psql(url, "SELECT count(*) FROM events WHERE type = 'intent.created'")).toBe("60")
      expect(psql(url, "SELECT count(*) FROM events WHERE type = 'intent.filled'")).toBe("48")
      expect(psql(url, "SELECT count(*) FROM events WHERE type = 'intent.failed'")).toBe("12")
      await eventually(() => psql(url, "SELECT count(*) FROM routing_jobs") === "0", 10)
      expect(await stop(second.child)).toBe(0)
    }), 90_000)

  it("two server processes on one database route 200 intents: each is submitted exactly once", () =>
    withDatabase(async (url) => {
      const [a, b] = await Promise.all([start(env(url)), start(env(url))])
      const { brokerId, key } = await signUpOver(a.baseUrl, "adm")
      const servers = [a.baseUrl, b.baseUrl]
      const ids: Array<string> = []
      for (let batch = 0; batch < 10; batch++) {
        ids.push(...await Promise.all(
          Array.from({ length: 20 }, (_, i) => {
            const n = batch * 20 + i
            return createIntent(servers[n % 2]!, key, order(brokerId, n))
          })
        ))
      }
      await eventually(() => psql(url, "SELECT count(*) FROM intents WHERE status = 'filled'") === "200", 30)
      expect(psql(url, "SELECT count(*) FROM mock_broker_orders")).toBe("200")
      expect(psql(url, "SELECT max(submissions) FROM mock_broker_orders")).toBe("1")
      expect(psql(url, "SELECT count(*) FROM orders")).toBe("200")
      expect(psql(url, "SELECT count(*) FROM events WHERE type = 'intent.filled'")).toBe("200")
      expect(ids).toHaveLength(200)
      expect(await stop(a.child)).toBe(0)
      expect(await stop(b.child)).toBe(0)
    }), 90_000)
})
