import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Scheduler from "effect/Scheduler"
import * as Stream from "effect/Stream"
import * as RequestScheduler from "../../src/http/RequestScheduler.js"
import * as Server from "../../src/http/Server.js"
import * as Services from "../../src/Services.js"
import * as TestServer from "../support/TestServer.js"
import { send } from "../support/TestServer.js"

/** Keeps the thread busy for `ms`, as a request's step that computes does. */
const busy = (ms: number) => {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // spinning
  }
}

describe("the requests' scheduler", () => {
  it("runs every step once, in the order it was scheduled, steps scheduled by steps included", async () => {
    const scheduler = RequestScheduler.make()
    const ran: Array<string> = []
    await new Promise<void>((done) => {
      scheduler.scheduleTask(() => {
        ran.push("a")
        scheduler.scheduleTask(() => {
          ran.push("c")
          done()
        }, 0)
      }, 0)
      scheduler.scheduleTask(() => ran.push("b"), 0)
      expect(ran).toEqual([])
    })
    expect(ran).toEqual(["a", "b", "c"])
  })

  it("lets the event loop's other callbacks in once a run of steps has spent its budget", async () => {
    const scheduler = RequestScheduler.make(Duration.millis(2))
    const ran: Array<number> = []
    let timerAfter = -1
    setTimeout(() => {
      timerAfter = ran.length
    }, 0)
    await new Promise<void>((done) => {
      for (let i = 0; i < 30; i++) {
        scheduler.scheduleTask(() => {
          busy(1)
          ran.push(i)
          if (i === 29) done()
        }, 0)
      }
    })
    // Thirty steps of 1 ms in runs of 2 ms: the timer, due after 1 ms, fires between two runs, long
    // before the last step (on a scheduler without a budget it fires after all thirty).
    expect(timerAfter).toBeGreaterThanOrEqual(0)
    expect(timerAfter).toBeLessThan(30)
    expect(ran).toEqual(Array.from({ length: 30 }, (_, i) => i))
  })

  it.live("runs a fiber's whole work, forks and waits included", () =>
    Effect.gen(function*() {
      const scheduler = RequestScheduler.make()
      const child = yield* Effect.fork(Effect.as(Effect.sleep("5 millis"), "child"))
      const result = yield* Effect.withScheduler(
        Effect.gen(function*() {
          const inner = yield* Effect.fork(Effect.map(Effect.yieldNow(), () => "inner"))
          const seen = yield* FiberRef.get(FiberRef.currentScheduler)
          return [yield* Fiber.join(inner), yield* Fiber.join(child), seen === scheduler] as const
        }),
        scheduler
      )
      expect(result).toEqual(["inner", "child", true])
    }))
})

const nameOf = (scheduler: Scheduler.Scheduler) =>
  scheduler === RequestScheduler.requests ? "requests" : scheduler === Scheduler.defaultScheduler ? "default" : "other"

const current = Effect.map(FiberRef.get(FiberRef.currentScheduler), nameOf)

/**
 * Routes that answer with the scheduler their request runs on (and a fork of it), and with the one
 * a streamed answer made `promptly` runs on.
 */
const probe = HttpApiBuilder.Router.use((router) =>
  Effect.zipRight(
    router.get(
      "/probe/scheduler",
      Effect.gen(function*() {
        const own = yield* current
        const forked = yield* Effect.fork(current).pipe(Effect.flatMap(Fiber.join))
        return yield* HttpServerResponse.json({ own, forked })
      })
    ),
    router.get(
      "/probe/stream",
      Effect.succeed(HttpServerResponse.stream(
        Stream.encodeText(RequestScheduler.promptly(Stream.concat(Stream.make("stream:"), Stream.fromEffect(current))))
      ))
    )
  )
)

const served = Server.layer(TestServer.options).pipe(
  Layer.provide(probe),
  Layer.provideMerge(Services.withPorts(Services.portsInMemory(TestServer.options))),
  Layer.provideMerge(NodeHttpServer.layerTest),
  Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
)

layer(served, { timeout: 30_000, excludeTestServices: true })("the server", (it) => {
  it.effect("serves every request on the requests' scheduler, and the fibers it forks", () =>
    Effect.gen(function*() {
      const reply = yield* send("GET", "/probe/scheduler")
      expect(reply.status).toBe(200)
      expect(reply.body).toEqual({ own: "requests", forked: "requests" })
    }))

  it.effect("runs an answer's stream made promptly on the default scheduler, as event streams are", () =>
    Effect.gen(function*() {
      const reply = yield* send("GET", "/probe/stream")
      expect(reply.status).toBe(200)
      expect(reply.text).toBe("stream:default")
    }))
})
