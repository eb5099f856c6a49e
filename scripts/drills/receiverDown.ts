/**
 * A webhook receiver down for a while (its port closed: connections refused) while intents are
 * created: once it is back on the same port, every event must arrive and every delivery be
 * `succeeded`.
 */
import { arrival, call, clientOf, listen } from "../../test/support/Harness.js"
import {
  adminUrl,
  dropDatabase,
  eventIds,
  freshDatabase,
  logTally,
  marketIntent,
  provision,
  psqlColumn,
  type Service,
  sleep,
  startHealthy,
  stopService,
  subscribe,
  waitFor
} from "../lib/Service.js"
import { check, type Drill } from "./Drill.js"

const RETRY_SCHEDULE = "1s,2s,4s,8s,8s,8s,8s"
const INTENTS = 30
const DOWN_MS = 12_000
const DRAIN_TIMEOUT_MS = 30_000

export const receiverDown: Drill = {
  name: "receiver-down",
  description: `webhook receiver's port closed for ${DOWN_MS / 1000} s under creates, then back: every event delivered`,
  run: async (log) => {
    const admin = adminUrl()
    const database = await freshDatabase(admin, "tir_drill")
    const receiver = await listen(() => 204)
    let service: Service | undefined
    const logs = logTally()
    try {
      service = await startHealthy(database.url, { WEBHOOK_RETRY_SCHEDULE: RETRY_SCHEDULE }, "receiver-down", [], logs.onLine)
      const { baseUrl } = service
      const user = await provision(baseUrl)
      const endpointId = await subscribe(baseUrl, user.userId, receiver.url)

      await receiver.close()
      const downAt = performance.now()
      const refused = await fetch(receiver.url, { method: "POST", body: "{}" }).then(() => false, () => true)
      check(refused, "the receiver's port still accepts connections after stop()")

      // Intents spread over the outage, so that deliveries sit at different points of the schedule.
      const { intents } = await clientOf(baseUrl, user.apiKey)
      for (let i = 0; i < INTENTS; i++) {
        await call(intents.createIntent({ payload: marketIntent(`down-${i}`, user.brokerId) }))
        await sleep((DOWN_MS - 1_000) / INTENTS)
      }
      await sleep(Math.max(0, DOWN_MS - (performance.now() - downAt)))

      const events = await eventIds(database.url, user.userId)
      check(events.length === 2 * INTENTS, `${events.length} events for ${INTENTS} intents (filled while the receiver was down?)`)
      check(receiver.received.length === 0, `${receiver.received.length} events arrived while the port was closed`)
      const [failedWhileDown, attemptErrors] = await psqlColumn(
        database.url,
        `SELECT count(*) FROM webhook_attempts WHERE status_code IS NULL
         UNION ALL SELECT count(DISTINCT error) FROM webhook_attempts WHERE status_code IS NULL`
      )
      const errorSample = await psqlColumn(database.url, "SELECT DISTINCT error FROM webhook_attempts LIMIT 1")
      log(
        `down ${((performance.now() - downAt) / 1000).toFixed(1)} s: ${INTENTS} intents, ${events.length} events, ` +
          `${failedWhileDown} failed attempts (${attemptErrors} distinct errors, e.g. "${errorSample[0] ?? ""}")`
      )
      check(Number(failedWhileDown) >= events.length, "not every delivery was attempted while the receiver was down")
      const stillPending = await psqlColumn(
        database.url,
        `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = '${endpointId}' AND status = 'pending'`
      )
      check(Number(stillPending[0]) === events.length, `${stillPending[0]} of ${events.length} deliveries pending, not all`)

      await receiver.reopen()
      const upAt = performance.now()
      const undelivered = () => {
        const received = new Set(receiver.received.map((request) => arrival(request).id))
        return events.filter((id) => !received.has(id))
      }
      await waitFor(async () => undelivered().length === 0, "every event delivered after the receiver came back", DRAIN_TIMEOUT_MS, 50)
        .catch((error: unknown) => {
          throw new Error(`${error instanceof Error ? error.message : String(error)}: ${undelivered().length} missing`)
        })
      const drainedIn = performance.now() - upAt

      // The database agrees: every delivery succeeded, none failed, the events are the same.
      await waitFor(
        async () =>
          Number(
            (await psqlColumn(
              database.url,
              `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = '${endpointId}' AND status <> 'succeeded'`
            ))[0]
          ) === 0,
        "deliveries recorded as succeeded",
        5_000
      )
      const [deliveries, attempts, maxAttempts] = await psqlColumn(
        database.url,
        `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = '${endpointId}'
         UNION ALL SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
                   WHERE d.endpoint_id = '${endpointId}'
         UNION ALL SELECT max(attempts) FROM webhook_deliveries WHERE endpoint_id = '${endpointId}'`
      )
      check(Number(deliveries) === events.length, `${deliveries} deliveries for ${events.length} events`)
      const again = await eventIds(database.url, user.userId)
      check(again.length === events.length, `${again.length - events.length} events appeared after the outage`)
      const lastArrival = Math.max(...receiver.received.map((a) => a.at))
      log(
        `back on port ${receiver.port}: all ${events.length} events arrived in ${(drainedIn / 1000).toFixed(1)} s ` +
          `(${receiver.received.length} deliveries, ${receiver.received.length - new Set(receiver.received.map((request) => arrival(request).id)).size} duplicates); ` +
          `${deliveries} deliveries succeeded after ${attempts} attempts (at most ${maxAttempts} for one)`
      )
      check(lastArrival > 0, "no arrival")
      const lost = logs.count("notifications lost") + logs.count("revocations not received")
      check(lost === 0, `the service lost its LISTEN streams ${lost} times with the database up`)
    } finally {
      for (const line of logs.summary()) log(`service log: ${line}`)
      if (service !== undefined) await stopService(service.child, "SIGKILL")
      await receiver.close()
      await dropDatabase(admin, database.name)
    }
  }
}
