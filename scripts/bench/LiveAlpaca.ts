/**
 * The live path against the fake Alpaca: market intents on a live key, from the POST's 201 to the
 * commit that makes them `filled` (the intent's `updated_at`; each client polls its intent every
 * 25 ms only to know when to send the next, so that polling does not load the server being
 * measured), and the router's own share of that time: from the 201 to the fake receiving the
 * order's POST, and from the fake's fill event to the `filled` commit. Every clock is this
 * machine's: the bench's, the fake's (in this process) and PostgreSQL's.
 *
 * Each client has an Alpaca account of its own and places at most `PER_ACCOUNT` orders, inside the
 * burst the router's pacing allows per account (45 calls): the figures measure the router, not the
 * pace Alpaca's limit of 200 calls a minute imposes on one account. The warm-up therefore runs in
 * rounds, each on accounts of its own.
 */
import { randomBytes } from "node:crypto"
import type { UserId } from "../../src/domain/Ids.js"
import type { FakeAlpaca } from "../../src/services/brokers/alpaca/FakeAlpaca.js"
import { clientOf, call } from "../../test/support/Harness.js"
import { ADMIN_TOKEN, expectStatus, marketIntent, psqlColumn, repeatFor, request, runClients, type Service, sleep, stringField, waitUntil } from "../lib/Service.js"
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
  /** The 201 to the fake receiving the order's POST. */
  readonly submit: { readonly p50: number; readonly p99: number }
  /** The fake's fill event to the intent's `filled` commit. */
  readonly fill: { readonly p50: number; readonly p99: number }
}

const clientOrderIdOf = (body: unknown): string =>
  typeof body === "object" && body !== null && "client_order_id" in body ? String(body.client_order_id) : ""

interface Account {
  readonly key: string
  readonly brokerId: string
  readonly keyId: string
}

/** A live user with `count` Alpaca connections, each on an account of its own at the fake. */
const accounts = async (service: Service, fake: FakeAlpaca, userId: UserId, count: number): Promise<ReadonlyArray<Account>> => {
  const { admin } = await clientOf(service.baseUrl, ADMIN_TOKEN)
  const path = { user_id: userId }
  const key = await call(admin.createApiKey({ path, payload: { name: "live bench", mode: "live" } }))
  const made: Array<Account> = []
  for (let i = 0; i < count; i++) {
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
    made.push({ key: key.key, brokerId: broker.id, keyId })
  }
  // Fills come on the streams: measure once every account's stream is up.
  await waitUntil(() => made.every((account) => fake.streamConnections(account.keyId).current === 1), "Alpaca streams up", 30_000)
  return made
}

/** `connections` clients, each on its own account, until `total` intents (at most `PER_ACCOUNT` each) are filled. */
export const liveEndToEnd = async (
  service: Service,
  databaseUrl: string,
  fake: FakeAlpaca,
  userId: UserId,
  connections: number,
  total: number
): Promise<LiveFigures> => {
  const intents = Math.min(total, connections * PER_ACCOUNT)
  const clients = await accounts(service, fake, userId, connections)
  const runId = randomBytes(4).toString("hex")
  const createdAt = new Map<string, number>()
  const started = performance.now()
  const pid = service.child.pid ?? 0
  const { cpuMs, peakMiB } = await measure(pid, () =>
    runClients(intents, connections, async (index, signal) => {
      const account = clients[index % connections]!
      const sent = performance.now()
      const created = await request(`${service.baseUrl}/api/v1/intents`, account.key, {
        method: "POST",
        body: marketIntent(`live${connections}-${runId}-${index}`, account.brokerId),
        signal
      })
      const id = stringField(expectStatus("POST /api/v1/intents", created, 201), "id")
      createdAt.set(id, Date.now())
      for (;;) {
        const response = await request(`${service.baseUrl}/api/v1/intents/${id}`, account.key, { signal })
        const status = stringField(expectStatus(`GET /api/v1/intents/${id}`, response, 200), "status")
        if (status === "filled") break
        if (status !== "pending" && status !== "partially_filled") throw new Error(`intent ${id} ended ${status}`)
        if (performance.now() - sent > FILL_TIMEOUT_MS) throw new Error(`intent ${id} not filled in time`)
        await sleep(POLL_INTERVAL_MS)
      }
    }))
  const wallMs = performance.now() - started

  // The router's share: the fake's clock and the 201's are this process's; the commit's is the database's.
  const posted = new Map(
    fake.requests()
      .filter((r) => r.method === "POST" && r.path === "/v2/orders")
      .map((r) => [clientOrderIdOf(r.body), r.at])
  )
  const submit = [...createdAt].flatMap(([id, at]) => {
    const received = posted.get(`tir-${id}`)
    return received === undefined ? [] : [received - at]
  })
  const orderOf = new Map(fake.orders().map((order) => [order.id, order.client_order_id]))
  const filledAt = new Map(
    fake.fills().map((fill) => [orderOf.get(fill.order_id) ?? "", Date.parse(fill.transaction_time)])
  )
  const ids = [...createdAt.keys()]
  const commits = await psqlColumn(
    databaseUrl,
    `SELECT id || ' ' || (extract(epoch FROM updated_at) * 1000)::bigint FROM intents
     WHERE status = 'filled' AND id IN (${ids.map((id) => `'${id}'`).join(",")})`
  )
  const committed = new Map(commits.map((line) => {
    const [id, at] = line.split(" ")
    return [id ?? "", Number(at)]
  }))
  const samples = [...committed].flatMap(([id, at]) => {
    const created = createdAt.get(id)
    return created === undefined ? [] : [at - created]
  })
  const fill = [...committed].flatMap(([id, at]) => {
    const event = filledAt.get(`tir-${id}`)
    return event === undefined ? [] : [at - event]
  })
  const e2e = spread(samples)
  return {
    intents,
    perSecond: samples.length / (wallMs / 1000),
    p50Ms: e2e.p50,
    p99Ms: e2e.p99,
    cpuMs: cpuMs / samples.length,
    peakMiB,
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
  userId: UserId,
  connections: number,
  seconds: number
): Promise<void> =>
  repeatFor(seconds, () => liveEndToEnd(service, databaseUrl, fake, userId, connections, connections * PER_ACCOUNT))
