import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { IntentId, Owner } from "../../src/domain/Ids.js"
import type { NewIntent } from "../../src/domain/Intent.js"
import { clientOrderId } from "../../src/domain/Routing.js"
import * as Services from "../../src/Services.js"
import { BrokerGateway } from "../../src/services/brokers/BrokerGateway.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { RoutingRepository } from "../../src/services/routing/RoutingRepository.js"
import * as Database from "../../src/sql/Database.js"
import * as RoutingWorker from "../../src/workers/RoutingWorker.js"
import { eventId, newIntent, seedUser } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"
import * as TestServer from "../support/TestServer.js"

const backends = [
  ["PGlite", Database.migrated(Database.pglite(undefined))],
  ["PostgreSQL", Postgres.layerFresh]
] as const

const worker = RoutingWorker.layer({ retryDelays: [Duration.millis(10)], pollInterval: "100 millis", lease: "1 second" })

/** An intent created with its submit job, no worker running yet. */
const created = (overrides: Partial<NewIntent> = {}) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const { testBroker, user } = yield* seedUser
    const owner: Owner = { userId: user.id, mode: "test" }
    const input = newIntent(owner, testBroker.id, overrides)
    yield* intents.create(input, { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
    return { owner, input, connection: { id: testBroker.id, kind: "mock" as const } }
  })

/**
 * A worker that claimed the submission, reached the broker (which accepted the order) and died
 * before recording it: the job is claimed once, its lease expired, and the broker holds the order.
 */
const workerDiedAfterBrokerAccepted = (setup: Effect.Effect.Success<ReturnType<typeof created>>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const broker = yield* BrokerGateway
    yield* sql`UPDATE routing_jobs SET claims = 1, locked_until = now() - interval '1 second'
               WHERE intent_id = ${setup.input.id} AND kind = 'submit'`
    yield* broker.submit(setup.connection, { clientOrderId: clientOrderId(setup.input.id), spec: setup.input })
  })

const settled = (owner: Owner, id: IntentId, done: (status: string) => boolean) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    for (let i = 0; i < 200; i++) {
      const intent = Option.getOrThrow(yield* intents.findById(owner, id))
      if (done(intent.status)) return intent
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.dieMessage(`intent ${id} did not settle`)
  })

const brokerOrders = (id: IntentId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ status: string; submissions: number }>`SELECT status, submissions FROM mock_broker_orders
                                                 WHERE client_order_id = ${clientOrderId(id)}`)

const isFinal = (status: string) => ["filled", "canceled", "rejected", "failed"].includes(status)

for (const [name, database] of backends) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`no order without a record on ${name}`, (it) => {
    describe("item 1: a cancel never orphans an order that may have reached the broker", () => {
      it.scoped("a cancel after a worker died between the broker's accept and the record: the broker decides (filled)", () =>
        Effect.gen(function*() {
          const setup = yield* created()
          yield* workerDiedAfterBrokerAccepted(setup)
          const intents = yield* IntentRepository
          // The lease has expired, but the job was claimed: no local cancel.
          const answer = yield* intents.requestCancel(setup.owner, setup.input.id, {
            now: yield* DateTime.now,
            eventId: eventId()
          })
          expect(answer).toBe("requested")
          yield* Layer.build(worker)
          const intent = yield* settled(setup.owner, setup.input.id, isFinal)
          expect(intent.status).toBe("filled")
          expect(intent.orders).toHaveLength(1)
          expect(intent.orders[0]?.fills).toHaveLength(1)
          expect(yield* brokerOrders(setup.input.id)).toEqual([{ status: "filled", submissions: 1 }])
        }))

      it.scoped("the same with a resting order: it is recorded, then canceled at the broker", () =>
        Effect.gen(function*() {
          const setup = yield* created({ symbol: "HOLD" })
          yield* workerDiedAfterBrokerAccepted(setup)
          const intents = yield* IntentRepository
          const now = yield* DateTime.now
          expect(yield* intents.requestCancel(setup.owner, setup.input.id, { now, eventId: eventId() })).toBe("requested")
          yield* Layer.build(worker)
          const intent = yield* settled(setup.owner, setup.input.id, isFinal)
          expect(intent.status).toBe("canceled")
          expect(intent.orders.map((order) => order.status)).toEqual(["canceled"])
          expect(yield* brokerOrders(setup.input.id)).toEqual([{ status: "canceled", submissions: 1 }])
        }))

      it.scoped("a worker taking over a claimed submission with a cancel pending asks the broker first", () =>
        Effect.gen(function*() {
          const setup = yield* created()
          yield* workerDiedAfterBrokerAccepted(setup)
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE intents SET cancel_requested_at = now() WHERE id = ${setup.input.id}`
          yield* Layer.build(worker)
          const intent = yield* settled(setup.owner, setup.input.id, isFinal)
          expect(intent.status).toBe("filled")
          expect(intent.orders).toHaveLength(1)
        }))

      it.scoped("a claimed submission the broker never received is canceled once the broker says it has none", () =>
        Effect.gen(function*() {
          const setup = yield* created()
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE routing_jobs SET claims = 1, locked_until = now() - interval '1 second'
                     WHERE intent_id = ${setup.input.id}`
          const intents = yield* IntentRepository
          const now = yield* DateTime.now
          expect(yield* intents.requestCancel(setup.owner, setup.input.id, { now, eventId: eventId() })).toBe("requested")
          yield* Layer.build(worker)
          const intent = yield* settled(setup.owner, setup.input.id, isFinal)
          expect(intent).toMatchObject({ status: "canceled", status_reason: "Canceled by the client before submission" })
          expect(intent.orders).toEqual([])
          expect(yield* brokerOrders(setup.input.id)).toEqual([])
        }))

      it.scoped("a submission never claimed is canceled at once, and nothing reaches the broker", () =>
        Effect.gen(function*() {
          const setup = yield* created()
          const intents = yield* IntentRepository
          const now = yield* DateTime.now
          expect(yield* intents.requestCancel(setup.owner, setup.input.id, { now, eventId: eventId() })).toBe("canceled")
          yield* Layer.build(worker)
          yield* Effect.sleep("300 millis")
          expect(yield* brokerOrders(setup.input.id)).toEqual([])
          const sql = yield* SqlClient.SqlClient
          expect(yield* sql`SELECT 1 FROM routing_jobs WHERE intent_id = ${setup.input.id}`).toEqual([])
        }))
    })

    describe("item 3: enqueuing a running job again never releases it to a second worker", () => {
      it.effect("the job stays held; its worker hands it back to run again instead of deleting it", () =>
        Effect.gen(function*() {
          const routing = yield* RoutingRepository
          const sql = yield* SqlClient.SqlClient
          const setup = yield* created({ symbol: "HOLD" })
          yield* sql`DELETE FROM routing_jobs` // this test's job alone
          const now = yield* DateTime.now
          yield* routing.enqueue(setup.input.id, "sync", now)
          const [job] = yield* routing.claim(10, Duration.seconds(30))
          expect(job).toMatchObject({ intentId: setup.input.id, kind: "sync", claims: 1 })
          // Enqueued again while it runs: no other worker may claim it.
          yield* routing.enqueue(setup.input.id, "sync", now)
          expect(yield* routing.claim(10, Duration.seconds(30))).toEqual([])
          // Its worker finishes the old run: the job comes back for the new one, claimed once more.
          yield* routing.finish(job!)
          const [again] = yield* routing.claim(10, Duration.seconds(30))
          expect(again).toMatchObject({ intentId: setup.input.id, kind: "sync", claims: 2 })
          yield* routing.finish(again!)
          expect(yield* routing.claim(10, Duration.seconds(30))).toEqual([])
          expect(yield* sql`SELECT 1 FROM routing_jobs WHERE intent_id = ${setup.input.id}`).toEqual([])
        }))
    })
  })
}
