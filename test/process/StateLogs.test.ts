import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { listen } from "../support/Harness.js"
import { createIntent, eventually, signUpOver, start, stop } from "../support/Process.js"

/** The service's JSON log lines so far. */
const linesOf = (output: string): ReadonlyArray<Record<string, unknown>> =>
  output.split("\n").filter((line) => line.startsWith("{")).map((line): Record<string, unknown> => JSON.parse(line))

describe("state changes in the logs", () => {
  it("each request, intent status change and delivery attempt is one JSON line; start and stop lines", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tir-logs-"))
    // The receiver fails the first delivery (a retry follows after 50 ms), then accepts.
    const receiver = await listen((_, n) => n === 1 ? 503 : 200)
    try {
      const service = await start({
        DATA_DIR: dataDir,
        ADMIN_TOKEN: "adm",
        LOG_FORMAT: "json",
        LOG_LEVEL: "info",
        WEBHOOK_RETRY_SCHEDULE: "50ms,50ms"
      })
      const { brokerId, key, operator, userId } = await signUpOver(service.baseUrl, "adm")
      await Effect.runPromise(operator.admin.createWebhookEndpoint({
        path: { user_id: userId },
        payload: { url: receiver.url, mode: "test", events: ["intent.filled"] }
      }))
      const id = await createIntent(service.baseUrl, key, {
        intent_id: "logged-1",
        symbol: "AAPL",
        side: "buy",
        quantity: 1,
        order_type: "market",
        broker_id: brokerId
      })
      const of = (msg: string) => linesOf(service.output()).filter((line) => line["msg"] === msg)
      await eventually(() => of("webhook delivered").length > 0, 15)

      // Each request is one access-log line: never the key, never the body.
      expect(of("request")).toContainEqual({
        time: expect.any(String),
        level: "info",
        msg: "request",
        method: "POST",
        path: "/api/v1/intents",
        status: 201,
        duration_ms: expect.any(Number),
        request_id: expect.stringMatching(/^req_[0-9a-f]{32}$/)
      })
      expect(service.output()).not.toContain(key)
      expect(of("intent filled")).toEqual([
        expect.objectContaining({ level: "info", intent_id: id, status: "filled", filled: 1, status_reason: null })
      ])
      const retried = of("webhook delivery failed; will retry")
      expect(retried).toHaveLength(1)
      expect(retried[0]).toMatchObject({ level: "info", status_code: 503, event_id: expect.stringMatching(/^evt_/) })
      expect(typeof retried[0]?.["retry_at"]).toBe("string")
      expect(of("webhook delivered")).toEqual([
        expect.objectContaining({ status_code: 200, delivery_id: retried[0]?.["delivery_id"] })
      ])
      expect(await stop(service.child)).toBe(0)
      // The first line says how the instance is set up (never a secret), the last that it stopped.
      const lines = linesOf(service.output())
      expect(lines[0]).toMatchObject({
        msg: "starting",
        database: `pglite (${dataDir})`,
        admin_api: "on",
        rate_limits: "database",
        signup: "open",
        public_url: "unset",
        telemetry: "off",
        listen: expect.stringMatching(/^127\.0\.0\.1:\d+$/)
      })
      expect(service.output()).not.toContain("adm\"")
      expect(lines.at(-1)).toMatchObject({ msg: "stopped", level: "info" })
    } finally {
      await receiver.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 60_000)
})
