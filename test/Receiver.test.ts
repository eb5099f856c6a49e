import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as TestClock from "effect/TestClock"
import * as Crypto from "node:crypto"
import {
  decodeEvent,
  InvalidWebhookSecret,
  sign,
  verify,
  verifyWebhook,
  WebhookVerificationError
} from "../src/Receiver.js"
import { WebhookSigner } from "../src/services/webhooks/WebhookSigner.js"

const secret = "5f".repeat(16) + "a0".repeat(16)
const body = JSON.stringify({ id: "evt_0123", type: "intent.filled", created_at: "2026-11-21T00:00:00.000Z", data: { é: "ü" } })
const T = 1_790_000_000

/** The signature scheme computed here with `node:crypto` alone. */
const vector = (timestamp: number, payload: string) =>
  `v1=${Crypto.createHmac("sha256", Buffer.from(secret, "hex")).update(`${timestamp}.${payload}`, "utf8").digest("hex")}`

const headers = (overrides: Record<string, string | undefined> = {}) => ({
  "sr-signature": vector(T, body),
  "sr-timestamp": String(T),
  "sr-event-id": "evt_0123",
  ...overrides
})

const reasonOf = <A>(result: Either.Either<A, WebhookVerificationError | InvalidWebhookSecret>) =>
  Either.isLeft(result) ? (result.left._tag === "WebhookVerificationError" ? result.left.reason : result.left._tag) : "accepted"

/** Verifies at `now` (Unix seconds) under `TestClock`. */
const verifyAt = (now: number, options: { readonly headers: Record<string, string | undefined>; readonly body?: string }) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(now * 1000)
    return reasonOf(yield* Effect.either(verify({ headers: options.headers, body: options.body ?? body, secret })))
  })

describe("the signature", () => {
  it("matches a vector computed with node:crypto, over text and over bytes", () => {
    expect(sign(secret, T, body)).toBe(vector(T, body))
    expect(sign(secret, T, Buffer.from(body))).toBe(vector(T, body))
    expect(sign(secret, T, body)).toMatch(/^v1=[0-9a-f]{64}$/)
  })

  it.effect("WebhookSigner signs at the current time of Effect's Clock", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T * 1000 + 999)
      const signer = yield* WebhookSigner
      const signed = yield* signer.sign(Redacted.make(secret), body)
      expect(signed).toEqual({ timestamp: T, signature: vector(T, body) })
    }).pipe(Effect.provide(WebhookSigner.layer)))
})

describe("the receiver's verifier", () => {
  it.effect("accepts 300 s either way and refuses 301 s, by Effect's Clock", () =>
    Effect.gen(function*() {
      expect(yield* verifyAt(T, { headers: headers() })).toBe("accepted")
      expect(yield* verifyAt(T + 300, { headers: headers() })).toBe("accepted")
      expect(yield* verifyAt(T - 300, { headers: headers() })).toBe("accepted")
      expect(yield* verifyAt(T + 301, { headers: headers() })).toBe("timestamp_expired")
      expect(yield* verifyAt(T - 301, { headers: headers() })).toBe("timestamp_expired")
    }))

  it.effect("produces each of the receiver's reasons from its own input", () =>
    Effect.gen(function*() {
      expect(yield* verifyAt(T, { headers: headers({ "sr-signature": undefined }) })).toBe("missing_signature")
      expect(yield* verifyAt(T, { headers: headers({ "sr-timestamp": undefined }) })).toBe("missing_timestamp")
      for (const bad of ["soon", "1.5", "", "0x10", "1e9"]) {
        expect(yield* verifyAt(T, { headers: headers({ "sr-timestamp": bad }) })).toBe("invalid_timestamp")
      }
      expect(yield* verifyAt(T + 3600, { headers: headers() })).toBe("timestamp_expired")
      const digest = vector(T, body).slice(3)
      expect(yield* verifyAt(T, { headers: headers({ "sr-signature": digest }) })).toBe("invalid_signature_format")
      expect(yield* verifyAt(T, { headers: headers({ "sr-signature": `v2=${digest}` }) })).toBe("invalid_signature_format")
      expect(yield* verifyAt(T, { headers: headers(), body: body.replace("filled", "failed") })).toBe("signature_mismatch")
      expect(yield* verifyAt(T, { headers: headers({ "sr-signature": vector(T + 1, body) }) })).toBe("signature_mismatch")
      expect(yield* verifyAt(T, { headers: headers({ "sr-signature": "v1=00" }) })).toBe("signature_mismatch")
      // The timestamp is part of what is signed: a fresh timestamp on an old signature does not pass.
      expect(yield* verifyAt(T + 10, { headers: headers({ "sr-timestamp": String(T + 10) }) })).toBe("signature_mismatch")
    }))

  it.effect("returns the event id, the timestamp and the raw body; reads headers in any case and form", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T * 1000)
      const upper = Object.fromEntries(Object.entries(headers()).map(([k, v]) => [k.toUpperCase(), v]))
      const fromRecord = yield* verify({ headers: upper, body: Buffer.from(body), secret })
      expect(fromRecord).toEqual({ eventId: "evt_0123", timestamp: T, body })
      const fetchHeaders = new Headers(headers())
      expect(yield* verify({ headers: fetchHeaders, body, secret })).toEqual(fromRecord)
      const nodeHeaders = { ...headers(), "sr-signature": [vector(T, body)] }
      expect(yield* verify({ headers: nodeHeaders, body, secret })).toEqual(fromRecord)
    }))

  it("has a plain async form for programs without Effect", async () => {
    const now = Math.floor(Date.now() / 1000)
    const fresh = { "sr-signature": vector(now, body), "sr-timestamp": String(now), "sr-event-id": "evt_0123" }
    await expect(verifyWebhook({ headers: fresh, body, secret })).resolves.toMatchObject({ eventId: "evt_0123", body })
    const refused = await verifyWebhook({ headers: { ...fresh, "sr-signature": "nope" }, body, secret }).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(WebhookVerificationError)
    expect(refused).toMatchObject({ reason: "invalid_signature_format" })
  })
})

describe("hardening", () => {
  it.effect("item 16: the event id is the signed body's id; an sr-event-id header that differs is refused", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T * 1000)
      const { "sr-event-id": _, ...withoutId } = headers()
      expect(yield* verify({ headers: withoutId, body, secret })).toEqual({ eventId: "evt_0123", timestamp: T, body })
      // The header is not signed: one that names another event must not pass as that event.
      const forged = yield* Effect.flip(verify({ headers: headers({ "sr-event-id": "evt_9999" }), body, secret }))
      expect(forged).toBeInstanceOf(WebhookVerificationError)
      expect(forged).toMatchObject({ reason: "event_id_mismatch" })
      // A genuinely signed body without a string id has no event id to deduplicate on.
      const noId = JSON.stringify({ type: "intent.filled" })
      const signedNoId = { "sr-signature": vector(T, noId), "sr-timestamp": String(T) }
      expect(yield* verifyAt(T, { headers: signedNoId, body: noId })).toBe("event_id_mismatch")
      // The body's own checks come first: a forged body is a signature_mismatch, whatever its id.
      expect(yield* verifyAt(T, { headers: headers({ "sr-event-id": "evt_9999" }), body: body.replace("0123", "9999") }))
        .toBe("signature_mismatch")
    }))

  it.effect("item 16: a secret that is not 64 hex characters is a typed InvalidWebhookSecret, never a thrown TypeError", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T * 1000)
      for (const bad of ["not-hex", "abc", "ab".repeat(16), "zz".repeat(32), ""]) {
        const error = yield* Effect.flip(verify({ headers: headers(), body, secret: bad }))
        expect(error).toBeInstanceOf(InvalidWebhookSecret)
        expect(error._tag).toBe("InvalidWebhookSecret")
      }
      const now = Math.floor(Date.now() / 1000)
      const fresh = { "sr-signature": vector(now, body), "sr-timestamp": String(now) }
      const rejected = yield* Effect.promise(() => verifyWebhook({ headers: fresh, body, secret: "xyz" }).catch((e: unknown) => e))
      expect(rejected).toBeInstanceOf(InvalidWebhookSecret)
    }))

  it.effect("decodes a test event apart from an intent's event", () =>
    Effect.gen(function*() {
      const event = yield* decodeEvent(JSON.stringify({
        id: "evt_00000000000000000000000000000009",
        type: "webhook.test",
        created_at: "2026-11-24T12:00:00.000Z",
        data: { endpoint_id: "5b0f8a52-7a6e-4e4b-9a8e-2d7f1f0c9a11", message: "A test event from the Trade Intent Router" }
      }))
      expect(event.type).toBe("webhook.test")
      expect(event.type === "webhook.test" ? event.data.endpoint_id : undefined).toBe("5b0f8a52-7a6e-4e4b-9a8e-2d7f1f0c9a11")
      const unknown = yield* Effect.either(decodeEvent(JSON.stringify({ id: "evt_1", type: "intent.renamed", created_at: "2026-11-24T12:00:00.000Z", data: {} })))
      expect(Either.isLeft(unknown)).toBe(true)
    }))
})
