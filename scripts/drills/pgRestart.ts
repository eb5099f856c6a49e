/**
 * PostgreSQL restarted under load, on a throwaway cluster: the service must say 503 while the
 * database is gone, recover by itself, lose no 201, and have its workers and its key cache woken by
 * notifications again afterwards (not merely by polling).
 */
import { createCluster } from "../lib/Cluster.js"
import { arrival, call, clientOf, listen } from "../../test/support/Harness.js"
import {
  ADMIN_TOKEN,
  type Database,
  eventIds,
  expectStatus,
  freshDatabase,
  isRecord,
  logTally,
  marketIntent,
  percentiles,
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

const CLIENTS = 10
const LOAD_BEFORE_MS = 2_000
const DOWN_MS = 5_000
const RECOVERY_TIMEOUT_MS = 15_000
const LOAD_AFTER_MS = 2_000
const CONVERGE_TIMEOUT_MS = 45_000
const PROBES = 10
/** Every instance listens again within this long after the database is back. */
const RELISTEN_TIMEOUT_MS = 15_000
/** Longer than a probe's interval and timeout (2 s + 3 s): streams that keep failing show. */
const QUIET_MS = 6_000
// Claims cut short by the outage are taken over after the lease: shorter than the defaults, so
// the drill does not wait half a minute for them.
const ENV = { ROUTING_LEASE: "5s", WEBHOOK_LEASE: "5s" }

type Phase = "before" | "down" | "after"

const health = async (service: Service) => {
  try {
    const response = await fetch(`${service.baseUrl}/healthz`, { signal: AbortSignal.timeout(3_000) })
    const text = await response.text()
    let body: unknown = null
    try {
      body = JSON.parse(text)
    } catch {
      // not JSON: reported as such
    }
    return { status: response.status, body }
  } catch {
    return { status: 0, body: null }
  }
}

export const pgRestart: Drill = {
  name: "pg-restart",
  description: "PostgreSQL restarted under load: 503 while down, recovers alone, no 201 lost, workers and key cache woken again",
  run: async (log) => {
    const cluster = await createCluster()
    const receiver = await listen(() => 204)
    const services: Array<Service> = []
    // The outage makes both instances log every failed request: counted, printed as a summary.
    const logs = logTally()
    try {
      const database: Database = await freshDatabase(cluster.adminUrl, "tir_drill")
      // Two instances: the second tells whether revocations still reach another instance's cache.
      const start = async (label: string) => {
        const service = await startHealthy(database.url, ENV, label, [], logs.onLine)
        services.push(service)
        return service
      }
      const [one, two] = await Promise.all([start("pg-restart-1"), start("pg-restart-2")])
      const user = await provision(one.baseUrl)
      await subscribe(one.baseUrl, user.userId, receiver.url)

      const create = async (service: Service, intentId: string) =>
        request(`${service.baseUrl}/api/v1/intents`, user.apiKey, { method: "POST", body: marketIntent(intentId, user.brokerId) })

      /** Create → filled, polling GET: how long routing takes. */
      const fillTimes = async (label: string) => {
        const times: Array<number> = []
        for (let i = 0; i < PROBES; i++) {
          const service = i % 2 === 0 ? one : two
          const started = performance.now()
          const id = stringField(expectStatus(`create ${label}-${i}`, await create(service, `${label}-${i}`), 201), "id")
          await waitFor(
            async () => stringField(expectStatus("GET", await request(`${service.baseUrl}/api/v1/intents/${id}`, user.apiKey), 200), "status") === "filled",
            `intent ${id} filled`,
            10_000,
            10
          )
          times.push(performance.now() - started)
        }
        return percentiles(times)
      }
      const baseline = await fillTimes("baseline")
      // The LISTEN connections, one per instance (its last statement a LISTEN or an UNLISTEN).
      const listeners = async () =>
        Number(
          (await psqlColumn(
            database.url,
            `SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND query ~ '^(UN)?LISTEN ' AND pid <> pg_backend_pid()`
          ))[0]
        )
      await waitFor(async () => (await listeners()) === services.length, "a LISTEN connection per instance", 5_000)

      let phase: Phase = "before"
      let recoveredAt = 0
      const created = new Map<string, Phase>()
      const failures = { before: 0, down: 0, after: 0 }
      const statuses = new Map<string, number>()
      const unexpected = new Map<number, number>()
      const load = startLoad(CLIENTS, async (index) => {
        const at = phase
        try {
          const response = await create(index % 2 === 0 ? one : two, `load-${index}`)
          statuses.set(`${at} ${response.status}`, (statuses.get(`${at} ${response.status}`) ?? 0) + 1)
          if (response.status === 201) created.set(stringField(response.body, "id"), at)
          else failures[at]++
          // A database that does not answer is a 503 the client can retry, never a 500.
          const unavailable = response.status === 503 && isRecord(response.body) &&
            response.body["error_code"] === "service_unavailable"
          if (response.status !== 201 && !unavailable) {
            unexpected.set(response.status, (unexpected.get(response.status) ?? 0) + 1)
          }
        } catch {
          failures[at]++
          statuses.set(`${at} no answer`, (statuses.get(`${at} no answer`) ?? 0) + 1)
        }
        if (phase === "down") await sleep(50) // no tight loop of instant failures
      })

      try {
        await sleep(LOAD_BEFORE_MS)
        phase = "down"
        await cluster.stop()
        const downAt = performance.now()
        const seen = new Map<number, number>()
        let errorBody: unknown = undefined
        while (performance.now() - downAt < DOWN_MS) {
          for (const service of services) {
            const answer = await health(service)
            seen.set(answer.status, (seen.get(answer.status) ?? 0) + 1)
            if (answer.status === 503) errorBody = answer.body
          }
          await sleep(200)
        }
        log(`/healthz while down: ${[...seen].map(([status, n]) => `${n}× ${status === 0 ? "no answer" : status}`).join(", ")}`)
        check(seen.has(503), "/healthz never answered 503 while the database was down")
        check(
          isRecord(errorBody) && errorBody.error_code === "service_unavailable" && typeof errorBody.detail === "string" &&
            typeof errorBody.request_id === "string",
          `/healthz 503 without the error body: ${JSON.stringify(errorBody)}`
        )
        check(!seen.has(200), "/healthz answered 200 while the database was down")

        await cluster.start()
        const upAt = performance.now()
        recoveredAt = upAt
        await waitFor(
          async () => (await Promise.all(services.map(health))).every((answer) => answer.status === 200),
          "/healthz 200 on both instances after PostgreSQL came back",
          RECOVERY_TIMEOUT_MS,
          100
        )
        const healthyIn = performance.now() - upAt
        phase = "after"
        const afterAt = performance.now()
        let firstCreatedIn: number | undefined
        await waitFor(
          async () => {
            if ([...created.values()].includes("after")) firstCreatedIn ??= performance.now() - upAt
            return performance.now() - afterAt > LOAD_AFTER_MS
          },
          "load after recovery",
          LOAD_AFTER_MS + 5_000,
          20
        )
        log(
          `down ${((upAt - downAt) / 1000).toFixed(1)} s; /healthz 200 ${(healthyIn / 1000).toFixed(1)} s after the restart, ` +
            `first 201 ${firstCreatedIn === undefined ? "never" : `${(firstCreatedIn / 1000).toFixed(1)} s`} after it`
        )
      } finally {
        await load.stop()
      }
      const count = (at: Phase) => [...created.values()].filter((p) => p === at).length
      log(
        `201s before/during/after the outage: ${count("before")}/${count("down")}/${count("after")}; ` +
          `failed requests ${failures.before}/${failures.down}/${failures.after}`
      )
      log(`answers: ${[...statuses].map(([what, n]) => `${what}: ${n}`).join(", ")}`)
      check(count("before") > 0, "no 201 before the outage")
      check(count("after") > 0, "no 201 after the recovery")
      check(failures.after === 0, `${failures.after} create requests failed after the recovery`)
      check(
        unexpected.size === 0,
        `creates answered other than 201 or 503 service_unavailable: ${[...unexpected].map(([status, n]) => `${n}× ${status}`).join(", ")}`
      )

      // Workers and key caches listen again: the LISTEN connections died with the server; without
      // new ones the workers only poll (every second) and revocations no longer reach other instances.
      await waitFor(
        async () => (await listeners()) === services.length,
        `a LISTEN connection per instance again (${await listeners()} now)`,
        RELISTEN_TIMEOUT_MS,
        250
      )
      log(`LISTEN connections back ${((performance.now() - recoveredAt) / 1000).toFixed(1)} s after the restart`)
      // From now on the LISTEN streams must stay up: their probes keep coming back.
      const lost = () => logs.count("notifications lost") + logs.count("revocations not received")
      const lostAtRecovery = lost()
      const quietSince = performance.now()
      const recovered = await fillTimes("recovered")
      log(
        `create → filled p50/max: ${baseline.p50.toFixed(0)}/${baseline.max.toFixed(0)} ms before, ` +
          `${recovered.p50.toFixed(0)}/${recovered.max.toFixed(0)} ms after the restart (polling alone: about 1 s)`
      )
      const recentArrivals = receiver.received.map(arrival).filter((a) => a.type === "intent.filled").slice(-PROBES)
      const webhookLatency = percentiles(recentArrivals.map((a) => a.at - a.createdAt))
      log(`filled event → receiver p50/max after the restart: ${webhookLatency.p50}/${webhookLatency.max} ms`)

      // Key cache: a key used on instance two, revoked through instance one, is refused by two at once.
      const { admin } = await clientOf(one.baseUrl, ADMIN_TOKEN)
      const key = await call(admin.createApiKey({
        path: { user_id: user.userId },
        payload: { name: "revoked in the drill", mode: "test" }
      }))
      const secret = key.key
      await waitFor(
        async () => (await request(`${two.baseUrl}/api/v1/intents`, secret)).status === 200,
        "new key accepted on instance two",
        5_000
      )
      for (let i = 0; i < 3; i++) await request(`${two.baseUrl}/api/v1/intents`, secret)
      await call(admin.revokeApiKey({ path: { key_id: key.id } }))
      const revokedAt = performance.now()
      await waitFor(
        async () => (await request(`${two.baseUrl}/api/v1/intents`, secret)).status === 401,
        "revoked key refused by the other instance",
        2_000,
        20
      )
      log(`revoked key refused by the other instance after ${(performance.now() - revokedAt).toFixed(0)} ms`)

      // No 201 lost: each is there and filled; every event (before, during, after) delivered.
      const ids = [...created.keys()]
      const converged = performance.now()
      await waitFor(
        async () => Number((await psqlColumn(database.url, "SELECT count(*) FROM intents WHERE status <> 'filled'"))[0]) === 0,
        "every intent filled after the restart",
        CONVERGE_TIMEOUT_MS,
        250
      )
      await runClients(ids.length, 10, async (index) => {
        const id = ids[index] ?? ""
        const body = expectStatus(`GET intent ${id} (201'd ${created.get(id)} the outage)`, await request(`${one.baseUrl}/api/v1/intents/${id}`, user.apiKey), 200)
        check(stringField(body, "status") === "filled", `intent ${id}: ${stringField(body, "status")}, not filled`)
      })
      const undelivered = async () => {
        const received = new Set(receiver.received.map((request) => arrival(request).id))
        return (await eventIds(database.url, user.userId)).filter((id) => !received.has(id))
      }
      await waitFor(async () => (await undelivered()).length === 0, "every event delivered", CONVERGE_TIMEOUT_MS, 250).catch(
        async (error: unknown) => {
          throw new Error(`${error instanceof Error ? error.message : String(error)}: ${(await undelivered()).length} missing`)
        }
      )
      const events = await eventIds(database.url, user.userId)
      await sleep(QUIET_MS - (performance.now() - quietSince))
      check(
        lost() === lostAtRecovery,
        `LISTEN streams failed ${lost() - lostAtRecovery} times after the recovery (probes not coming back?)`
      )
      log(
        `${ids.length} intents 201'd under load, all filled; ${events.length} events, ${receiver.received.length} deliveries; ` +
          `converged ${((performance.now() - converged) / 1000).toFixed(1)} s after the checks began`
      )
    } finally {
      for (const line of logs.summary()) log(`service log: ${line}`)
      for (const service of services) await stopService(service.child, "SIGKILL")
      await receiver.close()
      await cluster.remove()
    }
  }
}
