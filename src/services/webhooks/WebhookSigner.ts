import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { sign } from "../../domain/WebhookSignature.js"

/** Signs a delivery (`v1=` HMAC-SHA256 of `<timestamp>.<body>`) at the current time of Effect's `Clock`. */
export class WebhookSigner extends Context.Tag("WebhookSigner")<WebhookSigner, {
  /** `sr-timestamp` (Unix seconds, now) and `sr-signature` (`v1=…`) for this body. */
  readonly sign: (
    secret: Redacted.Redacted<string>,
    body: string
  ) => Effect.Effect<{ readonly timestamp: number; readonly signature: string }>
}>() {
  static readonly layer = Layer.succeed(this, {
    sign: (secret, body) =>
      Effect.map(Clock.currentTimeMillis, (millis) => {
        const timestamp = Math.floor(millis / 1000)
        return { timestamp, signature: sign(Redacted.value(secret), timestamp, body) }
      })
  })
}
