import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { Notifications, PROBE, supervised } from "../../src/sql/Database.js"
import * as Postgres from "../support/Postgres.js"
import { create as createIntent, order, signUp } from "../support/Scenario.js"
import * as TestServer from "../support/TestServer.js"
import type { IntentId } from "../../src/domain/Ids.js"

const probing = { interval: "2 seconds", timeout: "3 seconds" } as const

describe("supervised LISTEN", () => {
  it.effect("fails once a probe does not come back: a connection that died in silence", () =>
    Effect.gen(function*() {
      const silent = supervised(() => Stream.never, () => Effect.void, probing)
      const fiber = yield* Effect.fork(Stream.runDrain(silent("jobs")))
      yield* TestClock.adjust("4 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.await(fiber)
      expect(Exit.isFailure(exit)).toBe(true)
    }))

  it.effect("fails when a probe cannot be sent: the database is down", () =>
    Effect.gen(function*() {
      const down = supervised(() => Stream.never, () => new SqlError({ message: "ECONNREFUSED" }), probing)
      const fiber = yield* Effect.fork(Stream.runDrain(down("jobs")))
      yield* TestClock.adjust("2 seconds")
      const exit = yield* Fiber.await(fiber)
      expect(Exit.isFailure(exit)).toBe(true)
    }))

  it.effect("fails with the connection's own failure, after passing on what came before it", () =>
    Effect.gen(function*() {
      const lost = new SqlError({ message: "connection terminated" })
      const broken = supervised(
        () => Stream.concat(Stream.make("submit", PROBE, "cancel"), Stream.fail(lost)),
        () => Effect.void,
        probing
      )
      const received = yield* Ref.make<ReadonlyArray<string>>([])
      const exit = yield* broken("jobs").pipe(
        Stream.runForEach((payload) => Ref.update(received, (all) => [...all, payload])),
        Effect.exit
      )
      expect(exit).toEqual(Exit.fail(lost))
      expect(yield* Ref.get(received)).toEqual(["submit", "cancel"])
    }))

  it.effect("keeps listening while probes come back; passes payloads on, probes not", () =>
    Effect.gen(function*() {
      const hub = yield* PubSub.unbounded<{ readonly channel: string; readonly payload: string }>()
      const listen = (channel: string) =>
        Stream.fromPubSub(hub).pipe(
          Stream.filter((n) => n.channel === channel),
          Stream.map((n) => n.payload)
        )
      const notify = (channel: string, payload: string) => Effect.asVoid(PubSub.publish(hub, { channel, payload }))
      const received = yield* Ref.make<ReadonlyArray<string>>([])
      const fiber = yield* supervised(listen, notify, probing)("jobs").pipe(
        Stream.runForEach((payload) => Ref.update(received, (all) => [...all, payload])),
        Effect.fork
      )
      yield* TestClock.adjust("1 second")
      yield* notify("jobs", "submit")
      yield* notify("other", "due")
      yield* TestClock.adjust("30 seconds")
      yield* notify("jobs", PROBE)
      yield* notify("jobs", "cancel")
      yield* TestClock.adjust("30 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      expect(yield* Ref.get(received)).toEqual(["submit", "cancel"])
      yield* Fiber.interrupt(fiber)
    }))
})

/** Waits for `id` to be filled, for at most `seconds`. */
const filled = (key: string, id: IntentId, seconds: number) =>
  Effect.flatMap(TestServer.client(key), ({ intents }) => intents.getIntent({ path: { id } })).pipe(
    Effect.map((intent) => intent.status),
    Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (status) => status === "filled" }),
    Effect.timeoutFail({ duration: `${seconds} seconds`, onTimeout: () => new Error(`intent ${id} not filled`) })
  )

// Workers here never poll (see TestServer): only notifications wake them, so a LISTEN connection
// that is not replaced leaves new intents pending for ever.
layer(TestServer.layer(Postgres.layerFresh), { timeout: 60_000, excludeTestServices: true })(
  "LISTEN on PostgreSQL",
  (it) => {
    it.effect("a healthy LISTEN stream outlives its probes and passes notifications on", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const notifications = yield* Notifications
        const received = yield* Ref.make<ReadonlyArray<string>>([])
        const fiber = yield* notifications.listen("healthy").pipe(
          Stream.runForEach((payload) => Ref.update(received, (all) => [...all, payload])),
          Effect.fork
        )
        yield* Effect.sleep("7 seconds") // past the first two probes
        expect(fiber.unsafePoll()).toBeNull()
        yield* sql`SELECT pg_notify('healthy', 'hello')`
        yield* Effect.sleep("200 millis")
        expect(yield* Ref.get(received)).toEqual(["hello"])
        yield* Fiber.interrupt(fiber)
      }))

    it.effect("a killed LISTEN connection is replaced: routing is woken again", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const user = yield* signUp({ requests_per_minute: 10_000 })
        const create = Effect.map(
          Effect.suspend(() => createIntent(user.testKey, order(user.mockId))),
          (intent) => intent.id
        )
        yield* filled(user.testKey, yield* create, 10)

        const listeners = sql<{ readonly pid: number }>`
          SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND query ~ '^(UN)?LISTEN ' AND pid <> pg_backend_pid()`
        const killed = yield* sql`SELECT pg_terminate_backend(pid) FROM (${listeners}) listening`
        expect(killed.length).toBe(1)

        // Created while nothing listens: this instance's creations hand their submissions to its
        // worker, which needs no notification for them.
        yield* filled(user.testKey, yield* create, 10)
        yield* listeners.pipe(
          Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (rows) => rows.length === 1 }),
          Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("no LISTEN connection again") })
        )
        // A cancel's job reaches the worker only through its notification: the new LISTEN wakes it.
        const { intents } = yield* TestServer.client(user.testKey)
        const held = yield* Effect.map(createIntent(user.testKey, order(user.mockId, { symbol: "HOLD" })), (intent) => intent.id)
        yield* intents.getIntent({ path: { id: held } }).pipe(
          Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (intent) => intent.orders.length > 0 }),
          Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error("the held order was not placed") })
        )
        yield* intents.cancelIntent({ path: { id: held } })
        yield* intents.getIntent({ path: { id: held } }).pipe(
          Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (intent) => intent.status === "canceled" }),
          Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error("the cancel never reached the worker") })
        )
      }))
  }
)
