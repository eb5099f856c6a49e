import { expect, layer } from "@effect/vitest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Server from "../../src/http/Server.js"
import * as Services from "../../src/Services.js"
import { WEBHOOK_CHANNEL } from "../../src/sql/Channels.js"
import type * as PublicAddress from "../../src/services/webhooks/PublicAddress.js"
import { MAX_IN_FLIGHT_PER_ENDPOINT } from "../../src/domain/Webhook.js"
import * as SqlWebhookRepository from "../../src/services/webhooks/SqlWebhookRepository.js"
import * as Database from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"
import { receiver, until } from "../support/Receiver.js"
import { create, deliveriesWhen, operator, order, signUp, subscribe } from "../support/Scenario.js"
import * as TestServer from "../support/TestServer.js"
import { waitFor } from "../support/Waiting.js"

/** Every log line the service writes, as logfmt. */
const logLines: Array<string> = []

/**
 * How often each host was resolved: `rebind.test` answers 127.0.0.2 the first time and 127.0.0.1
 * after (a DNS rebinding), `local.test` always 127.0.0.1.
 */
const resolutions = new Map<string, number>()
const resolve: PublicAddress.Resolve = (host) => {
  const n = (resolutions.get(host) ?? 0) + 1
  resolutions.set(host, n)
  if (host === "rebind.test") return Promise.resolve([{ address: n === 1 ? "127.0.0.2" : "127.0.0.1", family: 4 }])
  if (host === "local.test") return Promise.resolve([{ address: "127.0.0.1", family: 4 }])
  return Promise.reject(new Error(`${host} is not resolvable in tests`))
}

/**
 * The whole service with its workers, its logs captured. Live deliveries may reach 127.0.0.2 alone
 * (standing in for a public address: only loopback traffic is possible here). A receiver has 60 s,
 * so that a black hole's attempts outlast any test, however slow the machine.
 */
const service = <E, R>(database: Layer.Layer<SqlClient.SqlClient | Database.Notifications, E, R>) =>
  TestServer.withFakeAlpacas((alpaca) => Server.layer(TestServer.options).pipe(
    Layer.provideMerge(
      Services.layer({ ...TestServer.options, alpaca }, {
        routing: TestServer.routing,
        webhooks: {
          ...TestServer.webhooks,
          timeout: Duration.seconds(60),
          resolve,
          allowAddress: (address) => address === "127.0.0.2"
        }
      }).pipe(Layer.provideMerge(database))
    ),
    Layer.provideMerge(NodeHttpServer.layerTest),
    Layer.provide(Logger.replace(Logger.defaultLogger, Logger.map(Logger.logfmtLogger, (line) => void logLines.push(line)))),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Info))
  ))

const backends = [
  ["PGlite", service(Database.migrated(Database.pglite(undefined)))],
  ["PostgreSQL", service(Postgres.layerFresh)]
] as const

const user = signUp({ requests_per_minute: 100_000, intents_per_month: 100_000 })

/** A resting limit order: exactly one event, `intent.created`. */
const holdOrder = (key: string, brokerId: string) =>
  create(key, order(brokerId, { symbol: "HOLD", order_type: "limit", limit_price: 1 }))

const listening = (server: Net.Server, port: number, host: string) =>
  Effect.async<number, Error>((resume) => {
    server.once("error", (error) => resume(Effect.fail(error)))
    server.listen(port, host, () => {
      const address = server.address()
      resume(Effect.succeed(address !== null && typeof address === "object" ? address.port : port))
    })
  })

const closing = (server: Net.Server) =>
  Effect.async<void>((resume) => {
    if (server instanceof Http.Server) server.closeAllConnections()
    server.close(() => resume(Effect.void))
  })

/** A server on loopback, closed with the scope. */
const serving = <S extends Net.Server>(server: S, port: number, host: string) =>
  Effect.acquireRelease(listening(server, port, host), () => closing(server))

/** A port on which nothing listens. */
const closedPort = Effect.gen(function*() {
  const server = Net.createServer()
  const port = yield* listening(server, 0, "127.0.0.1")
  yield* closing(server)
  return port
}).pipe(Effect.orDie)

for (const [name, backend] of backends) {
  layer(backend, { timeout: 120_000, excludeTestServices: true })(`webhook hardening on ${name}`, (it) => {
    it.scoped("item 5: a receiver streaming a huge answer does not make the service buffer it", () =>
      Effect.gen(function*() {
        const total = 1024 * 1024 * 1024
        const sent = { bytes: 0, closed: false }
        const chunk = Buffer.alloc(64 * 1024, "x")
        const server = Http.createServer((request, response) => {
          request.resume()
          request.on("end", () => {
            response.on("close", () => {
              sent.closed = true
            })
            response.writeHead(200, { "content-type": "text/plain" })
            const pump = () => {
              while (!sent.closed && sent.bytes < total) {
                sent.bytes += chunk.length
                if (!response.write(chunk)) return void response.once("drain", pump)
              }
              response.end()
            }
            pump()
          })
        })
        const port = yield* serving(server, 0, "127.0.0.1").pipe(Effect.orDie)
        const { mockId, testKey, userId } = yield* user
        const endpoint = yield* subscribe(userId, `http://127.0.0.1:${port}/hooks`)
        yield* holdOrder(testKey, mockId)
        const [delivery] = yield* deliveriesWhen(endpoint.id, ([d]) => d?.status === "succeeded")
        expect(delivery?.history).toEqual([expect.objectContaining({ status_code: 200, error: null })])
        yield* until(() => sent.closed)
        // The service read a few KiB and dropped the connection: what the receiver managed to write
        // is what the socket buffers took, far from the whole answer.
        expect(sent.bytes).toBeLessThan(64 * 1024 * 1024)
      }))

    it.scoped("item 5: an unsuccessful answer keeps a short excerpt of its body in the delivery history", () =>
      Effect.gen(function*() {
        const server = Http.createServer((request, response) => {
          request.resume()
          request.on("end", () => response.writeHead(503).end(`maintenance ${"z".repeat(10_000)}`))
        })
        const port = yield* serving(server, 0, "127.0.0.1").pipe(Effect.orDie)
        const { mockId, testKey, userId } = yield* user
        const endpoint = yield* subscribe(userId, `http://127.0.0.1:${port}/hooks`)
        yield* holdOrder(testKey, mockId)
        const [delivery] = yield* deliveriesWhen(endpoint.id, ([d]) => d?.status === "failed")
        for (const attempt of delivery?.history ?? []) {
          expect(attempt.status_code).toBe(503)
          expect(attempt.error).toMatch(/^answered: maintenance z+$/)
          expect(attempt.error?.length).toBeLessThanOrEqual("answered: ".length + 256)
        }
      }))

    it.scoped("item 5: a short unsuccessful answer of a declared length keeps its excerpt, on one line", () =>
      Effect.gen(function*() {
        const server = Http.createServer((request, response) => {
          request.resume()
          request.on("end", () => response.writeHead(429, { "content-length": 24 }).end("  slow\n down,\tplease  \n\n"))
        })
        const port = yield* serving(server, 0, "127.0.0.1").pipe(Effect.orDie)
        const { mockId, testKey, userId } = yield* user
        const endpoint = yield* subscribe(userId, `http://127.0.0.1:${port}/hooks`)
        yield* holdOrder(testKey, mockId)
        const [delivery] = yield* deliveriesWhen(endpoint.id, ([d]) => (d?.history.length ?? 0) > 0)
        expect(delivery?.history[0]).toMatchObject({ status_code: 429, error: "answered: slow down, please" })
      }))

    it.scoped("item 6: a black-hole endpoint holds at most 4 deliveries in flight; another user's endpoint keeps its latency", () =>
      Effect.gen(function*() {
        const hole = yield* receiver(() => "hang")
        const mallory = yield* user
        const holeEndpoint = yield* subscribe(mallory.userId, hole.url)
        for (let i = 0; i < 40; i++) yield* holdOrder(mallory.testKey, mallory.mockId)
        yield* until(() => hole.received.length >= 4)
        yield* Effect.sleep("300 millis")
        expect(hole.received.length).toBe(MAX_IN_FLIGHT_PER_ENDPOINT)

        // Another instance claiming now gets none of the black hole's deliveries: the cap counts the
        // leases held by every instance.
        const repository = yield* SqlWebhookRepository.make
        const claimed = yield* repository.claim(32, Duration.minutes(1))
        const now = yield* DateTime.now
        for (const delivery of claimed) yield* repository.release(delivery, now)
        expect(claimed.filter((delivery) => delivery.endpointId === holeEndpoint.id)).toEqual([])

        const ada = yield* user
        const healthy = yield* receiver()
        yield* subscribe(ada.userId, healthy.url)
        yield* create(ada.testKey, order(ada.mockId))
        // The black hole's attempts last 60 s; the healthy endpoint does not wait for them.
        yield* until(() => healthy.received.length >= 2, 5)
        expect(hole.received.length).toBe(MAX_IN_FLIGHT_PER_ENDPOINT)
      }))

    it.scoped("item 8: after a 410, a disabled endpoint gets nothing more than the requests in flight at that instant", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        // Until `gone` is set, every POST is answered 503 at once. Then the first is answered 410 at
        // once, and the others are held unanswered until the test lets them go: still in flight.
        let arrivals = 0
        const held: Array<() => void> = []
        let gone = false
        let goneSent = false
        const server = Http.createServer((request, response) => {
          request.resume()
          request.on("end", () => {
            arrivals += 1
            if (!gone) return void response.writeHead(503).end()
            if (!goneSent) {
              goneSent = true
              return void response.writeHead(410).end()
            }
            held.push(() => response.writeHead(503).end())
          })
        })
        const port = yield* serving(server, 0, "127.0.0.1").pipe(Effect.orDie)
        const { mockId, testKey, userId } = yield* user
        const endpoint = yield* subscribe(userId, `http://127.0.0.1:${port}/hooks`)
        for (let i = 0; i < 20; i++) yield* holdOrder(testKey, mockId)
        yield* deliveriesWhen(endpoint.id, (items) => items.length === 20 && items.every((d) => d.status === "failed"))

        // All twenty due again at once.
        gone = true
        const before = arrivals
        yield* sql`UPDATE webhook_deliveries SET status = 'pending', failures = 0, next_attempt_at = ${new Date()}
                   WHERE endpoint_id = ${endpoint.id}`
        yield* sql`SELECT pg_notify(${WEBHOOK_CHANNEL}, 'due')`
        yield* until(() => goneSent)
        // The 410 freed one place under the endpoint's in-flight cap: a send after it would arrive
        // meanwhile. Those in flight are all held, so none of them frees a place.
        yield* Effect.sleep("1 second")
        const sent = arrivals - before
        // At most the deliveries claimed with the first (the endpoint's in-flight cap), none after the 410.
        expect(sent).toBeLessThanOrEqual(MAX_IN_FLIGHT_PER_ENDPOINT)
        // Answered at last, the requests in flight free their places: nothing more is sent.
        for (const answer of held.splice(0)) answer()
        yield* deliveriesWhen(endpoint.id, (items) => items.every((d) => d.status === "failed"))
        yield* Effect.sleep("1 second")
        expect(arrivals - before).toBe(sent)
        const listed = yield* Effect.flatMap(operator, ({ admin }) => admin.listWebhookEndpoints({ path: { user_id: userId } }))
        const [view] = listed.items
        expect(view?.disabled_at).not.toBeNull()

        yield* holdOrder(testKey, mockId)
        yield* Effect.sleep("300 millis")
        expect(arrivals - before).toBe(sent)
      }))

    it.scoped("item 9: a live delivery connects to the address that was checked, not to a second resolution", () =>
      Effect.gen(function*() {
        resolutions.clear()
        // The same port on two loopback addresses: 127.0.0.2 is allowed, 127.0.0.1 is not.
        const allowedServer = Http.createServer((request, response) => {
          request.resume()
          request.on("end", () => response.writeHead(200).end("ok"))
        })
        let connections = 0
        const forbidden = Net.createServer((socket) => {
          connections++
          socket.destroy()
        })
        let port = 0
        for (let i = 0; i < 20 && port === 0; i++) {
          const candidate = yield* serving(allowedServer, 0, "127.0.0.2").pipe(Effect.orDie)
          const taken = yield* serving(forbidden, candidate, "127.0.0.1").pipe(Effect.as(true), Effect.orElseSucceed(() => false))
          if (taken) port = candidate
          else yield* closing(allowedServer)
        }
        expect(port).not.toBe(0)
        let answered = 0
        allowedServer.on("request", () => answered++)

        const { alpacaId, liveKey, userId } = yield* user
        const sql = yield* SqlClient.SqlClient
        const rebound = yield* subscribe(userId, "https://8.8.8.8/hooks", { mode: "live" })
        const literal = yield* subscribe(userId, "https://8.8.4.4/hooks", { mode: "live" })
        const local = yield* subscribe(userId, "https://1.1.1.1/hooks", { mode: "live" })
        // Re-pointed where no API call may put them (live URLs are https and checked at creation).
        yield* sql`UPDATE webhook_endpoints SET url = ${`http://rebind.test:${port}/hooks`} WHERE id = ${rebound.id}`
        yield* sql`UPDATE webhook_endpoints SET url = ${`http://127.0.0.1:${port}/hooks`} WHERE id = ${literal.id}`
        yield* sql`UPDATE webhook_endpoints SET url = ${`http://local.test:${port}/hooks`} WHERE id = ${local.id}`

        // Alpaca refuses the order: two events (created, rejected) for each endpoint.
        const { paper } = yield* TestServer.FakeAlpacas
        paper.setBehaviour("reject", "RJCT")
        const created = yield* create(liveKey, order(alpacaId, { symbol: "RJCT" }))
        yield* waitFor(liveKey, created.id, (i) => i.status === "rejected")
        yield* until(() => answered >= 1)
        const refused = yield* deliveriesWhen(literal.id, (items) => items.length === 2 && items.every((d) => d.status === "failed"))
        for (const attempt of refused.flatMap((d) => d.history)) expect(attempt.error).toMatch(/127\.0\.0\.1 is not a public address/)
        const unresolved = yield* deliveriesWhen(local.id, (items) => items.length === 2 && items.every((d) => d.status === "failed"))
        for (const attempt of unresolved.flatMap((d) => d.history)) {
          expect(attempt.error).toMatch(/ENOTPUBLIC: url must resolve to public addresses only \(local\.test is 127\.0\.0\.1\)/)
        }
        const sent = yield* deliveriesWhen(rebound.id, (items) => items.length === 2 && items.every((d) => d.status !== "pending"))
        // A later connection resolves again, gets 127.0.0.1 and is refused before connecting.
        for (const attempt of sent.flatMap((d) => d.history)) {
          if (attempt.status_code !== 200) expect(attempt.error).toMatch(/ENOTPUBLIC/)
        }
        expect(sent.flatMap((d) => d.history).some((attempt) => attempt.status_code === 200)).toBe(true)
        expect(connections).toBe(0)
      }))

    it.scoped("item 10: a URL's path and query reach neither the delivery history nor the logs; its origin and the cause do", () =>
      Effect.gen(function*() {
        const port = yield* closedPort
        const { mockId, testKey, userId } = yield* user
        const endpoint = yield* subscribe(userId, `http://127.0.0.1:${port}/hooks/tok_PATHSECRET?token=QUERYSECRET`)
        const logged = logLines.length
        yield* holdOrder(testKey, mockId)
        const [delivery] = yield* deliveriesWhen(endpoint.id, ([d]) => d?.status === "failed")
        expect(delivery?.history.length).toBe(4)
        for (const attempt of delivery?.history ?? []) {
          expect(attempt.error).toContain("ECONNREFUSED")
          expect(attempt.error).toContain(`http://127.0.0.1:${port}`)
          expect(attempt.error).not.toMatch(/PATHSECRET|QUERYSECRET|tok_/)
        }
        const lines = logLines.slice(logged)
        expect(lines.filter((line) => line.includes("ECONNREFUSED")).length).toBeGreaterThanOrEqual(4)
        expect(lines.filter((line) => /PATHSECRET|QUERYSECRET/.test(line))).toEqual([])
      }))
  })
}
