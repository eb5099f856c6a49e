import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import * as Net from "node:net"
import { type RawData, WebSocket, WebSocketServer } from "ws"
import * as AlpacaSchemas from "../../../src/services/brokers/alpaca/AlpacaSchemas.js"
import * as AlpacaStream from "../../../src/services/brokers/alpaca/AlpacaStream.js"
import * as FakeAlpaca from "../../../src/services/brokers/alpaca/FakeAlpaca.js"
import { withSpansRecorded } from "../../support/Spans.js"

const KEY = { keyId: "fake-key-id", secretKey: "fake-secret-key" }
const FAST: AlpacaStream.Options = { minBackoff: "20 millis", maxBackoff: "200 millis" }

const credentialsOf = (key: { readonly keyId: string; readonly secretKey: string }): AlpacaStream.StreamCredentials => ({
  apiKeyId: key.keyId,
  apiSecretKey: Redacted.make(key.secretKey)
})

/** The stream run in the background for the test's scope, its events queued. */
const subscribe = (url: string, key = KEY, options: AlpacaStream.Options = FAST) =>
  Effect.gen(function*() {
    const events = yield* Queue.unbounded<AlpacaStream.StreamEvent>()
    const fiber = yield* AlpacaStream.updates(url, credentialsOf(key), options).pipe(
      Stream.runForEach((event) => Queue.offer(events, event)),
      Effect.forkScoped
    )
    return { events, fiber }
  })

const next = (events: Queue.Queue<AlpacaStream.StreamEvent>) =>
  Queue.take(events).pipe(Effect.timeoutFail({ duration: "3 seconds", onTimeout: () => new Error("no event in time") }))

const nextUpdate = (events: Queue.Queue<AlpacaStream.StreamEvent>) =>
  Effect.flatMap(next(events), (event) =>
    event._tag === "TradeUpdate" ? Effect.succeed(event.update) : Effect.fail(new Error(`expected an update, got ${event._tag}`)))

/** Nothing arrives for a while. */
const quiet = (events: Queue.Queue<AlpacaStream.StreamEvent>, millis = 150) =>
  Effect.gen(function*() {
    yield* Effect.sleep(millis)
    expect(Chunk.toReadonlyArray(yield* Queue.takeAll(events))).toStrictEqual([])
  })

const SubmittedOrder = Schema.Struct({ id: Schema.String, client_order_id: Schema.String, status: Schema.String, filled_qty: Schema.String })

/** Places a market order through the fake's REST API, as a client would. */
const submit = (fake: FakeAlpaca.FakeAlpaca, symbol = "AAPL", key = KEY) =>
  Effect.promise(async () => {
    const response = await fetch(`${fake.url}/v2/orders`, {
      method: "POST",
      headers: { "apca-api-key-id": key.keyId, "apca-api-secret-key": key.secretKey, "content-type": "application/json" },
      body: JSON.stringify({
        symbol,
        qty: "10",
        side: "buy",
        type: "market",
        time_in_force: "day",
        client_order_id: `tir-${randomUUID()}`
      })
    })
    const body: unknown = await response.json()
    return { status: response.status, headers: response.headers, body }
  }).pipe(Effect.flatMap(({ body, headers, status }) =>
    Effect.map(Schema.decodeUnknown(SubmittedOrder)(body), (order) => ({ status, headers, order }))
  ), Effect.orDie)

const control = (fake: FakeAlpaca.FakeAlpaca, method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${fake.url}${path}`, {
      method,
      ...(body !== undefined ? { headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {})
    })
    const answer: unknown = await response.json()
    return { status: response.status, body: answer }
  })

/** Waits until a condition holds, checking every 10 ms, for up to 3 seconds. */
const eventually = (check: () => boolean) =>
  Effect.gen(function*() {
    for (let tries = 0; tries < 300; tries++) {
      if (check()) return
      yield* Effect.sleep(10)
    }
    expect(check()).toBe(true)
  })

/** A WebSocket server of the test's own on a loopback port, closed with the test's scope. */
const ownServer = Effect.acquireRelease(
  Effect.async<WebSocketServer>((resume) => {
    const server: WebSocketServer = new WebSocketServer(
      { port: 0, host: "127.0.0.1" },
      (): void => resume(Effect.succeed(server))
    )
  }),
  (server) =>
    Effect.async<void>((resume) => {
      for (const client of server.clients) client.terminate()
      server.close(() => resume(Effect.void))
    })
)

const urlOf = (server: WebSocketServer) => {
  const address = server.address()
  return `ws://127.0.0.1:${address !== null && typeof address === "object" ? address.port : 1}`
}

/** Answers the stream's sign-in and `listen` as Alpaca does, then calls `listening`. */
const signIn = (socket: WebSocket, listening: () => void) =>
  socket.on("message", (data: RawData) => {
    const message: unknown = JSON.parse(String(data))
    const action = typeof message === "object" && message !== null && "action" in message ? message.action : null
    if (action === "authenticate") {
      socket.send(JSON.stringify({ stream: "authorization", data: { action: "authenticate", status: "authorized" } }))
    } else {
      socket.send(JSON.stringify({ stream: "listening", data: { streams: ["trade_updates"] } }))
      listening()
    }
  })

describe("AlpacaStream against the fake Alpaca", () => {
  it.scopedLive("connects, then an order's new and fill arrive; the fill's execution id is its FILL activity's", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const { events } = yield* subscribe(fake.streamUrl)
      expect(yield* next(events)).toStrictEqual({ _tag: "Connected" })
      const { order, status } = yield* submit(fake)
      // Accepted at once; the executions follow the answer.
      expect(status).toBe(200)
      expect(order).toMatchObject({ status: "accepted", filled_qty: "0" })
      const created = yield* nextUpdate(events)
      expect(created.event).toBe("new")
      expect(created.order.id).toBe(order.id)
      expect(created.order.status).toBe("new")
      const filled = yield* nextUpdate(events)
      expect(filled).toMatchObject({ event: "fill", price: 100, qty: 10 })
      expect(filled.order).toMatchObject({ id: order.id, status: "filled", filled_qty: 10 })
      const [activity] = fake.fills()
      expect(filled.execution_id).toBeTypeOf("string")
      expect(activity?.id).toMatch(/^\d{17}::/)
      expect(activity?.id.split("::")[1]).toBe(filled.execution_id)
    }))

  it.scopedLive("frames are binary, as Alpaca's paper endpoint sends them; text frames are read too", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const frames = yield* Effect.async<ReadonlyArray<{ readonly binary: boolean; readonly text: string }>>((resume) => {
        const seen: Array<{ binary: boolean; text: string }> = []
        const socket = new WebSocket(fake.streamUrl)
        socket.on("open", () =>
          socket.send(JSON.stringify({ action: "auth", key: KEY.keyId, secret: KEY.secretKey })))
        socket.on("message", (data: RawData, binary: boolean) => {
          seen.push({ binary, text: String(data) })
          if (seen.length === 1) socket.send(JSON.stringify({ action: "listen", data: { streams: ["trade_updates"] } }))
          else {
            socket.close()
            resume(Effect.succeed(seen))
          }
        })
      })
      expect(frames.map((frame) => frame.binary)).toStrictEqual([true, true])
      expect(frames.map((frame): unknown => JSON.parse(frame.text))).toStrictEqual([
        { stream: "authorization", data: { action: "authenticate", status: "authorized" } },
        { stream: "listening", data: { streams: ["trade_updates"] } }
      ])

      const text = yield* FakeAlpaca.make({ frames: "text" })
      const { events } = yield* subscribe(text.streamUrl)
      expect(yield* next(events)).toStrictEqual({ _tag: "Connected" })
      yield* submit(text)
      expect((yield* nextUpdate(events)).event).toBe("new")
      expect((yield* nextUpdate(events)).event).toBe("fill")
    }))

  it.scopedLive("wrong or revoked credentials end the stream with AlpacaCredentialsRefused, without the secret", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const wrong = yield* Effect.flip(
        Stream.runDrain(AlpacaStream.updates(fake.streamUrl, credentialsOf({ keyId: KEY.keyId, secretKey: "wrong-secret" }), FAST))
      )
      expect(wrong._tag).toBe("AlpacaCredentialsRefused")
      expect(JSON.stringify(wrong)).not.toContain("wrong-secret")

      fake.addCredentials("key-b", "secret-b")
      fake.revokeCredentials("key-b")
      const revoked = yield* Effect.flip(
        Stream.runDrain(AlpacaStream.updates(fake.streamUrl, credentialsOf({ keyId: "key-b", secretKey: "secret-b" }), FAST))
      )
      expect(revoked._tag).toBe("AlpacaCredentialsRefused")
      const rest = yield* Effect.promise(() =>
        fetch(`${fake.url}/v2/account`, { headers: { "apca-api-key-id": "key-b", "apca-api-secret-key": "secret-b" } })
          .then(async (response) => ({ status: response.status, body: await response.text() }))
      )
      expect(rest.status).toBe(401)
      expect(JSON.parse(rest.body)).toStrictEqual({ code: 40110000, message: "request is not authorized" })
    }))

  it.scopedLive("the secret key reaches no log line and no span, through a refusal and a reconnection", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const lines: Array<string> = []
      const logger = Logger.make(({ annotations, message }) => {
        lines.push(JSON.stringify({ message, annotations: [...HashMap.toEntries(annotations)] }))
      })
      const program = Effect.gen(function*() {
        yield* Effect.flip(Stream.runDrain(
          AlpacaStream.updates(fake.streamUrl, credentialsOf({ keyId: KEY.keyId, secretKey: "not-the-secret" }), FAST)
        ))
        const { events } = yield* subscribe(fake.streamUrl)
        yield* next(events)
        fake.dropConnections()
        yield* next(events)
      })
      const { spans } = yield* withSpansRecorded(program).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      expect(lines.some((line) => line.includes("reconnecting"))).toBe(true)
      const seen = [...lines, ...spans.flatMap((span) => [...span.attributes.values()].map(String))].join("\n")
      expect(seen).not.toContain(KEY.secretKey)
      expect(seen).not.toContain("not-the-secret")
    }))

  it.scopedLive("after the connections drop, it reconnects: Connected again, and later events arrive", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const { events } = yield* subscribe(fake.streamUrl)
      expect(yield* next(events)).toStrictEqual({ _tag: "Connected" })
      fake.dropConnections()
      expect(yield* next(events)).toStrictEqual({ _tag: "Connected" })
      const { order } = yield* submit(fake)
      const received = [yield* nextUpdate(events), yield* nextUpdate(events)]
      expect(received.map((update) => [update.event, update.order.id])).toStrictEqual([["new", order.id], ["fill", order.id]])
      expect(fake.streamConnections()).toStrictEqual({ current: 1, max: 1 })
    }))

  it.scopedLive("a dropped event is missing; the order changed all the same, and the next events arrive", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const { events } = yield* subscribe(fake.streamUrl)
      yield* next(events)
      fake.dropEvents(1)
      const { order } = yield* submit(fake)
      const fill = yield* nextUpdate(events)
      expect([fill.event, fill.order.id]).toStrictEqual(["fill", order.id])
      yield* quiet(events)
      expect(fake.orders()[0]?.status).toBe("filled")
      yield* submit(fake)
      expect((yield* nextUpdate(events)).event).toBe("new")
      expect((yield* nextUpdate(events)).event).toBe("fill")
    }))

  it.scopedLive("accounts are apart: one account's events, orders and fills are not another's", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const b = { keyId: "key-b", secretKey: "secret-b" }
      fake.addCredentials(b.keyId, b.secretKey)
      const streamA = yield* subscribe(fake.streamUrl)
      const streamB = yield* subscribe(fake.streamUrl, b)
      yield* next(streamA.events)
      yield* next(streamB.events)
      const { order } = yield* submit(fake)
      expect((yield* nextUpdate(streamA.events)).event).toBe("new")
      expect((yield* nextUpdate(streamA.events)).event).toBe("fill")
      yield* quiet(streamB.events)
      const lookup = yield* Effect.promise(() =>
        fetch(`${fake.url}/v2/orders/${order.id}`, { headers: { "apca-api-key-id": b.keyId, "apca-api-secret-key": b.secretKey } })
      )
      expect(lookup.status).toBe(404)
      expect(fake.orders(b.keyId)).toStrictEqual([])
      expect(fake.fills(b.keyId)).toStrictEqual([])
      const { order: own } = yield* submit(fake, "AAPL", b)
      expect((yield* nextUpdate(streamB.events)).order.id).toBe(own.id)
      expect(fake.orders(KEY.keyId).map((placed) => placed.id)).toStrictEqual([order.id])
    }))

  it.scopedLive("connections are counted per account, current and most at once; ending the stream closes its socket", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const first = yield* subscribe(fake.streamUrl)
      const second = yield* subscribe(fake.streamUrl)
      yield* next(first.events)
      yield* next(second.events)
      expect(fake.streamConnections()).toStrictEqual({ current: 2, max: 2 })
      expect(fake.streamConnections("key-b")).toStrictEqual({ current: 0, max: 0 })
      yield* Fiber.interrupt(second.fiber)
      yield* eventually(() => fake.streamConnections().current === 1)
      expect(fake.streamConnections()).toStrictEqual({ current: 1, max: 2 })
      yield* Fiber.interrupt(first.fiber)
      yield* eventually(() => fake.streamConnections().current === 0)
    }))

  it.scopedLive("a silent server is dropped after two heartbeats and connected to again", () =>
    Effect.gen(function*() {
      // Accepts TCP connections and never answers the upgrade.
      const sockets = new Set<Net.Socket>()
      let accepted = 0
      const server = yield* Effect.acquireRelease(
        Effect.async<Net.Server>((resume) => {
          const server = Net.createServer((socket) => {
            accepted++
            sockets.add(socket)
            socket.on("error", () => {})
            socket.on("close", () => sockets.delete(socket))
            // Read (and ignore) the handshake, so the client's closing is seen.
            socket.resume()
          })
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) =>
          Effect.async<void>((resume) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => resume(Effect.void))
          })
      )
      const address = server.address()
      const port = address !== null && typeof address === "object" ? address.port : 1
      const { fiber } = yield* subscribe(`ws://127.0.0.1:${port}/stream`, KEY, { ...FAST, heartbeat: "50 millis" })
      yield* eventually(() => accepted >= 2)
      yield* Fiber.interrupt(fiber)
      yield* eventually(() => sockets.size === 0)
    }))

  it.scopedLive("a trade update that cannot be read is skipped; the next one arrives", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const server = yield* ownServer
      const order = fake.orders()[0] ?? (yield* submit(fake)).order
      const stored = fake.orders().find((placed) => placed.id === order.id)
      server.on("connection", (socket: WebSocket) =>
        signIn(socket, () => {
          socket.send(JSON.stringify({ stream: "trade_updates", data: { event: "fill", order: { id: 1 } } }))
          socket.send(JSON.stringify({ stream: "something_new", data: {} }))
          // A number where Alpaca mostly sends a string, and a field routing does not read.
          socket.send(
            JSON.stringify({ stream: "trade_updates", data: { event: "held", price: 12.5, extra: true, order: stored } })
          )
        }))
      const { events } = yield* subscribe(urlOf(server))
      expect(yield* next(events)).toStrictEqual({ _tag: "Connected" })
      const update = yield* nextUpdate(events)
      expect(update).toMatchObject({ event: "held", price: 12.5 })
      expect(update.order.id).toBe(order.id)
    }))

  it.scopedLive("a consumer that falls behind stops the reading: the updates wait at the sender, the connection is kept, none is lost", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const server = yield* ownServer
      const { order } = yield* submit(fake)
      const stored = fake.orders().find((placed) => placed.id === order.id)
      // About 20 MB of updates, far more than the kernel's buffers between two loopback sockets hold.
      const count = 2_000
      const padding = "x".repeat(10_000)
      const sockets: Array<WebSocket> = []
      server.on("connection", (socket: WebSocket) => {
        sockets.push(socket)
        signIn(socket, () => {
          for (let i = 0; i < count; i++) {
            socket.send(JSON.stringify({ stream: "trade_updates", data: { event: "held", execution_id: String(i), padding, order: stored } }))
          }
        })
      })
      // The consumer takes nothing until the gate opens. A heartbeat every 50 ms would drop a
      // connection silent for 100 ms: a paused one is not judged by its silence.
      const gate = yield* Deferred.make<void>()
      const received: Array<string> = []
      yield* AlpacaStream.updates(urlOf(server), credentialsOf(KEY), { ...FAST, heartbeat: "50 millis" }).pipe(
        Stream.runForEach((event) =>
          Effect.zipRight(
            Deferred.await(gate),
            Effect.sync(() => received.push(event._tag === "TradeUpdate" ? event.update.execution_id ?? "" : event._tag))
          )),
        Effect.forkScoped
      )
      yield* eventually(() => sockets.length === 1 && sockets[0]!.bufferedAmount > 0)
      yield* Effect.sleep(500)
      // Had the stream kept reading, the sender's buffer would be empty by now.
      expect(sockets[0]!.bufferedAmount).toBeGreaterThan(1_000_000)
      expect(received).toStrictEqual([])

      yield* Deferred.succeed(gate, undefined)
      yield* eventually(() => received.length === count + 1)
      expect(received).toStrictEqual(["Connected", ...Array.from({ length: count }, (_, i) => String(i))])
      expect(sockets).toHaveLength(1)
      expect(sockets[0]!.bufferedAmount).toBe(0)
    }))
})

describe("The fake Alpaca's switches", () => {
  it.scopedLive("the control API drives a behaviour and a fill; control calls are not recorded", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const { events } = yield* subscribe(fake.streamUrl)
      yield* next(events)
      expect((yield* control(fake, "POST", "/_fake/behaviour", { behaviour: "rest", symbol: "AAPL" })).status).toBe(200)
      const { order } = yield* submit(fake)
      expect((yield* nextUpdate(events)).event).toBe("new")
      yield* quiet(events)
      const listed = yield* control(fake, "GET", "/_fake/orders")
      expect(listed.body).toMatchObject([{ id: order.id, account: KEY.keyId, status: "new" }])
      expect((yield* control(fake, "POST", `/_fake/orders/${order.id}/partial_fill`)).status).toBe(200)
      expect(yield* nextUpdate(events)).toMatchObject({ event: "partial_fill", qty: 5 })
      expect((yield* control(fake, "POST", `/_fake/orders/${order.id}/fill`)).status).toBe(200)
      expect(yield* nextUpdate(events)).toMatchObject({ event: "fill", qty: 5, order: { status: "filled" } })
      expect((yield* control(fake, "POST", `/_fake/orders/${order.id}/cancel`)).status).toBe(422)
      expect((yield* control(fake, "GET", "/_fake/streams")).body).toStrictEqual({ [KEY.keyId]: { current: 1, max: 1 } })
      const requests = yield* control(fake, "GET", "/_fake/requests")
      expect(requests.body).toMatchObject([{ method: "POST", path: "/v2/orders" }])
      expect(fake.requests()).toHaveLength(1)
      expect((yield* control(fake, "POST", "/_fake/credentials", { key_id: "key-c", secret_key: "secret-c" })).status)
        .toBe(200)
      expect((yield* submit(fake, "AAPL", { keyId: "key-c", secretKey: "secret-c" })).status).toBe(200)
      expect((yield* control(fake, "DELETE", "/_fake/credentials/key-c")).status).toBe(200)
      yield* control(fake, "POST", "/_fake/drop-events", { count: 1 })
      yield* control(fake, "POST", "/_fake/drop-connections")
      expect(yield* next(events)).toStrictEqual({ _tag: "Connected" })
      yield* control(fake, "POST", "/_fake/reset")
      expect(fake.orders()).toStrictEqual([])
    }))

  it.scopedLive("a client order id names one order per account: taken again a 422, free on another account and after a reset", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const other = { keyId: "key-d", secretKey: "secret-d" }
      fake.addCredentials(other.keyId, other.secretKey)
      const place = (key: { readonly keyId: string; readonly secretKey: string }, clientOrderId: string) =>
        Effect.promise(async () => {
          const response = await fetch(`${fake.url}/v2/orders`, {
            method: "POST",
            headers: { "apca-api-key-id": key.keyId, "apca-api-secret-key": key.secretKey, "content-type": "application/json" },
            body: JSON.stringify({ symbol: "AAPL", qty: "1", side: "buy", type: "market", time_in_force: "day", client_order_id: clientOrderId })
          })
          return { status: response.status, body: await response.text() }
        })
      const clientOrderId = `tir-${randomUUID()}`
      expect((yield* place(KEY, clientOrderId)).status).toBe(200)
      const taken = yield* place(KEY, clientOrderId)
      expect(taken.status).toBe(422)
      expect(JSON.parse(taken.body)).toStrictEqual({ code: 40010001, message: "client_order_id must be unique" })
      expect((yield* place(other, clientOrderId)).status).toBe(200)
      expect(fake.orders().filter((order) => order.client_order_id === clientOrderId)).toHaveLength(2)
      fake.reset()
      expect((yield* place(KEY, clientOrderId)).status).toBe(200)
      expect(fake.orders()).toHaveLength(1)
    }))

  it.scopedLive("a cancel is answered 204, then canceled; a counted behaviour goes back to fill; 429 says when to retry", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const { events } = yield* subscribe(fake.streamUrl)
      yield* next(events)
      fake.setBehaviour("rest", "AAPL", 1)
      const { order } = yield* submit(fake)
      expect((yield* nextUpdate(events)).event).toBe("new")
      const deleted = yield* Effect.promise(() =>
        fetch(`${fake.url}/v2/orders/${order.id}`, {
          method: "DELETE",
          headers: { "apca-api-key-id": KEY.keyId, "apca-api-secret-key": KEY.secretKey }
        })
      )
      expect(deleted.status).toBe(204)
      expect(yield* nextUpdate(events)).toMatchObject({ event: "canceled", order: { status: "canceled" } })
      yield* submit(fake)
      expect((yield* nextUpdate(events)).event).toBe("new")
      expect((yield* nextUpdate(events)).event).toBe("fill")

      fake.setBehaviour("rate_limited")
      const limited = yield* Effect.promise(() =>
        fetch(`${fake.url}/v2/orders`, {
          method: "POST",
          headers: { "apca-api-key-id": KEY.keyId, "apca-api-secret-key": KEY.secretKey },
          body: JSON.stringify({ symbol: "MSFT", qty: "1" })
        })
      )
      expect(limited.status).toBe(429)
      expect(limited.headers.get("retry-after")).toBe("1")
      expect(fake.orders()).toHaveLength(2)
    }))

  it.scopedLive("hang_after_accept places and fills the order but never answers until released", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      const { events } = yield* subscribe(fake.streamUrl)
      yield* next(events)
      fake.setBehaviour("hang_after_accept")
      const hanging = yield* Effect.fork(submit(fake))
      expect((yield* nextUpdate(events)).event).toBe("new")
      expect((yield* nextUpdate(events)).event).toBe("fill")
      expect(fake.orders()[0]?.status).toBe("filled")
      yield* Effect.sleep(100)
      expect(hanging.unsafePoll()).toBeNull()
      fake.releaseHungRequests()
      const outcome = yield* Effect.exit(Fiber.join(hanging))
      expect(outcome._tag).toBe("Failure")
    }))

  it.scopedLive("held lookups are received and answered only once released, in order; other calls are answered meanwhile", () =>
    Effect.gen(function*() {
      const fake = yield* FakeAlpaca.make()
      fake.setBehaviour("rest")
      const { order } = yield* submit(fake)
      const lookup = (path: string) =>
        Effect.promise(async () => {
          const response = await fetch(`${fake.url}${path}`, { headers: { "apca-api-key-id": KEY.keyId, "apca-api-secret-key": KEY.secretKey } })
          const body: unknown = await response.json()
          return { status: response.status, body }
        })
      expect((yield* control(fake, "POST", "/_fake/hold-lookups", { held: true })).status).toBe(200)
      const byId = yield* Effect.fork(lookup(`/v2/orders/${order.id}`))
      const byClientId = yield* Effect.fork(lookup(`/v2/orders:by_client_order_id?client_order_id=${order.client_order_id}`))
      yield* eventually(() => fake.requests().filter((r) => r.method === "GET").length === 2)
      expect((yield* submit(fake)).status).toBe(200)
      yield* Effect.sleep(50)
      expect(byId.unsafePoll()).toBeNull()
      expect(byClientId.unsafePoll()).toBeNull()
      fake.holdLookups(false)
      expect(yield* Fiber.join(byId)).toMatchObject({ status: 200, body: { id: order.id } })
      expect(yield* Fiber.join(byClientId)).toMatchObject({ status: 200, body: { id: order.id } })
      expect((yield* lookup(`/v2/orders/${order.id}`)).status).toBe(200)
    }))

  it("decimals are read from strings and from numbers", () => {
    const decode = Schema.decodeUnknownSync(AlpacaSchemas.TradeUpdate)
    const order = {
      id: "o",
      client_order_id: "c",
      symbol: "AAPL",
      qty: 10,
      filled_qty: "2.5",
      filled_avg_price: null,
      status: "partially_filled",
      type: "market",
      side: "buy",
      time_in_force: "day",
      created_at: "2026-01-01T00:00:00Z",
      updated_at: "2026-01-01T00:00:00Z"
    }
    expect(decode({ event: "partial_fill", price: "100.5", qty: 2.5, order })).toMatchObject({
      price: 100.5,
      qty: 2.5,
      order: { qty: 10, filled_qty: 2.5 }
    })
  })
})
