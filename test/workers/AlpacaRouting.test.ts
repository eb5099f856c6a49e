import { describe, expect, layer } from "@effect/vitest"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import type { TradeIntent } from "../../src/domain/Intent.js"
import type { BrokerId, IntentId, Owner } from "../../src/domain/Ids.js"
import { clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { Operators } from "../../src/services/accounts/Operators.js"
import * as FakeAlpaca from "../../src/services/brokers/alpaca/FakeAlpaca.js"
import { FakeAlpacaServer } from "../../src/services/brokers/alpaca/FakeAlpaca.js"
import { type Creator, Intents } from "../../src/services/intents/Intents.js"
import * as Database from "../../src/sql/Database.js"
import { batchesOf } from "../support/Batches.js"
import * as Postgres from "../support/Postgres.js"
import * as Receiver from "../support/Receiver.js"
import * as TestServer from "../support/TestServer.js"

const backends = [
  ["PGlite", Database.migrated(Database.pglite(undefined))],
  ["PostgreSQL", Postgres.layerFresh]
] as const

const SECRET = "fake-secret-key"

/** The whole service with its workers, Alpaca's endpoints pointing at a fake started for the suite. */
const service = <E, R>(database: Layer.Layer<Database.Notifications | SqlClient.SqlClient, E, R>) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const fake = yield* FakeAlpaca.make()
    const endpoints = { api: fake.url, stream: fake.streamUrl }
    return Services.layer(
      { ...TestServer.options, alpaca: { endpoints: { paper: endpoints, live: endpoints }, timeout: "1 second" } },
      {
        routing: { retryDelays: [Duration.millis(50), Duration.millis(100)], pollInterval: "200 millis" },
        webhooks: TestServer.webhooks,
        streams: { reconcileInterval: "1 second", lease: "3 seconds" }
      }
    ).pipe(Layer.merge(Layer.succeed(FakeAlpacaServer, fake)))
  })).pipe(Layer.provideMerge(database), Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))

/** A user with a live connection to an account of its own at the fake (Alpaca allows one stream per account). */
const connected = Effect.gen(function*() {
  const fake = yield* FakeAlpacaServer
  const operators = yield* Operators
  const keyId = `PK${crypto.randomUUID().replaceAll("-", "").slice(0, 18).toUpperCase()}`
  fake.addCredentials(keyId, SECRET)
  const user = yield* operators.createUser({ name: "Ada", tier: "enterprise" })
  const broker = yield* operators.createBroker(user.id, {
    name: "Alpaca paper",
    kind: "alpaca",
    mode: "live",
    credentials: { api_key_id: keyId, api_secret_key: SECRET }
  })
  const owner: Owner = { userId: user.id, mode: "live" }
  return { owner, keyId, brokerId: broker.id, creator: { ...owner, intentsPerMonth: 10_000 } }
})

const market = { side: "buy", quantity: 10, order_type: "market", time_in_force: "day" } as const

const isFinal = (intent: TradeIntent) => ["filled", "canceled", "rejected", "failed"].includes(intent.status)

/** The intent, once `done` says so (about 10 s at most). */
const until = (owner: Owner, id: IntentId, done: (intent: TradeIntent) => boolean = isFinal) =>
  Effect.gen(function*() {
    const intents = yield* Intents
    for (let i = 0; i < 200; i++) {
      const intent = yield* intents.get(owner, id)
      if (done(intent)) return intent
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.dieMessage(`intent ${id} did not settle`)
  })

const ordersOf = (fake: FakeAlpaca.FakeAlpaca, id: string) =>
  fake.orders().filter((order) => order.client_order_id === clientOrderId(id))

/** Creates an intent for `symbol` (a fresh symbol per test keeps the fake's behaviours apart). */
const submit = (setup: { readonly brokerId: BrokerId; readonly creator: Creator }, symbol: string, overrides: object = {}) =>
  Effect.flatMap(Intents, (intents) =>
    intents.create(setup.creator, {
      intent_id: `${symbol}-${crypto.randomUUID()}`,
      symbol,
      broker_id: setup.brokerId,
      ...market,
      ...overrides
    }))

for (const [name, database] of backends) {
  layer(service(database), { timeout: 60_000, excludeTestServices: true })(`routing to Alpaca on ${name}`, (it) => {
    describe("submission and fills", () => {
      it.effect("a market order: the exact request Alpaca receives, then its fill from the stream", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          const created = yield* submit(setup, "AAPL")
          const intent = yield* until(setup.owner, created.id)
          expect(intent.status).toBe("filled")
          const post = fake.requests().find((r) => r.method === "POST" && r.path === "/v2/orders" &&
            JSON.stringify(r.body).includes(created.id))
          expect(post?.body).toStrictEqual({
            symbol: "AAPL",
            qty: "10",
            side: "buy",
            type: "market",
            time_in_force: "day",
            extended_hours: false,
            client_order_id: `tir-${created.id}`
          })
          expect(clientOrderId(created.id)).toHaveLength(40)
          expect(post?.headers["apca-api-key-id"]).toBe(setup.keyId)
          expect(post?.headers["apca-api-secret-key"]).toBe(SECRET)
          const [order] = ordersOf(fake, created.id)
          expect(ordersOf(fake, created.id)).toHaveLength(1)
          expect(intent.orders.map((o) => [o.broker_order_id, o.status])).toEqual([[order?.id, "filled"]])
          const fills = fake.fills().filter((fill) => fill.order_id === order?.id)
          expect(intent.orders[0]?.fills.map((f) => [f.quantity, f.price])).toEqual([[10, 100]])
          expect(fills).toHaveLength(1)
        }))

      it.effect("decimals go as strings, exactly as the intent holds them; limit and stop prices where set", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("rest", "DECI")
          const created = yield* submit(setup, "DECI", {
            quantity: 0.5,
            order_type: "stop_limit",
            limit_price: 123.45,
            stop_price: 0.000001,
            time_in_force: "gtc",
            side: "sell"
          })
          yield* until(setup.owner, created.id, () => ordersOf(fake, created.id).length > 0)
          const post = fake.requests().find((r) => r.method === "POST" && JSON.stringify(r.body).includes(created.id))
          expect(post?.body).toMatchObject({
            qty: "0.5",
            type: "stop_limit",
            side: "sell",
            time_in_force: "gtc",
            limit_price: "123.45",
            stop_price: "0.000001"
          })
        }))

      it.effect("a partial fill, then the rest: partially_filled, then filled with both executions", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("partial", "PART")
          const created = yield* submit(setup, "PART")
          const partial = yield* until(setup.owner, created.id, (intent) => intent.status !== "pending")
          expect(partial.status).toBe("partially_filled")
          expect(partial.orders[0]?.fills.map((f) => f.quantity)).toEqual([5])
          const [order] = ordersOf(fake, created.id)
          fake.fill(order?.id ?? "")
          const filled = yield* until(setup.owner, created.id)
          expect(filled.status).toBe("filled")
          expect(filled.orders[0]?.fills.map((f) => f.quantity)).toEqual([5, 5])
        }))

      it.effect("a refusal (403 insufficient buying power): rejected with Alpaca's message, no order", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("reject", "POOR")
          const created = yield* submit(setup, "POOR")
          const intent = yield* until(setup.owner, created.id)
          expect(intent).toMatchObject({ status: "rejected", status_reason: "insufficient buying power", orders: [] })
          expect(ordersOf(fake, created.id)).toEqual([])
        }))

      it.effect("fills of many orders heard together on one account are recorded together, not one statement each", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("rest", "MANY")
          // Fills sent before the stream listens would be found by reconciliation instead.
          yield* Receiver.until(() => fake.streamConnections(setup.keyId).current === 1)
          const created = yield* Effect.forEach(Array.from({ length: 10 }), () => submit(setup, "MANY"))
          for (const intent of created) yield* until(setup.owner, intent.id, (seen) => seen.orders.length > 0)
          const { batches, calls } = yield* batchesOf("routing_record", Effect.gen(function*() {
            for (const intent of created) for (const order of ordersOf(fake, intent.id)) fake.fill(order.id)
            for (const intent of created) yield* until(setup.owner, intent.id)
          }))
          for (const intent of created) {
            const filled = yield* until(setup.owner, intent.id)
            expect(filled.status).toBe("filled")
            expect(filled.orders[0]?.fills.map((f) => f.quantity)).toEqual([10])
          }
          // Recorded one after another, each fill would have been a statement of its own.
          expect(calls).toBeGreaterThanOrEqual(10)
          expect(batches).toBeLessThanOrEqual(5)
        }))
    })

    describe("never a duplicate order", () => {
      for (
        const [behaviour, why] of [
          ["timeout_after_accept", "a 504 after Alpaca accepted"],
          ["rate_limited", "a 429"],
          ["hang_after_accept", "a timeout after Alpaca accepted"]
        ] as const
      ) {
        it.effect(`${why}: the order is looked up, adopted or placed once, and filled`, () =>
          Effect.gen(function*() {
            const fake = yield* FakeAlpacaServer
            const setup = yield* connected
            const symbol = `DUP${behaviour.length}`
            fake.setBehaviour(behaviour, symbol, 1)
            const created = yield* submit(setup, symbol)
            const intent = yield* until(setup.owner, created.id)
            expect(intent.status).toBe("filled")
            expect(ordersOf(fake, created.id)).toHaveLength(1)
            expect(intent.orders).toHaveLength(1)
            expect(intent.orders[0]?.fills.map((f) => f.quantity)).toEqual([10])
            const lookups = fake.requests().filter((r) =>
              r.path === `/v2/orders:by_client_order_id?client_order_id=${clientOrderId(created.id)}`
            )
            expect(lookups.length).toBeGreaterThanOrEqual(1)
          }))
      }
    })

    describe("no lost fill", () => {
      it.effect("dropped stream events: reconciliation records every execution once and the intent ends filled", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("rest", "DROP")
          const created = yield* submit(setup, "DROP")
          yield* until(setup.owner, created.id, () => ordersOf(fake, created.id).length > 0)
          const [order] = ordersOf(fake, created.id)
          fake.dropEvents(1)
          fake.partialFill(order?.id ?? "")
          fake.fill(order?.id ?? "")
          const intent = yield* until(setup.owner, created.id)
          expect(intent.status).toBe("filled")
          const executions = fake.fills().filter((fill) => fill.order_id === order?.id)
          expect(intent.orders[0]?.fills.map((f) => f.quantity).sort()).toEqual(executions.map((f) => Number(f.qty)).sort())
          expect(intent.orders[0]?.fills).toHaveLength(2)
          // Reconciliation reads the recorded order by its own id, and its FILL activities.
          const reads = fake.requests().filter((r) => r.method === "GET")
          expect(reads.some((r) => r.path === `/v2/orders/${order?.id}`)).toBe(true)
          expect(reads.some((r) => r.path.startsWith("/v2/account/activities/FILL"))).toBe(true)
        }))

      it.effect("a dropped connection: the stream comes back, and a fill meanwhile is recorded once", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("rest", "CONN")
          const created = yield* submit(setup, "CONN")
          yield* until(setup.owner, created.id, () => ordersOf(fake, created.id).length > 0)
          const [order] = ordersOf(fake, created.id)
          fake.dropConnections()
          fake.fill(order?.id ?? "")
          const intent = yield* until(setup.owner, created.id)
          expect(intent.status).toBe("filled")
          expect(intent.orders[0]?.fills).toHaveLength(1)
          // The stream was made again, and only ever once at a time.
          yield* until(setup.owner, created.id, () => fake.streamConnections(setup.keyId).current === 1)
          expect(fake.streamConnections(setup.keyId).max).toBe(1)
        }))
    })

    describe("fills while reconciling", () => {
      it.effect("a fill heard while the reconnect's reconciliation still waits on Alpaca is recorded at once", () =>
        Effect.scoped(Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("rest", "SLOW")
          yield* Receiver.until(() => fake.streamConnections(setup.keyId).current === 1)
          const first = yield* submit(setup, "SLOW")
          const second = yield* submit(setup, "SLOW")
          for (const intent of [first, second]) yield* until(setup.owner, intent.id, (seen) => seen.orders.length > 0)
          // This account's (dropping the connections reconnects every account's stream).
          const lookups = () =>
            fake.requests().filter((r) =>
              r.method === "GET" && r.path.startsWith("/v2/orders") && r.headers["apca-api-key-id"] === setup.keyId
            ).length
          const before = lookups()
          // Alpaca slow to answer: the reconnect's reconciliation asks for both open orders and waits.
          fake.holdLookups(true)
          yield* Effect.addFinalizer(() => Effect.sync(() => fake.holdLookups(false)))
          fake.dropConnections()
          yield* Receiver.until(() => lookups() > before)
          const [order] = ordersOf(fake, first.id)
          fake.fill(order?.id ?? "")
          const filled = yield* until(setup.owner, first.id)
          expect(filled.status).toBe("filled")
          expect(lookups()).toBe(before + 1) // the reconciliation is still on its first lookup
          fake.holdLookups(false)
          yield* Receiver.until(() => lookups() === before + 2)
          expect((yield* until(setup.owner, second.id, () => true)).status).toBe("pending")
        })))
    })

    describe("cancel", () => {
      it.effect("a resting order: DELETE at Alpaca, then canceled by the client", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("rest", "REST")
          const created = yield* submit(setup, "REST")
          yield* until(setup.owner, created.id, () => ordersOf(fake, created.id).length > 0)
          yield* until(setup.owner, created.id, (intent) => intent.orders.length > 0)
          const intents = yield* Intents
          yield* intents.cancel(setup.owner, created.id)
          const intent = yield* until(setup.owner, created.id)
          expect(intent).toMatchObject({ status: "canceled", status_reason: "Canceled by the client" })
          const [order] = ordersOf(fake, created.id)
          expect(order?.status).toBe("canceled")
          expect(fake.requests().some((r) => r.method === "DELETE" && r.path === `/v2/orders/${order?.id}`)).toBe(true)
        }))

      it.effect("a cancel racing a fill ends consistent: filled with its fill, or canceled without one", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const setup = yield* connected
          fake.setBehaviour("rest", "RACE")
          const created = yield* submit(setup, "RACE")
          yield* until(setup.owner, created.id, (intent) => intent.orders.length > 0)
          const [order] = ordersOf(fake, created.id)
          const intents = yield* Intents
          fake.fill(order?.id ?? "")
          yield* intents.cancel(setup.owner, created.id)
          const intent = yield* until(setup.owner, created.id)
          const fills = intent.orders.flatMap((o) => o.fills)
          if (intent.status === "filled") expect(fills.map((f) => f.quantity)).toEqual([10])
          else expect([intent.status, fills]).toEqual(["canceled", []])
          expect(ordersOf(fake, created.id)[0]?.status).toBe(intent.status)
        }))
    })

    describe("credentials", () => {
      it.effect("credentials Alpaca starts refusing: the intent fails with the reason, the connection is invalid until they are replaced", () =>
        Effect.gen(function*() {
          const fake = yield* FakeAlpacaServer
          const accounts = yield* AccountRepository
          const operators = yield* Operators
          const user = yield* operators.createUser({ name: "Bo", tier: "pro" })
          fake.addCredentials("soon-revoked", "its-secret")
          const broker = yield* operators.createBroker(user.id, {
            name: "Alpaca",
            kind: "alpaca",
            mode: "live",
            credentials: { api_key_id: "soon-revoked", api_secret_key: "its-secret" }
          })
          fake.revokeCredentials("soon-revoked")
          const owner: Owner = { userId: user.id, mode: "live" }
          const created = yield* submit({ brokerId: broker.id, creator: { ...owner, intentsPerMonth: 100 } }, "KEYS")
          const intent = yield* until(owner, created.id)
          expect(intent).toMatchObject({ status: "failed", status_reason: "Alpaca refused the credentials", orders: [] })
          const secrets = yield* accounts.findBrokerSecrets(broker.id)
          expect(Option.map(secrets, (s) => s.status)).toStrictEqual(Option.some("invalid"))
          // Every later intent fails without calling Alpaca, until the credentials are replaced.
          const posts = () => fake.requests().filter((r) => r.method === "POST" && r.headers["apca-api-key-id"] === "soon-revoked")
          const postsBefore = posts().length
          const again = yield* submit({ brokerId: broker.id, creator: { ...owner, intentsPerMonth: 100 } }, "KEYS")
          expect(yield* until(owner, again.id)).toMatchObject({ status: "failed", status_reason: "Alpaca refused the credentials" })
          expect(posts()).toHaveLength(postsBefore)
          fake.addCredentials("replacement", "new-secret")
          const replaced = yield* operators.replaceBrokerCredentials(broker.id, {
            api_key_id: "replacement",
            api_secret_key: "new-secret"
          })
          expect(replaced.status).toBe("active")
          const afterwards = yield* submit({ brokerId: broker.id, creator: { ...owner, intentsPerMonth: 100 } }, "KEYS")
          expect(yield* until(owner, afterwards.id)).toMatchObject({ status: "filled" })
        }))
    })
  })
}
