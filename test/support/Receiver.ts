import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import { listen, type Received, type Responder } from "./Harness.js"

export type { Received, Receiver, Responder } from "./Harness.js"

/** The shared loopback receiver, closed with the scope. */
export const receiver = (responder: Responder = () => 200) =>
  Effect.acquireRelease(Effect.promise(() => listen(responder)), (hooks) => Effect.promise(() => hooks.close()))

/** The webhook signature, computed here with `node:crypto` alone, independently of the service's code. */
export const expectedSignature = (secret: string, timestamp: string, body: string) =>
  `v1=${Crypto.createHmac("sha256", Buffer.from(secret, "hex")).update(`${timestamp}.${body}`).digest("hex")}`

/** Whether a received request is signed with `secret` as the webhook scheme says, and its event id matches the body. */
export const isGenuine = (request: Received, secret: string) => {
  const timestamp = String(request.headers["sr-timestamp"])
  const body = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ id: Schema.String })))(request.body)
  return request.headers["sr-signature"] === expectedSignature(secret, timestamp, request.body) &&
    /^\d+$/.test(timestamp) && Math.abs(Number(timestamp) - Date.now() / 1000) <= 300 &&
    request.headers["sr-event-id"] === body.id &&
    request.headers["content-type"] === "application/json"
}

/** Waits until `check` holds (deliveries run in the background), for at most `seconds`. */
export const until = (check: () => boolean, seconds = 10) =>
  Effect.gen(function*() {
    const deadline = Date.now() + seconds * 1000
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.dieMessage("condition not met in time")
      yield* Effect.sleep("20 millis")
    }
  })
