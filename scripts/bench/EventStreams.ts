/**
 * Event stream latency: `streams` users each follow their own `GET /api/v1/events/stream` while
 * `clients` post market intents round-robin across those users, as fast as they go or at a steady
 * rate (each intent makes two events, `intent.created` and `intent.filled`). The latency of an
 * event is its arrival at the stream's reader minus its commit. The commit is heard on the bench's
 * own LISTEN on the channel every commit that writes events notifies (with `<user id>:<mode>`):
 * the first notification for the event's user at or after its `created_at`, which is the event's
 * own commit's or an earlier one of the same user's (so that error is on the high side). The
 * notification reaches the bench a little after the commit, through the same event loop as the
 * streams' frames. Each event's latency from its `created_at` is kept too: `created_at` is the time
 * the service decided the change, before the transaction that writes it, so it also counts the
 * writing. Every clock is this machine's.
 */
import * as Crypto from "node:crypto"
import { ADMIN_TOKEN, expectStatus, marketIntent, request, runClients, type Service, sleep } from "../lib/Service.js"
import { call, clientOf } from "../../test/support/Harness.js"
import { listenForCommits } from "./Commits.js"
import { spread } from "./Percentile.js"

interface Follower {
  readonly userId: string
  readonly key: string
  readonly brokerId: string
  readonly abort: AbortController
  /** Each event's arrival and `created_at`, in Unix milliseconds. */
  readonly arrivals: Array<{ readonly at: number; readonly createdAt: number }>
  events: number
}

/** One stream, reading frames until aborted; each event's arrival recorded. */
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
        if (createdAt !== undefined) follower.arrivals.push({ at: now, createdAt: Date.parse(createdAt) })
        follower.events++
      }
    }
  } catch (error) {
    if (!follower.abort.signal.aborted) throw error
  }
}

/** The first of `sorted` (ascending) at or after `at`, if any. */
const firstFrom = (sorted: ReadonlyArray<number>, at: number) => {
  let low = 0
  let high = sorted.length
  while (low < high) {
    const middle = (low + high) >> 1
    if ((sorted[middle] ?? at) < at) low = middle + 1
    else high = middle
  }
  return sorted[low]
}

export interface StreamLoad {
  readonly streams: number
  readonly clients: number
  readonly intents: number
  /** Intents posted per second, all clients together; as fast as the clients go when unset. */
  readonly perSecond?: number | undefined
}

export const streamLatency = async (service: Service, options: StreamLoad & { readonly databaseUrl: string }) => {
  // When each user's events committed: the notifications, as they reach an idle listener.
  const listener = await listenForCommits(options.databaseUrl)
  try {
    return await measureStreams(service, options, listener.heard)
  } finally {
    await listener.end()
  }
}

const measureStreams = async (service: Service, options: StreamLoad, commits: ReadonlyMap<string, ReadonlyArray<number>>) => {
  const { admin } = await clientOf(service.baseUrl, ADMIN_TOKEN)
  const followers: Array<Follower> = []
  for (let i = 0; i < options.streams; i++) {
    const user = await call(admin.createUser({ payload: { name: `stream ${i}`, tier: "enterprise", requests_per_minute: 1_000_000 } }))
    const path = { user_id: user.id }
    const key = await call(admin.createApiKey({ path, payload: { name: "stream", mode: "test" } }))
    const broker = await call(admin.createBroker({ path, payload: { name: "Mock", kind: "mock", mode: "test" } }))
    followers.push({ userId: user.id, key: key.key, brokerId: broker.id, abort: new AbortController(), arrivals: [], events: 0 })
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
    // Paced: intent `index` is posted no sooner than its turn in a steady rate from the start.
    if (options.perSecond !== undefined) await sleep(started + (index * 1000) / options.perSecond - performance.now())
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
  const fromCommit = followers.flatMap((follower) => {
    const times = commits.get(`${follower.userId}:test`) ?? []
    return follower.arrivals.map(({ at, createdAt }) => at - (firstFrom(times, createdAt) ?? createdAt))
  })
  const fromCreated = followers.flatMap((follower) => follower.arrivals.map(({ at, createdAt }) => at - createdAt))
  return {
    events: options.intents * 2,
    perSecond: (options.intents * 2) / seconds,
    ...spread(fromCommit),
    fromCreated: spread(fromCreated)
  }
}
