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
  let block = Buffer.alloc(0)
  let offset = 0
  /** Where `bytes` random bytes never handed out before start in {@link current} (`bytes` at most a block). */
  const reserve = (bytes: number): number => {
    if (offset + bytes > block.length) {
      block = Crypto.randomFillSync(Buffer.allocUnsafe(POOL_BYTES))
      offset = 0
    }
    offset += bytes
    return offset - bytes
  }
  return {
    reserve,
    /** The block the last {@link reserve} drew from: read its bytes in place, allocating nothing. */
    current: (): Buffer => block,
    /** `bytes` random bytes, as a view on the block (or a draw of their own, beyond a block). */
    draw: (bytes: number): Buffer => {
      if (bytes > POOL_BYTES) return Crypto.randomBytes(bytes)
      const at = reserve(bytes)
      return block.subarray(at, at + bytes)
    }
  }
}

type RandomPool = ReturnType<typeof randomPool>

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

/** The ASCII codes of the hex digits, by value. */
const HEX_DIGITS = Array.from("0123456789abcdef", (digit) => digit.charCodeAt(0))
const DASH = "-".charCodeAt(0)

/**
 * Time-ordered ids: version 7 UUIDs (RFC 9562) and event ids, each the millisecond of its making
 * in its first 48 bits (12 hex digits), then random bits (74 in a UUID, around its version and
 * variant; 80 in an event id). Ids made later sort after earlier ones, so a new row's id lands at
 * the right-hand edge of each B-tree that holds it (the primary key, and every index led by an
 * intent's id, such as its orders', events' and routing job's) instead of on a random page of it:
 * fewer pages touched and split. The random bits alone keep ids unguessable; the time they show is
 * the row's own `created_at`.
 *
 * Each id is written as ASCII into one buffer and read out as one string (made up of pieces, it
 * would leave a string per piece to the garbage collector), from random bytes read in place in
 * `random`'s block.
 */
const timeOrdered = (random: RandomPool) => {
  const out = Buffer.allocUnsafeSlow(36)
  const time: Array<number> = []
  let millis = -1
  /** The 12 hex digits of `now`, worked out once per millisecond. */
  const timeAt = (now: number) => {
    if (now === millis) return
    millis = now
    const digits = Math.max(0, Math.floor(now)).toString(16).padStart(12, "0").slice(-12)
    for (let i = 0; i < 12; i++) time[i] = digits.charCodeAt(i)
  }
  const byteAt = (at: number, byte: number) => {
    out[at] = HEX_DIGITS[byte >> 4]!
    out[at + 1] = HEX_DIGITS[byte & 15]!
  }
  return {
    /** `tttttttt-tttt-7rrr-Vrrr-rrrrrrrrrrrr`: the time, the version, the variant `V` (8 to b) and 74 random bits. */
    uuid: (now: number): string => {
      timeAt(now)
      const r = random.reserve(10)
      const pool = random.current()
      for (let i = 0; i < 8; i++) out[i] = time[i]!
      out[8] = DASH
      for (let i = 8; i < 12; i++) out[i + 1] = time[i]!
      out[13] = DASH
      out[14] = HEX_DIGITS[7]!
      out[15] = HEX_DIGITS[pool[r]! & 15]!
      byteAt(16, pool[r + 1]!)
      out[18] = DASH
      out[19] = HEX_DIGITS[8 | ((pool[r]! >> 4) & 3)]!
      byteAt(20, pool[r + 2]!)
      out[22] = HEX_DIGITS[pool[r + 3]! & 15]!
      out[23] = DASH
      for (let i = 0; i < 6; i++) byteAt(24 + 2 * i, pool[r + 4 + i]!)
      return out.toString("latin1")
    },
    /** `evt_` and 32 hex digits: the time's 12, then 80 random bits. */
    eventId: (now: number): string => {
      timeAt(now)
      const r = random.reserve(10)
      const pool = random.current()
      out.write("evt_", 0, "latin1")
      for (let i = 0; i < 12; i++) out[4 + i] = time[i]!
      for (let i = 0; i < 10; i++) byteAt(16 + 2 * i, pool[r + i]!)
      return out.toString("latin1")
    }
  }
}

/** All randomness of the service: ids, API key material, secrets. */
export class IdGenerator extends Context.Tag("IdGenerator")<IdGenerator, {
  /** A version 7 UUID, time-ordered (see {@link timeOrdered}). */
  readonly uuid: Effect.Effect<string>
  /** `evt_` and 32 hex digits, time-ordered as `uuid` is: an event's id, sent to webhooks as `sr-event-id`. */
  readonly eventId: Effect.Effect<string>
  readonly base62: (length: number) => Effect.Effect<string>
  readonly hex: (bytes: number) => Effect.Effect<string>
}>() {
  /** Ids read the time from the clock the Layer is built with (a test's `TestClock` in tests). */
  static readonly layer = Layer.effect(
    this,
    Effect.map(Effect.clock, (clock) => {
      const random = randomPool()
      const ordered = timeOrdered(random)
      return {
        uuid: Effect.sync(() => ordered.uuid(clock.unsafeCurrentTimeMillis())),
        eventId: Effect.sync(() => ordered.eventId(clock.unsafeCurrentTimeMillis())),
        base62: (length) => Effect.sync(() => base62(random.draw, length)),
        hex: (bytes) => Effect.sync(() => random.draw(bytes).toString("hex"))
      }
    })
  )
}
