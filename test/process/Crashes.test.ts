import { describe, expect, it } from "@effect/vitest"
import pg from "pg"
import { withDatabase } from "../support/Postgres.js"
import { createIntent, eventually, psql, signUpOver, start, stop } from "../support/Process.js"

const env = (url: string, lease = "3s") => ({ DATABASE_URL: url, ADMIN_TOKEN: "adm", ROUTING_LEASE: lease })

/**
 * Another session holds the `orders` table: a worker that has had its order accepted by the broker
 * blocks on recording it, exactly between the broker's accept and the record.
 */
const holdOrders = async (url: string) => {
  const client = new pg.Client({ connectionString: url })
  client.on("error", () => {}) // the database is dropped under it when a test fails
  await client.connect()
  await client.query("BEGIN")
  await client.query("LOCK TABLE orders IN EXCLUSIVE MODE")
  return async () => {
    await client.query("ROLLBACK")
    await client.end()
  }
}

const order = (brokerId: string, symbol = "AAPL") => ({
  intent_id: `crash-${symbol}`,
  symbol,
  side: "buy",
  quantity: 5,
  order_type: "market",
  broker_id: brokerId
})

describe("crashes between the broker and our records, on PostgreSQL", () => {
  it("item 1: a process killed between the broker's accept and the record, then a cancel: the broker's order is adopted, not orphaned", () =>
    withDatabase(async (url) => {
      const first = await start(env(url))
      const { brokerId, key } = await signUpOver(first.baseUrl, "adm")
      const release = await holdOrders(url)
      const id = await createIntent(first.baseUrl, key, order(brokerId))
      await eventually(() => psql(url, "SELECT count(*) FROM mock_broker_orders") === "1", 10)
      await stop(first.child, "SIGKILL")
      await release()

      const second = await start(env(url))
      const cancel = await fetch(`${second.baseUrl}/api/v1/intents/${id}/cancel`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}` }
      })
      expect([200, 409]).toContain(cancel.status)
      await eventually(() => psql(url, `SELECT status FROM intents WHERE id = '${id}'`) !== "pending", 20)
      // The broker filled the order: the intent says so, with that one order and its fill.
      expect(psql(url, `SELECT status FROM intents WHERE id = '${id}'`)).toBe("filled")
      expect(psql(url, "SELECT count(*) FROM orders")).toBe("1")
      expect(psql(url, "SELECT count(*) FROM fills")).toBe("1")
      expect(psql(url, "SELECT status || '/' || submissions FROM mock_broker_orders")).toBe("filled/1")
      expect(await stop(second.child)).toBe(0)
    }), 90_000)

  it("item 2: SIGTERM with a job stuck for good: the process stops renewing, hands the job back within 10 s and exits 0; another instance finishes it", () =>
    withDatabase(async (url) => {
      // A lease longer than the test: only a hand-back lets another instance take the job soon.
      const first = await start(env(url, "60s"))
      const { brokerId, key } = await signUpOver(first.baseUrl, "adm")
      const release = await holdOrders(url)
      const id = await createIntent(first.baseUrl, key, order(brokerId, "HOLD"))
      await eventually(() => psql(url, "SELECT count(*) FROM mock_broker_orders") === "1", 10)

      const stopping = Date.now()
      const code = await Promise.race([
        stop(first.child, "SIGTERM"),
        new Promise<string>((resolve) => setTimeout(() => resolve("still running after 20 s"), 20_000))
      ])
      expect(code).toBe(0)
      expect(Date.now() - stopping).toBeLessThan(20_000)
      // Handed back: not held by anyone, due now.
      expect(psql(url, `SELECT count(*) FROM routing_jobs WHERE intent_id = '${id}' AND locked_until IS NULL`)).toBe("1")
      await release()

      const second = await start(env(url, "60s"))
      await eventually(() => psql(url, `SELECT count(*) FROM orders WHERE intent_id = '${id}'`) === "1", 20)
      expect(psql(url, "SELECT status || '/' || submissions FROM mock_broker_orders")).toBe("new/1")
      expect(await stop(second.child)).toBe(0)
    }), 90_000)
})
