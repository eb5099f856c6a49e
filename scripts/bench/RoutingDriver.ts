/**
 * The routing driver: the service's layers in this one process, without HTTP, on the PostgreSQL
 * database given (fresh, migrated here). `FIBERS` fibers create market buys of one test user
 * through the intent use case (`Intents.createJson`, what POST /api/v1/intents runs once its
 * request is read) against the mock broker, with the routing worker running or without it; the
 * tracer is off and the log shows warnings only, as in the standalone service. After a warm-up,
 * one measured round of `INTENTS` creations, which with routing ends once every intent is filled.
 *
 *   node --import tsx scripts/bench/RoutingDriver.ts <database url> <on|off> <intents> <fibers>
 *
 * It prints one JSON line: the intents, the round's seconds, this process's CPU over the round in µs
 * (user and system, V8's helper threads included) and that of the machine's PostgreSQL processes
 * (meaningless when the database is elsewhere). Run by RoutingCost.ts, once per variant.
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "@effect/sql/SqlClient"
import { randomBytes, randomUUID } from "node:crypto"
import { BrokerId, UserId } from "../../src/domain/Ids.js"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { Intents } from "../../src/services/intents/Intents.js"
import * as Services from "../../src/Services.js"
import * as Database from "../../src/sql/Database.js"
import * as RoutingWorker from "../../src/workers/RoutingWorker.js"
import * as WebhookWorker from "../../src/workers/WebhookWorker.js"
import { postgresCpuMs } from "./ProcessStats.js"

const [databaseUrl, routingArg, intentsArg, fibersArg] = process.argv.slice(2)
if (databaseUrl === undefined || (routingArg !== "on" && routingArg !== "off")) {
  throw new Error("usage: RoutingDriver.ts <database url> <on|off> <intents> <fibers>")
}
const routing = routingArg === "on"
const intents = Number(intentsArg ?? 8000)
const fibers = Number(fibersArg ?? 50)
if (!Number.isInteger(intents) || intents < 1 || !Number.isInteger(fibers) || fibers < 1) {
  throw new Error(`bad intents (${intentsArg}) or fibers (${fibersArg})`)
}

/** The intents created before the measured round, so that V8 has compiled the code it runs. */
const WARM_UP = 3000

/** How often the end of routing is asked for, and for how long at most. */
const POLL = "20 millis"
const ROUTING_TIMEOUT_MS = 60_000

const program = Effect.gen(function*() {
  const accounts = yield* AccountRepository
  const use = yield* Intents
  const sql = yield* SqlClient.SqlClient
  const now = yield* DateTime.now
  const user = yield* accounts.createUser({
    id: UserId.make(randomUUID()),
    name: "routing driver",
    tier: "enterprise",
    requests_per_minute: 1_000_000,
    intents_per_month: 1_000_000,
    created_at: now
  })
  const broker = yield* accounts.createBroker({
    id: BrokerId.make(randomUUID()),
    user_id: user.id,
    name: "mock",
    kind: "mock",
    mode: "test",
    environment: null,
    credentials: null,
    created_at: now
  })
  const creator = { userId: user.id, mode: "test" as const, intentsPerMonth: user.intents_per_month }

  /** Intents of the user not yet filled. */
  const unfilled = Effect.map(
    sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM intents WHERE user_id = ${user.id} AND status <> 'filled'`,
    ([row]) => row?.n ?? 0
  )

  /** `count` creations by `fibers` fibers, each creating one after another; then, with routing, until all are filled. */
  const round = (count: number) =>
    Effect.gen(function*() {
      let left = count
      const creating = Effect.gen(function*() {
        while (left > 0) {
          left -= 1
          yield* use.createJson(creator, {
            intent_id: `drv-${randomUUID()}`,
            broker_id: broker.id,
            symbol: "AAPL",
            side: "buy",
            quantity: 10,
            order_type: "market"
          })
        }
      })
      yield* Effect.all(Array.from({ length: fibers }, () => creating), { concurrency: "unbounded", discard: true })
      const deadline = performance.now() + ROUTING_TIMEOUT_MS
      while (routing) {
        const unrouted = yield* unfilled
        if (unrouted === 0) break
        if (performance.now() > deadline) return yield* Effect.dieMessage(`${unrouted} intents still unfilled after ${ROUTING_TIMEOUT_MS / 1000} s`)
        yield* Effect.sleep(POLL)
      }
    })

  yield* round(Math.min(intents, WARM_UP))
  const started = performance.now()
  const cpu = process.cpuUsage()
  const database = postgresCpuMs()
  yield* round(intents)
  const used = process.cpuUsage(cpu)
  const databaseUs = (postgresCpuMs() - database) * 1000
  const seconds = (performance.now() - started) / 1000
  console.log(JSON.stringify({ intents, seconds, userUs: used.user, systemUs: used.system, databaseUs }))
})

const layer = Layer.unwrapEffect(
  Effect.gen(function*() {
    const workers: Services.WorkerOptions = { routing: yield* RoutingWorker.config, webhooks: yield* WebhookWorker.config }
    const options: Services.ServiceOptions = {
      credentialsKey: Option.some(Redacted.make(randomBytes(32).toString("hex"))),
      rateLimits: { _tag: "Off" }
    }
    return Services.layer(options, routing ? workers : undefined).pipe(
      Layer.provideMerge(Database.migrated(Database.postgres(Redacted.make(databaseUrl))))
    )
  })
).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)), Layer.provide(Layer.setTracerEnabled(false)))

Effect.runPromise(program.pipe(Effect.provide(layer), Effect.scoped)).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
