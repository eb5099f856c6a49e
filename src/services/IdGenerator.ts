import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Crypto from "node:crypto"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** Unbiased base62: bytes of 248 and above are rejected rather than folded. */
const base62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    for (const byte of Crypto.randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

/** All randomness of the service: ids, API key material, secrets. */
export class IdGenerator extends Context.Tag("IdGenerator")<IdGenerator, {
  readonly uuid: Effect.Effect<string>
  readonly base62: (length: number) => Effect.Effect<string>
  readonly hex: (bytes: number) => Effect.Effect<string>
}>() {
  static readonly layer = Layer.succeed(this, {
    uuid: Effect.sync(() => Crypto.randomUUID()),
    base62: (length) => Effect.sync(() => base62(length)),
    hex: (bytes) => Effect.sync(() => Crypto.randomBytes(bytes).toString("hex"))
  })
}

/** `evt_` and 32 hex characters: an event's id, sent to webhooks as `sr-event-id`. */
export const eventId = Effect.flatMap(IdGenerator, (ids) => Effect.map(ids.hex(16), (hex) => `evt_${hex}`))
