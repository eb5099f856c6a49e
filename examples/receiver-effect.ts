import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { decodeEvent, type ReceivedEvent, verifyRequest } from "trade-intent-router/receiver"

// A webhook receiver as an Effect route: verifyRequest reads the raw body and checks it with Clock.
export const webhookRoutes = (secret: string, onEvent: (event: ReceivedEvent) => Effect.Effect<void>) =>
  HttpRouter.empty.pipe(
    HttpRouter.post(
      "/hooks",
      Effect.gen(function*() {
        const delivery = yield* verifyRequest(secret)
        yield* onEvent(yield* decodeEvent(delivery.body)) // data is a TradeIntent, or for type "webhook.test" {endpoint_id, message}
        return HttpServerResponse.empty({ status: 204 })
      }).pipe(
        Effect.catchTag("WebhookVerificationError", (error) =>
          HttpServerResponse.json({ reason: error.reason }, { status: 401 }))
      )
    )
  )
