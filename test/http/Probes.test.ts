import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Health } from "../../src/services/Health.js"
import * as Services from "../../src/Services.js"
import * as TestServer from "../support/TestServer.js"
import { send } from "../support/TestServer.js"

// The service over in-memory ports whose database never answers.
const unreachable = TestServer.withFakeAlpacas((alpaca) =>
  TestServer.serve(Services.withPorts(Layer.merge(
    Services.portsInMemory({ ...TestServer.options, alpaca }),
    Layer.succeed(Health, { check: Effect.succeed(false) })
  )))
)

layer(unreachable, { timeout: 30_000, excludeTestServices: true })("probes while the database does not answer", (it) => {
  it.effect("/readyz and /healthz are 503 with the error body; /livez is still 200", () =>
    Effect.gen(function*() {
      for (const path of ["/readyz", "/healthz"]) {
        const reply = yield* send("GET", path)
        expect(reply.status).toBe(503)
        expect(reply.body).toMatchObject({ error_code: "service_unavailable", detail: "Database unavailable" })
      }
      const live = yield* send("GET", "/livez")
      expect(live.status).toBe(200)
      expect(live.body).toEqual({ status: "ok" })
    }))
})
