/**
 * The live path against the fake Alpaca: market intents on live keys, from the POST's 201 to the
 * commit that makes them `filled`, and the router's own share of that time: from the 201 to the
 * fake receiving the order's POST, and from the fake's fill event to the `filled` commit. Each
 * client polls its intent every 25 ms only to know when to send the next; the latency is read from
 * the commit, not from the polls.
 *
 * The commit is heard on the bench's own LISTEN on the channel every commit that writes events
 * notifies (with `<user id>:<mode>`), which delivers them in commit order. Each client is a user of
 * its own with one intent in flight at a time, so its notifications come in pairs, the creation's
 * then the fill's: an intent's `filled` commit is the second of its pair (the run fails should a
 * user's count not be two per intent, or a fill's be heard before the intent's `updated_at`, the
 * time the service decided the fill, before the statement that writes it). The notification
 * reaches the bench a little after the commit, so that error is on the high side. Every clock is
 * this machine's: the bench's, the fake's (in this process) and PostgreSQL's.
 *
 * Each client has an Alpaca account of its own and places at most `PER_ACCOUNT` orders, inside the
 * burst the router's pacing allows per account (45 calls): the figures measure the router, not the
 * pace Alpaca's limit of 200 calls a minute imposes on one account. The warm-up therefore runs in
 * rounds, each on accounts of its own.
 */
import { randomBytes } from "node:crypto"
import { setMaxListeners } from "node:events"
import pg from "pg"
import type { FakeAlpaca } from "../../src/services/brokers/alpaca/FakeAlpaca.js"
import { clientOf, call } from "../../test/support/Harness.js"
import { ADMIN_TOKEN, expectStatus, marketIntent, psqlColumn, repeatFor, request, type Service, sleep, stringField, waitUntil } from "../lib/Service.js"
import { listenForCommits } from "./Commits.js"
import { spread } from "./Percentile.js"
import { measure } from "./ProcessStats.js"

const PER_ACCOUNT = 40
const FILL_TIMEOUT_MS = 30_000
const POLL_INTERVAL_MS = 25

export interface LiveFigures {
  readonly intents: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly cpuMs: number
  readonly peakMiB: number
  /** The share of the clients' run the service's main thread was busy (on a core or waiting for one). */
  readonly mainBusy: number
  /** The 201 to the fake receiving the order's POST. */
  readonly submit: { readonly p50: number; readonly p99: number }
  /** The fake's fill event to the intent's `filled` commit. */
  readonly fill: { readonly p50: number; readonly p99: number }
}

const clientOrderIdOf = (body: unknown): string =>
  typeof body === "object" && body !== null && "client_order_id" in body ? String(body.client_order_id) : ""

interface Account {
  readonly userId: string
  readonly key: string
  readonly brokerId: string
  readonly keyId: string
}

/** `count` live users, each with a key and an Alpaca connection on an account of its own at the fake. */
const accounts = async (service: Service, fake: FakeAlpaca, count: number): Promise<ReadonlyArray<Account>> => {
  const { admin } = await clientOf(service.baseUrl, ADMIN_TOKEN)
  const made: Array<Account> = []
  for (let i = 0; i < count; i++) {
    const user = await call(admin.createUser({ payload: { name: `live ${i}`, tier: "enterprise", requests_per_minute: 1_000_000 } }))
    const path = { user_id: user.id }
    const key = await call(admin.createApiKey({ path, payload: { name: "live bench", mode: "live" } }))
    const keyId = `PKBENCH${randomBytes(6).toString("hex").toUpperCase()}`
    const secret = randomBytes(16).toString("hex")
    fake.addCredentials(keyId, secret)
    const broker = await call(admin.createBroker({
      path,
      payload: {
        name: `Alpaca ${i}`,
        kind: "alpaca",
        mode: "live",
        environment: "paper",
        credentials: { api_key_id: keyId, api_secret_key: secret }
      }
    }))
    made.push({ userId: user.id, key: key.key, brokerId: broker.id, keyId })
  }
  // Fills come on the streams: measure once every account's stream is up.
  await waitUntil(() => made.every((account) => fake.streamConnections(account.keyId).current === 1), "Alpaca streams up", 30_000)
  return made
}

/** One client's intent: its id, and when its 201 came (Unix ms). */
interface Placed {
  readonly id: string
  readonly createdAt: number
}

/**
 * `connections` clients, each a user with an account of its own and one intent in flight at a
 * time, until `total` intents (at most `PER_ACCOUNT` each) are filled.
 */
export const liveEndToEnd = async (
  service: Service,
  databaseUrl: string,
  fake: FakeAlpaca,
  connections: number,
  total: number
): Promise<LiveFigures> => {
  const intents = Math.min(total, connections * PER_ACCOUNT)
  const clients = await accounts(service, fake, connections)
  const runId = randomBytes(4).toString("hex")
  const placed = clients.map((): Array<Placed> => [])
  const listener = await listenForCommits(databaseUrl)
  const abort = new AbortController()
  const { signal } = abort
  // Every client's call in flight listens to it.
  setMaxListeners(0, signal)
  const place = async (account: Account, index: number, into: Array<Placed>) => {
    const sent = performance.now()
    const created = await request(`${service.baseUrl}/api/v1/intents`, account.key, {
      method: "POST",
      body: marketIntent(`live${connections}-${runId}-${index}`, account.brokerId),
      signal
    })
    const id = stringField(expectStatus("POST /api/v1/intents", created, 201), "id")
    into.push({ id, createdAt: Date.now() })
    for (;;) {
      const response = await request(`${service.baseUrl}/api/v1/intents/${id}`, account.key, { signal })
      const status = stringField(expectStatus(`GET /api/v1/intents/${id}`, response, 200), "status")
      if (status === "filled") return
      if (status !== "pending" && status !== "partially_filled") throw new Error(`intent ${id} ended ${status}`)
      if (performance.now() - sent > FILL_TIMEOUT_MS) throw new Error(`intent ${id} not filled in time`)
      await sleep(POLL_INTERVAL_MS)
    }
  }
  const started = performance.now()
  const pid = service.child.pid ?? 0
  /** Client `n`: intents n, n + connections, n + 2 × connections… one after the other, on its own account. */
  const client = async (account: Account, n: number) => {
    try {
      for (let index = n; index < intents; index += connections) await place(account, index, placed[n]!)
    } catch (error) {
      abort.abort(error)
      throw error
    }
  }
  const run = async () => {
    const { cpuMs, mainBusy, peakMiB } = await measure(pid, () => Promise.all(clients.map(client)))
    const wallMs = performance.now() - started
    // The last fills' notifications may still be on their way.
    await waitUntil(
      () => clients.every((account, i) => (listener.heard.get(`${account.userId}:live`)?.length ?? 0) >= 2 * placed[i]!.length),
      "every commit heard",
      10_000
    )
    return { cpuMs, mainBusy, peakMiB, wallMs }
  }
  const { cpuMs, mainBusy, peakMiB, wallMs } = await run().finally(listener.end)

  // The router's share: the fake's clock and the 201's are this process's; the commit's is the database's.
  const posted = new Map(
    fake.requests()
      .filter((r) => r.method === "POST" && r.path === "/v2/orders")
      .map((r) => [clientOrderIdOf(r.body), r.at])
  )
  const orderOf = new Map(fake.orders().map((order) => [order.id, order.client_order_id]))
  const filledAt = new Map(
    fake.fills().map((fill) => [orderOf.get(fill.order_id) ?? "", Date.parse(fill.transaction_time)])
  )
  const ids = placed.flat().map(({ id }) => id)
  const decided = new Map((await psqlColumn(
    databaseUrl,
    `SELECT id || ' ' || (extract(epoch FROM updated_at) * 1000)::bigint FROM intents
     WHERE status = 'filled' AND id IN (${ids.map((id) => `'${id}'`).join(",")})`
  )).map((line) => {
    const [id, at] = line.split(" ")
    return [id ?? "", Number(at)]
  }))
  const samples: Array<number> = []
  const submit: Array<number> = []
  const fill: Array<number> = []
  clients.forEach((account, client) => {
    const heard = listener.heard.get(`${account.userId}:live`) ?? []
    if (heard.length !== 2 * placed[client]!.length) {
      throw new Error(`user ${account.userId}: ${heard.length} commits with events for ${placed[client]!.length} intents, not two each`)
    }
    placed[client]!.forEach(({ createdAt, id }, k) => {
      // The intent's creation, then its fill.
      const committed = heard[2 * k + 1]!
      const at = decided.get(id)
      if (at === undefined || committed < at) throw new Error(`intent ${id}: its fill's commit not heard after it was decided`)
      samples.push(committed - createdAt)
      const received = posted.get(`tir-${id}`)
      if (received !== undefined) submit.push(received - createdAt)
      const event = filledAt.get(`tir-${id}`)
      if (event !== undefined) fill.push(committed - event)
    })
  })
  const e2e = spread(samples)
  return {
    intents,
    perSecond: samples.length / (wallMs / 1000),
    p50Ms: e2e.p50,
    p99Ms: e2e.p99,
    cpuMs: cpuMs / samples.length,
    peakMiB,
    mainBusy,
    submit: spread(submit),
    fill: spread(fill)
  }
}

/**
 * Live intents, unmeasured, for at least `seconds`: rounds of {@link liveEndToEnd} on fresh
 * accounts, so that the service's live path (the Alpaca calls, the update streams) is compiled
 * before it is measured.
 */
export const warmUpLive = async (
  service: Service,
  databaseUrl: string,
  fake: FakeAlpaca,
  connections: number,
  seconds: number
): Promise<void> =>
  repeatFor(seconds, () => liveEndToEnd(service, databaseUrl, fake, connections, connections * PER_ACCOUNT))

export interface BurstFigures {
  readonly bursts: number
  readonly size: number
  /** Per burst: the last fill event to the commit that made the last of its intents `filled`. */
  readonly p50Ms: number
  readonly p99Ms: number
  readonly cpuMs: number
  readonly peakMiB: number
  /** The share of the bursts' run the service's main thread was busy (on a core or waiting for one). */
  readonly mainBusy: number
}

/**
 * `bursts` times, `size` market intents at once on one live account (a user of its own): a client
 * rebalancing. Alpaca sends their fills back to back on the account's one stream; the figure is
 * the time from the burst's last fill event to the commit that made its last intent `filled`, as
 * the bench's LISTEN hears it (the user's last commit with events: nothing else writes any for
 * the user once every intent is filled). Each burst stays inside the account's pace (45 calls).
 */
export const liveBursts = async (
  service: Service,
  databaseUrl: string,
  fake: FakeAlpaca,
  size: number,
  bursts: number
): Promise<BurstFigures> => {
  const runId = randomBytes(4).toString("hex")
  const accountsOf = await accounts(service, fake, bursts)
  const listener = await listenForCommits(databaseUrl)
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  const drains: Array<number> = []
  const burst = async (account: Account, n: number) => {
    const ids = await Promise.all(Array.from({ length: size }, async (_, i) => {
      const created = await request(`${service.baseUrl}/api/v1/intents`, account.key, {
        method: "POST",
        body: marketIntent(`burst-${runId}-${n}-${i}`, account.brokerId)
      })
      return stringField(expectStatus("POST /api/v1/intents", created, 201), "id")
    }))
    const filled = async () =>
      (await db.query<{ readonly n: number }>(
        "SELECT count(*)::int AS n FROM intents WHERE status = 'filled' AND id = ANY($1::uuid[])",
        [ids]
      )).rows[0]?.n ?? 0
    const deadline = performance.now() + FILL_TIMEOUT_MS
    while ((await filled()) < size) {
      if (performance.now() > deadline) throw new Error(`burst ${n}: not every intent filled in time`)
      await sleep(POLL_INTERVAL_MS)
    }
    // Its last commit's notification may still be on its way.
    await sleep(POLL_INTERVAL_MS)
    const heard = listener.heard.get(`${account.userId}:live`) ?? []
    const lastCommit = heard.at(-1) ?? Number.NaN
    const clientOrderIds = new Set(ids.map((id) => `tir-${id}`))
    const orderIds = new Set(fake.orders().filter((order) => clientOrderIds.has(order.client_order_id)).map((order) => order.id))
    const fillTimes = fake.fills().filter((fill) => orderIds.has(fill.order_id)).map((fill) => Date.parse(fill.transaction_time))
    if (fillTimes.length !== size) throw new Error(`burst ${n}: ${fillTimes.length} fills at the fake for ${size} intents`)
    const lastFill = Math.max(...fillTimes)
    if (!(lastCommit >= lastFill)) throw new Error(`burst ${n}: no commit heard after its last fill event`)
    drains.push(lastCommit - lastFill)
  }
  const pid = service.child.pid ?? 0
  const { cpuMs, mainBusy, peakMiB } = await measure(pid, async () => {
    for (const [n, account] of accountsOf.entries()) await burst(account, n)
  }).finally(() => Promise.all([listener.end(), db.end()]))
  const { p50, p99 } = spread(drains)
  return { bursts, size, p50Ms: p50, p99Ms: p99, cpuMs: cpuMs / (bursts * size), peakMiB, mainBusy }
}
