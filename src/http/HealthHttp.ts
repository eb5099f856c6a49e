import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Api } from "../api/Api.js"
import { Unavailable } from "../domain/Errors.js"
import { Health } from "../services/Health.js"

export const HealthHttpLive = HttpApiBuilder.group(Api, "health", (handlers) =>
  Effect.gen(function*() {
    const health = yield* Health
    return handlers.handle("health", () =>
      Effect.flatMap(health.check, (ok) =>
        ok ? Effect.succeed({ status: "ok" as const }) : Effect.fail(new Unavailable({ detail: "Database unavailable" }))))
  }))
