/**
 * Three instances on one PostgreSQL, every kind of load spread round-robin over them: per-key rate
 * limits and the monthly quota hold globally (counts in the database, then in Redis), each intent
 * is routed and submitted once, and each event reaches each of two endpoints once.
 */
import { randomBytes } from "node:crypto"
import { readFile } from "node:fs/promises"
import { startReceiver } from "../lib/Receiver.js"
import {
  ADMIN_TOKEN,
  adminUrl,
  dropDatabase,
  expectStatus,
  freshDatabase,
  marketIntent,
  percentiles,
  type Provisioned,
  provision,
  psqlColumn,
  request,
  run,
  runClients,
  type Service,
  sleep,
  startHealthy,
  stopService,
  stringField,
  subscribe,
  waitFor
} from "../lib/Service.js"
import { check, type Drill } from "./Drill.js"

const INSTANCES = 3
const CLIENTS = 20
const USERS = 4
const INTENTS = 1_200
/** Free keys (60 a minute) hit at once, each with three times its limit. */
const LIMITED_KEYS = 4
const FREE_PER_MINUTE = 60
const QUOTA = 50
const QUOTA_ATTEMPTS = 200
const REDIS_URL = process.env.REDIS_URL || "redis://127.0.0.1:6379"

const count = async (url: string, query: string) => Number((await psqlColumn(url, query))[0])

/** Starts the instances together; those that did start are in `into` even when one fails. */
const startInstances = async (into: Array<Service>, url: string, env: Record<string, string>, label: string) => {
  const results = await Promise.allSettled(
    Array.from({ length: INSTANCES }, (_, i) => startHealthy(url, env, `${label}-${i}`))
  )
  const started = results.flatMap((result) => result.status === "fulfilled" ? [result.value] : [])
  into.push(...started)
  const failed = results.find((result): result is PromiseRejectedResult => result.status === "rejected")
  if (failed !== undefined) throw failed.reason
  return started
}

/** SIGTERM to each; each must drain and exit 0. */
const stopInstances = async (instances: ReadonlyArray<Service>) => {
  await Promise.all(instances.map((instance) => stopService(instance.child)))
  const codes = instances.map((instance) => instance.child.exitCode ?? instance.child.signalCode)
  check(codes.every((code) => code === 0), `instances did not exit 0 on SIGTERM: ${codes.join(", ")}`)
}

/** CPU seconds a process has used so far (Linux `/proc`); undefined elsewhere. */
const cpuSeconds = async (pid: number | undefined, ticksPerSecond: number) => {
  if (pid === undefined) return undefined
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined)
  // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
  const fields = stat?.slice(stat.lastIndexOf(")") + 2).split(" ")
  return fields === undefined ? undefined : (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
}

const adminPost = async (baseUrl: string, path: string, body: unknown) =>
  expectStatus(
    `POST /admin/v1${path}`,
    await request(`${baseUrl}/admin/v1${path}`, ADMIN_TOKEN, { method: "POST", body }),
    201
  )

/** Counts are per UTC minute: a burst must fall in one window, so it waits out a minute's last 15 s. */
const awayFromMinuteEdge = async () => {
  const intoMinute = Date.now() % 60_000
  if (intoMinute > 45_000) await sleep(60_000 - intoMinute + 100)
}

/** `LIMITED_KEYS` free keys, each sent three times its limit at once, interleaved over the instances. */
const rateLimits = async (instances: ReadonlyArray<Service>, store: string, log: (line: string) => void) => {
  const keys = await Promise.all(
    Array.from({ length: LIMITED_KEYS }, (_, i) =>
      provision(instances[i % instances.length]!.baseUrl, { tier: "free", requests_per_minute: FREE_PER_MINUTE }))
  )
  await awayFromMinuteEdge()
  const total = LIMITED_KEYS * 3 * FREE_PER_MINUTE
  const started = performance.now()
  const replies = await Promise.all(
    Array.from({ length: total }, async (_, i) => {
      const key = i % LIMITED_KEYS
      const response = await fetch(`${instances[i % instances.length]!.baseUrl}/api/v1/intents?page_size=1`, {
        headers: { authorization: `Bearer ${keys[key]!.apiKey}` },
        signal: AbortSignal.timeout(30_000)
      })
      const body: unknown = await response.json()
      return {
        key,
        status: response.status,
        remaining: response.headers.get("x-ratelimit-remaining"),
        reset: response.headers.get("x-ratelimit-reset"),
        errorCode: response.status === 429 ? stringField(body, "error_code") : undefined
      }
    })
  )
  const seconds = (performance.now() - started) / 1000
  check(new Set(replies.map((r) => r.reset)).size === 1, `${store}: the burst straddled two rate-limit windows; run again`)
  const unexpected = replies.filter((r) => r.status !== 200 && !(r.status === 429 && r.errorCode === "rate_limit_exceeded"))
  check(unexpected.length === 0, `${store}: answers other than 200 and 429 rate_limit_exceeded: ${unexpected.slice(0, 3).map((r) => r.status).join(", ")}`)
  for (let key = 0; key < LIMITED_KEYS; key++) {
    const admitted = replies.filter((r) => r.key === key && r.status === 200)
    check(admitted.length === FREE_PER_MINUTE, `${store}: key ${key} had ${admitted.length} requests admitted, not ${FREE_PER_MINUTE}`)
    const places = new Set(admitted.map((r) => r.remaining))
    check(places.size === FREE_PER_MINUTE, `${store}: key ${key}'s admitted requests share places in the count (${places.size} distinct)`)
  }
  log(
    `limits, counts in ${store}: ${LIMITED_KEYS} free keys × ${3 * FREE_PER_MINUTE} requests at once over three instances ` +
      `(${total} in ${seconds.toFixed(1)} s) → exactly ${FREE_PER_MINUTE} admitted per key, the rest 429`
  )
}

/** `QUOTA_ATTEMPTS` live creations at once against a monthly quota of `QUOTA`, over the instances. */
const monthlyQuota = async (instances: ReadonlyArray<Service>, url: string, store: string, log: (line: string) => void) => {
  const base = instances[0]!.baseUrl
  const userId = stringField(
    await adminPost(base, "/users", { name: "quota", tier: "enterprise", requests_per_minute: 1_000_000, intents_per_month: QUOTA }),
    "id"
  )
  const key = stringField(await adminPost(base, `/users/${userId}/api-keys`, { name: "live", mode: "live" }), "key")
  const brokerId = stringField(
    await adminPost(base, `/users/${userId}/brokers`, {
      name: "alpaca",
      kind: "alpaca",
      mode: "live",
      credentials: { api_key_id: "AKID", api_secret_key: "not-a-secret" }
    }),
    "id"
  )
  const replies = await Promise.all(
    Array.from({ length: QUOTA_ATTEMPTS }, (_, i) =>
      request(`${instances[i % instances.length]!.baseUrl}/api/v1/intents`, key, {
        method: "POST",
        body: marketIntent(`live-${i}`, brokerId)
      }))
  )
  const created = replies.filter((r) => r.status === 201).length
  const refused = replies.filter((r) => r.status === 429 && stringField(r.body, "error_code") === "quota_exceeded").length
  check(created === QUOTA, `${store}: ${created} live intents created against a quota of ${QUOTA}`)
  check(refused === QUOTA_ATTEMPTS - QUOTA, `${store}: ${refused} quota_exceeded answers, not ${QUOTA_ATTEMPTS - QUOTA}`)
  const stored = await count(url, `SELECT count(*) FROM intents WHERE user_id = '${userId}' AND mode = 'live'`)
  const used = await count(url, `SELECT sum(count) FROM intent_usage WHERE user_id = '${userId}'`)
  check(stored === QUOTA && used === QUOTA, `${store}: ${stored} live intents stored, ${used} counted, quota ${QUOTA}`)
  log(`quota: ${QUOTA_ATTEMPTS} live creations at once over three instances against ${QUOTA} a month → exactly ${QUOTA} created`)
}

export const scaleOut: Drill = {
  name: "scale-out",
  description: "three instances on one database, load spread: limits and quotas global, each intent routed once, each event delivered once per endpoint",
  run: async (log) => {
    const admin = adminUrl()
    const database = await freshDatabase(admin, "tir_drill")
    const url = database.url
    const services: Array<Service> = []
    const receivers: Array<Awaited<ReturnType<typeof startReceiver>>> = []
    try {
      receivers.push(await startReceiver(), await startReceiver())
      const env = { CREDENTIALS_KEY: randomBytes(32).toString("hex"), ROUTING_RETRY_SCHEDULE: "50ms" }
      const booted = performance.now()
      const instances = await startInstances(services, url, env, "scale")
      log(`three instances started together on a fresh database, all healthy in ${((performance.now() - booted) / 1000).toFixed(1)} s`)

      const ticks = Number((await run("getconf", ["CLK_TCK"]).catch(() => ({ stdout: "100" }))).stdout.trim()) || 100
      const cpuBefore = await Promise.all(instances.map((instance) => cpuSeconds(instance.child.pid, ticks)))

      // Routing and webhooks: USERS users, each subscribed with both receivers; CLIENTS clients.
      const users: Array<Provisioned> = []
      for (let i = 0; i < USERS; i++) {
        const base = instances[i % instances.length]!.baseUrl
        const user = await provision(base)
        for (const receiver of receivers) await subscribe(base, user.userId, receiver.url)
        users.push(user)
      }
      const latencies: Array<Array<number>> = instances.map(() => [])
      const postStarted = performance.now()
      await runClients(INTENTS, CLIENTS, async (i, signal) => {
        const instance = i % instances.length
        const user = users[i % USERS]!
        const sent = performance.now()
        const response = await request(`${instances[instance]!.baseUrl}/api/v1/intents`, user.apiKey, {
          method: "POST",
          body: marketIntent(`scale-${i}`, user.brokerId),
          signal
        })
        expectStatus(`POST intent ${i} to instance ${instance}`, response, 201)
        latencies[instance]!.push(performance.now() - sent)
      })
      const posted = performance.now()
      const postSeconds = (posted - postStarted) / 1000
      log(`${INTENTS} market intents POSTed by ${CLIENTS} clients over three instances in ${postSeconds.toFixed(1)} s: ${(INTENTS / postSeconds).toFixed(0)} intents/s`)
      latencies.forEach((values, i) => {
        const { p50, p95 } = percentiles(values)
        log(`  instance ${i}: ${values.length} POSTs (${((100 * values.length) / INTENTS).toFixed(0)}%), p50 ${p50.toFixed(0)} ms, p95 ${p95.toFixed(0)} ms`)
      })

      const userList = users.map((user) => `'${user.userId}'`).join(", ")
      await waitFor(
        async () => (await count(url, `SELECT count(*) FROM intents WHERE user_id IN (${userList}) AND status = 'filled'`)) === INTENTS,
        "every intent filled",
        120_000
      )
      const filled = performance.now()
      const events = await count(url, `SELECT count(*) FROM events WHERE user_id IN (${userList})`)
      check(events === 2 * INTENTS, `${events} events for ${INTENTS} intents; one created and one filled each`)
      const deliveries = receivers.length * events
      await waitFor(
        async () => (await count(url, "SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'")) === deliveries,
        `${deliveries} deliveries succeeded`,
        120_000
      )
      const delivered = performance.now()
      log(`all filled ${((filled - posted) / 1000).toFixed(1)} s after the last 201; all ${deliveries} deliveries (${events} events × 2 endpoints) done ${((delivered - posted) / 1000).toFixed(1)} s after it`)
      const cpuAfter = await Promise.all(instances.map((instance) => cpuSeconds(instance.child.pid, ticks)))
      const cpu = cpuAfter.map((after, i) => {
        const before = cpuBefore[i]
        return after === undefined || before === undefined ? undefined : after - before
      })
      if (cpu.every((seconds) => seconds !== undefined)) {
        const sum = cpu.reduce<number>((total, seconds) => total + (seconds ?? 0), 0)
        log(`CPU of the three over the run (HTTP, routing, delivery): ${cpu.map((s) => `${(s ?? 0).toFixed(1)} s (${((100 * (s ?? 0)) / sum).toFixed(0)}%)`).join(", ")}`)
      }

      // Each intent routed once: one order each, in our records and at the broker, submitted once.
      const [intents, brokerOrders, resubmitted, orders, orderedIntents, fills] = await Promise.all([
        count(url, `SELECT count(*) FROM intents WHERE user_id IN (${userList})`),
        count(url, "SELECT count(*) FROM mock_broker_orders"),
        count(url, "SELECT count(*) FROM mock_broker_orders WHERE submissions <> 1"),
        count(url, "SELECT count(*) FROM orders"),
        count(url, "SELECT count(DISTINCT intent_id) FROM orders"),
        count(url, "SELECT count(*) FROM fills")
      ])
      check(intents === INTENTS, `${intents} intents stored, ${INTENTS} created`)
      check(brokerOrders === INTENTS, `${brokerOrders} orders at the broker for ${INTENTS} intents`)
      check(resubmitted === 0, `${resubmitted} broker orders submitted more than once`)
      check(orders === INTENTS && orderedIntents === INTENTS, `${orders} orders for ${orderedIntents} of ${INTENTS} intents`)
      check(fills === INTENTS, `${fills} fills for ${INTENTS} market intents`)
      log(`routing: ${INTENTS} intents, ${brokerOrders} broker orders, ${orders} orders, ${fills} fills, none submitted twice`)

      await rateLimits(instances, "the database", log)
      await monthlyQuota(instances, url, "the database", log)

      // A graceful stop lets deliveries in flight finish: a duplicate would have arrived by now.
      await stopInstances(instances)
      const [rows, pairs, retried, pending] = await Promise.all([
        count(url, "SELECT count(*) FROM webhook_deliveries"),
        count(url, "SELECT count(DISTINCT (endpoint_id, event_id)) FROM webhook_deliveries"),
        count(url, "SELECT count(*) FROM webhook_deliveries WHERE attempts <> 1"),
        count(url, "SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded'")
      ])
      check(rows === deliveries && pairs === deliveries, `${rows} delivery rows, ${pairs} (endpoint, event) pairs, ${deliveries} expected`)
      check(retried === 0 && pending === 0, `${retried} deliveries took other than one attempt, ${pending} not succeeded`)
      const eventIds = new Set(await psqlColumn(url, `SELECT id FROM events WHERE user_id IN (${userList})`))
      receivers.forEach((receiver, i) => {
        const received = receiver.arrivals.map((arrival) => arrival.id)
        const distinct = new Set(received)
        const missing = [...eventIds].filter((id) => !distinct.has(id))
        check(missing.length === 0, `receiver ${i}: ${missing.length} events never arrived, e.g. ${missing.slice(0, 3).join(", ")}`)
        check(received.length === eventIds.size, `receiver ${i}: ${received.length} arrivals for ${eventIds.size} events (duplicates or strangers)`)
        const lag = percentiles(receiver.arrivals.map((arrival) => arrival.at - arrival.createdAt))
        const first = Math.min(...receiver.arrivals.map((arrival) => arrival.at))
        const last = Math.max(...receiver.arrivals.map((arrival) => arrival.at))
        log(
          `receiver ${i}: each of ${eventIds.size} events exactly once, ${(received.length / ((last - first) / 1000)).toFixed(0)} events/s, ` +
            `state change → arrival p50 ${lag.p50} ms, p95 ${lag.p95} ms`
        )
      })

      // The same limits with the counts in Redis: three more instances on the same database.
      const redis = await startInstances(services, url, { ...env, REDIS_URL }, "scale-redis")
      await rateLimits(redis, "Redis", log)
      await monthlyQuota(redis, url, "Redis", log)
      await stopInstances(redis)
    } finally {
      await Promise.all(services.map((service) => stopService(service.child, "SIGKILL")))
      await Promise.all(receivers.map((receiver) => receiver.close()))
      await dropDatabase(admin, database.name)
    }
  }
}
