import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"

/** scrypt's cost: 2^15 iterations of 32 MiB, about 50 ms of one core per hash. */
const COST = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const
const KEY_LENGTH = 32

const derive = (password: string, salt: Buffer, cost: { readonly N: number; readonly r: number; readonly p: number }) =>
  Effect.async<Buffer>((resume) => {
    Crypto.scrypt(password.normalize("NFKC"), salt, KEY_LENGTH, { ...cost, maxmem: COST.maxmem }, (error, key) =>
      resume(error === null ? Effect.succeed(key) : Effect.die(error)))
  })

/** `scrypt$N$r$p$<salt>$<key>` (base64): the parameters travel with the hash, so they can grow later. */
export const hash = (password: string, salt: Buffer) =>
  Effect.map(
    derive(password, salt, COST),
    (key) => `scrypt$${COST.N}$${COST.r}$${COST.p}$${salt.toString("base64")}$${key.toString("base64")}`
  )

/** Whether `password` is the one `stored` was made from; compared in constant time. */
export const verify = (password: string, stored: string) =>
  Effect.gen(function*() {
    const [scheme, n, r, p, salt, key] = stored.split("$")
    if (scheme !== "scrypt" || salt === undefined || key === undefined) return false
    const expected = Buffer.from(key, "base64")
    const derived = yield* derive(password, Buffer.from(salt, "base64"), { N: Number(n), r: Number(r), p: Number(p) })
    return derived.length === expected.length && Crypto.timingSafeEqual(derived, expected)
  })

/**
 * A hash of no one's password, checked when a login names an unknown email: the answer takes as
 * long as for a known one, so timing does not tell which emails have accounts.
 */
export const decoy = hash("decoy password, never valid", Buffer.alloc(16))
