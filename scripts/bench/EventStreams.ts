/**
 * Event stream latency: `streams` users each follow their own `GET /api/v1/events/stream` while
 * `clients` post market intents round-robin across those users (each intent makes two events,
 * `intent.created` and `intent.filled`). The latency of an event is its arrival at the stream's
 * reader minus its `created_at`, the time of the transaction that wrote it (a little before its
 * commit, so the figure is if anything too high). Every clock is this machine's.
 */
import * as Crypto from "node:crypto"
import { ADMIN_TOKEN, expectStatus, marketIntent, request, runClients, type Service, sleep } from "../lib/Service.js"
import { call, clientOf } from "../../test/support/Harness.js"
import { spread } from "./Percentile.js"

interface Follower {
  readonly key: string
  readonly brokerId: string
  readonly abort: AbortController
  readonly latencies: Array<number>
  events: number
}

/** One stream, reading frames until aborted; each event's latency recorded. */
const follow = async (baseUrl: string, follower: Follower, opened: () => void) => {
  const response = await fetch(`${baseUrl}/api/v1/events/stream`, {
    headers: { authorization: `Bearer ${follower.key}` },
    signal: follower.abort.signal
  })
  if (!response.ok || response.body === null) throw new Error(`event stream: ${response.status}`)
  opened()
  const decoder = new TextDecoder()
  let buffer = ""
  try {
    for await (const chunk of response.body) {
      const now = Date.now()
      buffer += decoder.decode(chunk, { stream: true })
      let end = buffer.indexOf("\n\n")
      while (end !== -1) {
        const data = /^data: (.*)$/m.exec(buffer.slice(0, end))?.[1]
        buffer = buffer.slice(end + 2)
        end = buffer.indexOf("\n\n")
        if (data === undefined) continue
        const createdAt = /"created_at"\s*:\s*"([^"]+)"/.exec(data)?.[1]
        if (createdAt !== undefined) follower.latencies.push(now - Date.parse(createdAt))
        follower.events++
      }
    }
  } catch (error) {
    if (!follower.abort.signal.aborted) throw error
  }
}

export const streamLatency = async (service: Service, options: {
  readonly streams: number
  readonly clients: number
  readonly intents: number
}) => {
  const { admin } = await clientOf(service.baseUrl, ADMIN_TOKEN)
  const followers: Array<Follower> = []
  for (let i = 0; i < options.streams; i++) {
    const user = await call(admin.createUser({ payload: { name: `stream ${i}`, tier: "enterprise", requests_per_minute: 1_000_000 } }))
    const path = { user_id: user.id }
    const key = await call(admin.createApiKey({ path, payload: { name: "stream", mode: "test" } }))
    const broker = await call(admin.createBroker({ path, payload: { name: "Mock", kind: "mock", mode: "test" } }))
    followers.push({ key: key.key, brokerId: broker.id, abort: new AbortController(), latencies: [], events: 0 })
  }
  let open = 0
  // A stream that fails or that the service closes fails the run, with its cause, once the bench
  // next looks (not as an unhandled rejection in the middle of it).
  const failures: Array<unknown> = []
  const reading = followers.map((follower) =>
    follow(service.baseUrl, follower, () => open++).catch((error: unknown) => {
      failures.push(error)
    })
  )
  const check = () => {
    if (failures.length === 0) return
    for (const follower of followers) follower.abort.abort()
    const cause = failures[0]
    const detail = cause instanceof Error && cause.cause instanceof Error
      ? `${cause.message}: ${cause.cause.message}`
      : String(cause)
    throw new Error(`${failures.length} event stream(s) ended before the run did (${detail})`, { cause })
  }
  while (open < followers.length) {
    check()
    await sleep(10)
  }
  const runId = Crypto.randomBytes(4).toString("hex")
  const started = performance.now()
  await runClients(options.intents, options.clients, async (index, signal) => {
    const follower = followers[index % followers.length]!
    const created = await request(`${service.baseUrl}/api/v1/intents`, follower.key, {
      method: "POST",
      body: marketIntent(`stream-${runId}-${index}`, follower.brokerId),
      signal
    })
    expectStatus("POST /api/v1/intents", created, 201)
  }).catch((error: unknown) => {
    for (const follower of followers) follower.abort.abort()
    throw error
  })
  // Every intent's two events arrive.
  const deadline = Date.now() + 60_000
  while (followers.reduce((sum, f) => sum + f.events, 0) < options.intents * 2) {
    check()
    if (Date.now() > deadline) {
      for (const follower of followers) follower.abort.abort()
      throw new Error("not every event reached its stream within a minute")
    }
    await sleep(10)
  }
  const seconds = (performance.now() - started) / 1000
  for (const follower of followers) follower.abort.abort()
  await Promise.all(reading)
  check()
  const latency = spread(followers.flatMap((follower) => follower.latencies))
  return { events: options.intents * 2, perSecond: (options.intents * 2) / seconds, ...latency }
}
