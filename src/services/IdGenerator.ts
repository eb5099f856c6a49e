import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Crypto from "node:crypto"

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

const POOL_BYTES = 4096

/**
 * Random bytes from the system's CSPRNG, drawn in blocks of 4 KiB and handed out once each (as
 * `crypto.randomUUID` does): one system call per block instead of one per id. A request needs
 * more than a block only for an unusually long secret, which gets its own draw.
 */
const randomPool = () => {
  let pool = Buffer.alloc(0)
  let offset = 0
  return (bytes: number): Buffer => {
    if (bytes > POOL_BYTES) return Crypto.randomBytes(bytes)
    if (offset + bytes > pool.length) {
      pool = Crypto.randomFillSync(Buffer.allocUnsafe(POOL_BYTES))
      offset = 0
    }
    const drawn = pool.subarray(offset, offset + bytes)
    offset += bytes
    return drawn
  }
}

/** Unbiased base62: bytes of 248 and above are rejected rather than folded. */
const base62 = (random: (bytes: number) => Buffer, length: number): string => {
  let out = ""
  while (out.length < length) {
    for (const byte of random(length * 2)) {
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
  static readonly layer = Layer.sync(this, () => {
    const random = randomPool()
    return {
      uuid: Effect.sync(() => Crypto.randomUUID()),
      base62: (length) => Effect.sync(() => base62(random, length)),
      hex: (bytes) => Effect.sync(() => random(bytes).toString("hex"))
    }
  })
}

/**
 * `evt_` and 32 hex characters: an event's id, sent to webhooks as `sr-event-id`, from the
 * generator in hand (not from context: providing the generator copies the fiber's context).
 */
export const eventIdFrom = (ids: Context.Tag.Service<IdGenerator>): Effect.Effect<string> =>
  Effect.map(ids.hex(16), (hex) => `evt_${hex}`)
