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

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"))

/**
 * A UUID of version 7 (RFC 9562): the millisecond of its making in the first 48 bits, then 74
 * random bits around the version and variant. Ids made later sort after earlier ones, so a new
 * row's id lands at the right-hand edge of each B-tree that holds it (the primary key, and every
 * index led by an intent's id, such as its orders', events' and routing job's) instead of on a
 * random page of it: fewer pages touched, split and written in full to the WAL after each
 * checkpoint. The random bits alone keep ids unguessable; the time they show is the row's own
 * `created_at`.
 */
export const uuidV7 = (random: (bytes: number) => Buffer, millis: number): string => {
  const bytes = random(10)
  const time = Math.max(0, Math.floor(millis))
  const high = Math.floor(time / 0x1000000)
  const low = time % 0x1000000
  return HEX[(high >>> 16) & 0xff]! + HEX[(high >>> 8) & 0xff]! + HEX[high & 0xff]! + HEX[(low >>> 16) & 0xff]! + "-" +
    HEX[(low >>> 8) & 0xff]! + HEX[low & 0xff]! + "-" +
    HEX[0x70 | (bytes[0]! & 0x0f)]! + HEX[bytes[1]!]! + "-" +
    HEX[0x80 | (bytes[2]! & 0x3f)]! + HEX[bytes[3]!]! + "-" +
    HEX[bytes[4]!]! + HEX[bytes[5]!]! + HEX[bytes[6]!]! + HEX[bytes[7]!]! + HEX[bytes[8]!]! + HEX[bytes[9]!]!
}

/** All randomness of the service: ids, API key material, secrets. */
export class IdGenerator extends Context.Tag("IdGenerator")<IdGenerator, {
  readonly uuid: Effect.Effect<string>
  readonly base62: (length: number) => Effect.Effect<string>
  readonly hex: (bytes: number) => Effect.Effect<string>
}>() {
  /** Ids read the time from the clock the Layer is built with (a test's `TestClock` in tests). */
  static readonly layer = Layer.effect(
    this,
    Effect.map(Effect.clock, (clock) => {
      const random = randomPool()
      return {
        uuid: Effect.sync(() => uuidV7(random, clock.unsafeCurrentTimeMillis())),
        base62: (length) => Effect.sync(() => base62(random, length)),
        hex: (bytes) => Effect.sync(() => random(bytes).toString("hex"))
      }
    })
  )
}

/**
 * `evt_` and 32 hex characters, the digits of a version 7 UUID (time-ordered, as the events'
 * primary key prefers): an event's id, sent to webhooks as `sr-event-id`, from the generator in
 * hand (not from context: providing the generator copies the fiber's context).
 */
export const eventIdFrom = (ids: Context.Tag.Service<IdGenerator>): Effect.Effect<string> =>
  Effect.map(ids.uuid, (uuid) => `evt_${uuid.replaceAll("-", "")}`)
