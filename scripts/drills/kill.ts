/**
 * SIGKILL under load: the service dies with create requests in flight and starts again on the same
 * database. Every intent that got a 201 must be there, filled by exactly one broker order, and every
 * event must reach the webhook receiver.
 */
import { startReceiver } from "../lib/Receiver.js"
import {
  adminUrl,
  dropDatabase,
  eventIds,
  expectStatus,
  freshDatabase,
  logTally,
  marketIntent,
  provision,
  psqlColumn,
  request,
  runClients,
  type Service,
  sleep,
  startHealthy,
  startLoad,
  stopService,
  stringField,
  subscribe,
  waitFor
} from "../lib/Service.js"
import { check, type Drill } from "./Drill.js"

const CLIENTS = 20
const LOAD_MS = 3_000
const CONVERGE_TIMEOUT_MS = 60_000

export const kill: Drill = {
  name: "kill",
  description: "SIGKILL with creates in flight, restart: every 201 filled once, every event delivered",
  run: async (log) => {
    const admin = adminUrl()
    const database = await freshDatabase(admin, "tir_drill")
    const receiver = await startReceiver()
    const services: Array<Service> = []
    const logs = logTally()
    try {
      const first = await startHealthy(database.url, {}, "kill", [], logs.onLine)
      services.push(first)
      const user = await provision(first.baseUrl)
      await subscribe(first.baseUrl, user.userId, receiver.url)

      const created = new Map<string, string>() // our id → intent_id
      const unanswered: Array<string> = []
      const refused: Array<string> = []
      const load = startLoad(CLIENTS, async (index) => {
        const intentId = `kill-${index}`
        try {
          const response = await request(`${first.baseUrl}/api/v1/intents`, user.apiKey, {
            method: "POST",
            body: marketIntent(intentId, user.brokerId)
          })
          if (response.status === 201) created.set(stringField(response.body, "id"), intentId)
          else refused.push(`${response.status} ${JSON.stringify(response.body)}`)
        } catch {
          unanswered.push(intentId)
        }
      })
      await sleep(LOAD_MS)
      const inFlight = load.inFlight()
      const stopping = load.stop() // no new requests; those in flight die with the process
      await stopService(first.child, "SIGKILL")
      const killedAt = performance.now()
      await stopping
      log(`${created.size} intents 201'd in ${LOAD_MS / 1000} s by ${CLIENTS} clients; ${inFlight} in flight at the kill`)
      check(refused.length === 0, `requests refused before the kill: ${refused.slice(0, 3).join("; ")}`)
      check(created.size > 0, "no intent was created before the kill")

      const second = await startHealthy(database.url, {}, "kill-restarted", [], logs.onLine)
      services.push(second)
      const restartedIn = performance.now() - killedAt

      const pendingIntents = async () =>
        Number((await psqlColumn(database.url, "SELECT count(*) FROM intents WHERE status <> 'filled'"))[0])
      const undelivered = async () => {
        const received = receiver.received()
        return (await eventIds(database.url, user.userId)).filter((id) => !received.has(id))
      }
      await waitFor(
        async () => (await pendingIntents()) === 0 && (await undelivered()).length === 0,
        `intents filled and events delivered after the restart (${await pendingIntents()} intents not filled)`,
        CONVERGE_TIMEOUT_MS,
        250
      ).catch(async (error: unknown) => {
        const missing = await undelivered()
        throw new Error(`${error instanceof Error ? error.message : String(error)}; ${missing.length} events undelivered`)
      })
      const convergedIn = performance.now() - killedAt

      // Every 201 is there and filled, as the API shows it.
      const ids = [...created.keys()]
      await runClients(ids.length, 20, async (index) => {
        const id = ids[index] ?? ""
        const body = expectStatus(
          `GET intent ${id} (201'd before the kill)`,
          await request(`${second.baseUrl}/api/v1/intents/${id}`, user.apiKey),
          200
        )
        check(stringField(body, "status") === "filled", `intent ${id}: ${stringField(body, "status")}, not filled`)
      })

      // One order per intent, in our table and at the broker.
      const stored = await psqlColumn(database.url, "SELECT count(*) FROM intents")
      const intents = Number(stored[0])
      const notOneOrder = await psqlColumn(
        database.url,
        `SELECT i.id || ': ' || count(o.id) FROM intents i LEFT JOIN orders o ON o.intent_id = i.id
         GROUP BY i.id HAVING count(o.id) <> 1`
      )
      check(notOneOrder.length === 0, `intents without exactly one order: ${notOneOrder.slice(0, 5).join(", ")}`)
      const [brokerOrders, resubmitted] = await psqlColumn(
        database.url,
        "SELECT count(*) FROM mock_broker_orders UNION ALL SELECT count(*) FROM mock_broker_orders WHERE submissions > 1"
      )
      check(Number(brokerOrders) === intents, `${brokerOrders} orders at the broker for ${intents} intents`)

      // One created and one filled event per intent, each received.
      const badEvents = await psqlColumn(
        database.url,
        `SELECT i.id FROM intents i
         WHERE (SELECT count(*) FROM events e WHERE e.intent_id = i.id AND e.type = 'intent.created') <> 1
            OR (SELECT count(*) FROM events e WHERE e.intent_id = i.id AND e.type = 'intent.filled') <> 1`
      )
      check(badEvents.length === 0, `intents without one created and one filled event: ${badEvents.slice(0, 5).join(", ")}`)
      const events = await eventIds(database.url, user.userId)
      check(events.length === 2 * intents, `${events.length} events for ${intents} intents`)
      const known = new Set(events)
      const strangers = [...receiver.received()].filter((id) => !known.has(id))
      check(strangers.length === 0, `received events that are not in the database: ${strangers.slice(0, 5).join(", ")}`)
      const types = new Map<string, Set<string>>()
      for (const arrival of receiver.arrivals) {
        types.set(arrival.intentId, (types.get(arrival.intentId) ?? new Set()).add(arrival.type))
      }
      const incomplete = ids.filter((id) => !types.get(id)?.has("intent.created") || !types.get(id)?.has("intent.filled"))
      check(incomplete.length === 0, `201'd intents missing a created or filled delivery: ${incomplete.slice(0, 5).join(", ")}`)

      log(
        `${intents} intents stored (${intents - created.size} of the ${unanswered.length} unanswered ones committed), ` +
          `all filled; ${brokerOrders} broker orders, ${resubmitted} submitted more than once`
      )
      log(
        `${events.length} events, ${receiver.arrivals.length} deliveries ` +
          `(${receiver.arrivals.length - known.size} duplicates)`
      )
      const lost = logs.count("notifications lost") + logs.count("revocations not received")
      check(lost === 0, `the service lost its LISTEN streams ${lost} times with the database up`)
      log(
        `healthy again ${(restartedIn / 1000).toFixed(1)} s after the kill; ` +
          `converged ${(convergedIn / 1000).toFixed(1)} s after the kill`
      )
    } finally {
      for (const line of logs.summary()) log(`service log: ${line}`)
      for (const service of services) await stopService(service.child, "SIGKILL")
      await receiver.close()
      await dropDatabase(admin, database.name)
    }
  }
}
