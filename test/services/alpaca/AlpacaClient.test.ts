import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import type { OrderSpec } from "../../../src/domain/Intent.js"
import * as AlpacaClient from "../../../src/services/brokers/alpaca/AlpacaClient.js"
import * as AlpacaSchemas from "../../../src/services/brokers/alpaca/AlpacaSchemas.js"
import { FakeAlpacaServer } from "../../../src/services/brokers/alpaca/FakeAlpaca.js"
import type { RateLimiter as RateLimiterService } from "../../../src/services/RateLimiter.js"
import { marketSpec } from "../../support/Fixtures.js"
import { withSpansRecorded } from "../../support/Spans.js"

const market: OrderSpec = marketSpec

const newClientOrderId = () => `${AlpacaClient.CLIENT_ORDER_ID_PREFIX}${randomUUID()}`

/** The fake reset, its credentials, and the client. */
const setup = Effect.gen(function*() {
  const fake = yield* FakeAlpacaServer
  fake.reset()
  const credentials: AlpacaClient.Credentials = {
    baseUrl: fake.url,
    apiKeyId: "fake-key-id",
    apiSecretKey: Redacted.make("fake-secret-key")
  }
  const client = yield* AlpacaClient.make()
  return { fake, credentials, client }
})

const TestLayer = Layer.mergeAll(FakeAlpacaServer.layer(), NodeHttpClient.layerUndici)

// Real time: the calls go over loopback and time out by the clock.
layer(TestLayer, { excludeTestServices: true })("AlpacaClient against the fake Alpaca", (it) => {
  it.scoped("sends a market order as Alpaca expects: fields, strings, headers, client order id", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      const clientOrderId = newClientOrderId()
      expect(clientOrderId).toHaveLength(40)
      yield* client.submit(credentials, { clientOrderId, spec: market })
      const [request] = fake.requests()
      expect(fake.requests()).toHaveLength(1)
      expect(request?.method).toBe("POST")
      expect(request?.path).toBe("/v2/orders")
      expect(request?.headers["apca-api-key-id"]).toBe("fake-key-id")
      expect(request?.headers["apca-api-secret-key"]).toBe("fake-secret-key")
      expect(request?.headers["content-type"]).toMatch(/^application\/json/)
      expect(request?.body).toStrictEqual({
        symbol: "AAPL",
        qty: "10",
        side: "buy",
        type: "market",
        time_in_force: "day",
        extended_hours: false,
        client_order_id: clientOrderId
      })
    }))

  it.scoped("sends a limit order's price as a string, and no stop price", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      const clientOrderId = newClientOrderId()
      yield* client.submit(credentials, {
        clientOrderId,
        spec: {
          ...market,
          side: "sell",
          quantity: 0.5,
          order_type: "limit",
          limit_price: 187.25,
          time_in_force: "gtc",
          extended_hours: true
        }
      })
      expect(fake.requests()[0]?.body).toStrictEqual({
        symbol: "AAPL",
        qty: "0.5",
        side: "sell",
        type: "limit",
        time_in_force: "gtc",
        limit_price: "187.25",
        extended_hours: true,
        client_order_id: clientOrderId
      })
    }))

  it.scoped("a filled order: accepted, then status filled and its execution with Alpaca's own id", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      const placed = yield* client.submit(credentials, { clientOrderId: newClientOrderId(), spec: market })
      // As Alpaca does, the answer is the accepted order; the fill follows it.
      expect(placed.status).toBe("accepted")
      expect(placed.filled_qty).toBe(0)
      const order = yield* client.getOrder(credentials, placed.id)
      expect(order.filled_qty).toBe(10)
      expect(order.filled_avg_price).toBe(100)
      const fills = yield* client.fills(credentials, order)
      const mapped = AlpacaClient.toBrokerOrder(order, fills)
      expect(mapped.status).toBe("filled")
      expect(mapped.brokerOrderId).toBe(order.id)
      expect(mapped.fills.map(({ id, price, quantity }) => ({ id, price, quantity }))).toStrictEqual([
        // The activity id is `<time>::<execution id>`; the fill keeps the execution id the stream also names.
        { id: AlpacaClient.executionId(fake.fills()[0]?.id ?? ""), price: 100, quantity: 10 }
      ])
    }))

  it.scoped("a partial fill rests until the fake fills the rest; each execution kept apart", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      fake.setBehaviour("partial", "AAPL")
      const submitted = yield* client.submit(credentials, { clientOrderId: newClientOrderId(), spec: market })
      const placed = yield* client.getOrder(credentials, submitted.id)
      expect(AlpacaClient.toBrokerOrder(placed, yield* client.fills(credentials, placed)).status)
        .toBe("partially_filled")
      expect(placed.filled_qty).toBe(5)
      fake.fill(placed.id)
      const order = yield* client.getOrder(credentials, placed.id)
      const mapped = AlpacaClient.toBrokerOrder(order, yield* client.fills(credentials, order))
      expect(mapped.status).toBe("filled")
      expect(mapped.fills.map((fill) => fill.quantity)).toStrictEqual([5, 5])
      expect(new Set(mapped.fills.map((fill) => fill.id)).size).toBe(2)
    }))

  it.scoped("an order's fills are found across pages of the account's activities", () =>
    Effect.gen(function*() {
      const { credentials, fake } = yield* setup
      // 121 orders on one account: faster than the pace Alpaca's limit asks for.
      const client = yield* AlpacaClient.make({ pace: { limit: 1000, interval: "1 second" } })
      fake.setBehaviour("rest", "MSFT")
      const target = yield* client.submit(credentials, { clientOrderId: newClientOrderId(), spec: { ...market, symbol: "MSFT" } })
      yield* Effect.forEach(
        Array.from({ length: 120 }, newClientOrderId),
        (clientOrderId) => client.submit(credentials, { clientOrderId, spec: market }),
        { concurrency: 8 }
      )
      fake.fill(target.id)
      const fills = yield* client.fills(credentials, target)
      expect(fills.map((fill) => fill.qty)).toStrictEqual([10])
      const pages = fake.requests().filter((request) => request.path.startsWith("/v2/account/activities/FILL"))
      expect(pages).toHaveLength(2)
      expect(pages[1]?.path).toContain(`page_token=${encodeURIComponent(fake.fills()[99]?.id ?? "")}`)
    }))

  it.scoped("calls are paced per account under Alpaca's 200 a minute: a burst of 45, then about one each 444 ms", () =>
    Effect.gen(function*() {
      const { client, credentials } = yield* setup
      const other: AlpacaClient.Credentials = { ...credentials, apiKeyId: "other-key-id" }
      const started = Date.now()
      yield* Effect.forEach(Array.from({ length: AlpacaClient.PACE.limit }), () => client.account(credentials), {
        concurrency: 8
      })
      yield* client.account(credentials)
      const paced = Date.now() - started
      // Another account's calls do not wait for this one's pace (its own key is refused, at once).
      const before = Date.now()
      yield* Effect.either(client.account(other))
      const otherWaited = Date.now() - before
      // The 46th call waits for the first token refilled: 20 s / 45 after the first call.
      expect(paced).toBeGreaterThanOrEqual(400)
      expect(otherWaited).toBeLessThan(400)
    }))

  it.scoped("calls are also counted in the store instances share: past the account's share of the minute, the next waits", () =>
    Effect.gen(function*() {
      const { credentials } = yield* setup
      const buckets: Array<string> = []
      let calls = 0
      // A shared store whose fourth count is over the account's share, with a second to the next minute.
      const shared: RateLimiterService["Type"] = {
        consume: (bucket, limit) =>
          Effect.sync(() => {
            buckets.push(bucket)
            calls++
            return { allowed: calls !== 4, limit, remaining: 0, reset: 0, retryAfter: 1 }
          })
      }
      const client = yield* AlpacaClient.make({ shared })
      const started = Date.now()
      for (let i = 0; i < 3; i++) yield* client.account(credentials)
      const beforeTheShareRanOut = Date.now() - started
      yield* client.account(credentials)
      expect(Date.now() - started - beforeTheShareRanOut).toBeGreaterThanOrEqual(900)
      expect(calls).toBe(5)
      expect(new Set(buckets).size).toBe(1)
      expect(buckets[0]).toMatch(/^alpaca:[0-9a-f]{32}$/)
      expect(buckets[0]).not.toContain(credentials.apiKeyId)
    }))

  it.scoped("a resting order is canceled on request; a second cancel is not cancelable", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      fake.setBehaviour("rest")
      const placed = yield* client.submit(credentials, { clientOrderId: newClientOrderId(), spec: market })
      expect(AlpacaSchemas.orderStatus(placed)).toBe("new")
      yield* client.cancel(credentials, placed.id)
      expect(AlpacaSchemas.orderStatus(yield* client.getOrder(credentials, placed.id))).toBe("canceled")
      const again = yield* Effect.flip(client.cancel(credentials, placed.id))
      expect(again._tag).toBe("AlpacaNotCancelable")
      const missing = yield* Effect.flip(client.getOrder(credentials, randomUUID()))
      expect(missing._tag).toBe("AlpacaOrderNotFound")
    }))

  it.scoped("a refusal is rejected with Alpaca's message, and nothing is placed", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      fake.setBehaviour("reject", "AAPL")
      const error = yield* Effect.flip(client.submit(credentials, { clientOrderId: newClientOrderId(), spec: market }))
      expect(error).toMatchObject({ _tag: "AlpacaRejected", status: 403, reason: "insufficient buying power" })
      expect(fake.orders()).toHaveLength(0)
    }))

  it.scoped("a 422 for a taken client order id adopts the existing order", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      const clientOrderId = newClientOrderId()
      const first = yield* client.submit(credentials, { clientOrderId, spec: market })
      const second = yield* client.submit(credentials, { clientOrderId, spec: market })
      expect(second.id).toBe(first.id)
      expect(fake.orders()).toHaveLength(1)
      expect(fake.requests().map((request) => `${request.method} ${request.path.split("?")[0]}`)).toStrictEqual([
        "POST /v2/orders",
        "POST /v2/orders",
        "GET /v2/orders:by_client_order_id"
      ])
    }))

  it.scoped("a 504 after accepting is an unknown outcome; the lookup finds the one order", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      fake.setBehaviour("timeout_after_accept")
      const clientOrderId = newClientOrderId()
      const error = yield* Effect.flip(client.submit(credentials, { clientOrderId, spec: market }))
      expect(error._tag).toBe("BrokerTimeout")
      const found = yield* client.byClientOrderId(credentials, clientOrderId)
      expect(Option.map(found, (order) => order.client_order_id)).toStrictEqual(Option.some(clientOrderId))
      expect(fake.orders().filter((order) => order.client_order_id === clientOrderId)).toHaveLength(1)
      expect(fake.requests()[1]?.path).toBe(`/v2/orders:by_client_order_id?client_order_id=${clientOrderId}`)
    }))

  it.scoped("a 429 is an unknown outcome; the lookup finds none, and a later submission places exactly one", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      fake.setBehaviour("rate_limited")
      const clientOrderId = newClientOrderId()
      const error = yield* Effect.flip(client.submit(credentials, { clientOrderId, spec: market }))
      expect(error._tag).toBe("BrokerTimeout")
      expect(yield* client.byClientOrderId(credentials, clientOrderId)).toStrictEqual(Option.none())
      fake.setBehaviour("fill")
      yield* client.submit(credentials, { clientOrderId, spec: market })
      expect(fake.orders().filter((order) => order.client_order_id === clientOrderId)).toHaveLength(1)
    }))

  it.scoped("credentials Alpaca does not know are refused; known ones answer the account", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      const account = yield* client.account(credentials)
      expect(account.status).toBe("ACTIVE")
      const wrong = { ...credentials, apiSecretKey: Redacted.make("wrong") }
      expect((yield* Effect.flip(client.account(wrong)))._tag).toBe("AlpacaCredentialsRefused")
      const refused = yield* Effect.flip(client.submit(wrong, { clientOrderId: newClientOrderId(), spec: market }))
      expect(refused._tag).toBe("AlpacaCredentialsRefused")
      fake.setRefusalStatus(403)
      expect((yield* Effect.flip(client.account(wrong)))._tag).toBe("AlpacaCredentialsRefused")
    }))

  it.scoped("the secret key reaches Alpaca but no span", () =>
    Effect.gen(function*() {
      const { client, credentials } = yield* setup
      const { spans } = yield* withSpansRecorded(client.account(credentials))
      const attributes = spans.flatMap((span) => [...span.attributes.entries()])
      expect(attributes.map(([name]) => name)).toContain("http.request.header.apca-api-key-id")
      expect(attributes.some(([, value]) => String(value).includes("fake-secret-key"))).toBe(false)
    }))

  it.scoped("an unknown status decodes and counts as open", () =>
    Effect.gen(function*() {
      const { client, credentials, fake } = yield* setup
      fake.setBehaviour("rest")
      const placed = yield* client.submit(credentials, { clientOrderId: newClientOrderId(), spec: market })
      fake.setStatus(placed.id, "pending_review_by_a_new_desk")
      const order = yield* client.getOrder(credentials, placed.id)
      expect(order.status).toBe("pending_review_by_a_new_desk")
      expect(AlpacaSchemas.orderStatus(order)).toBe("new")
      fake.partialFill(placed.id)
      fake.setStatus(placed.id, "pending_review_by_a_new_desk")
      expect(AlpacaSchemas.orderStatus(yield* client.getOrder(credentials, placed.id))).toBe("partially_filled")
    }))
})

describe("AlpacaClient when Alpaca cannot be reached", () => {
  const credentials = (baseUrl: string): AlpacaClient.Credentials => ({
    baseUrl,
    apiKeyId: "fake-key-id",
    apiSecretKey: Redacted.make("fake-secret-key")
  })

  /** A server on a free loopback port: answering never, or closed before use. */
  const server = (state: "silent" | "closed") =>
    Effect.acquireRelease(
      Effect.async<Http.Server>((resume) => {
        const server = Http.createServer(() => {})
        server.listen(0, "127.0.0.1", () => {
          if (state === "closed") server.close(() => resume(Effect.succeed(server)))
          else resume(Effect.succeed(server))
        })
      }),
      (server) =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          if (server.listening) server.close(() => resume(Effect.void))
          else resume(Effect.void)
        })
    )

  const urlOf = (server: Http.Server) => {
    const address = server.address()
    return `http://127.0.0.1:${address !== null && typeof address === "object" ? address.port : 1}`
  }

  it.scopedLive("a refused connection is unavailable: the order certainly was not sent", () =>
    Effect.gen(function*() {
      const closed = yield* server("closed")
      const client = yield* AlpacaClient.make()
      const error = yield* Effect.flip(client.submit(credentials(urlOf(closed)), {
        clientOrderId: newClientOrderId(),
        spec: market
      }))
      expect(error._tag).toBe("BrokerUnavailable")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("no answer in time is an unknown outcome", () =>
    Effect.gen(function*() {
      const silent = yield* server("silent")
      const client = yield* AlpacaClient.make({ timeout: "300 millis" })
      const error = yield* Effect.flip(client.submit(credentials(urlOf(silent)), {
        clientOrderId: newClientOrderId(),
        spec: market
      }))
      expect(error._tag).toBe("BrokerTimeout")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it("decimals are never sent in exponent notation", () => {
    expect(AlpacaClient.decimal(1e-7)).toBe("0.0000001")
    expect(AlpacaClient.decimal(123.456)).toBe("123.456")
    expect(AlpacaClient.decimal(2.5e-8)).toBe("0.000000025")
    expect(AlpacaClient.decimal(999999999999999)).toBe("999999999999999")
  })
})
