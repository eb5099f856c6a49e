import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Api } from "../api/Api.js"
import { Unavailable } from "../domain/Errors.js"
import { Health } from "../services/Health.js"

const ok = { status: "ok" as const }

export const HealthHttpLive = HttpApiBuilder.group(Api, "health", (handlers) =>
  Effect.gen(function*() {
    const health = yield* Health
    const ready = Effect.flatMap(health.check, (answers) =>
      answers ? Effect.succeed(ok) : Effect.fail(new Unavailable({ detail: "Database unavailable" })))
    return handlers
      .handle("health", () => ready)
      .handle("ready", () => ready)
      .handle("live", () => Effect.succeed(ok))
  }))
