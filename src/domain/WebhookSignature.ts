import * as Either from "effect/Either"
import { identity } from "effect/Function"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"

/** How far a signature's timestamp may be from the receiver's clock, either way. */
export const TOLERANCE_SECONDS = 300

/**
 * Why a receiver refuses a delivery: the six rules on the signature headers, in their order, then
 * `event_id_mismatch`: the signed body has no string `id`, or an `sr-event-id` header names
 * another (the header is not signed; only the body's `id` can be trusted).
 */
export const VerificationFailureReason = Schema.Literal(
  "missing_signature",
  "missing_timestamp",
  "invalid_timestamp",
  "timestamp_expired",
  "invalid_signature_format",
  "signature_mismatch",
  "event_id_mismatch"
)
export type VerificationFailureReason = typeof VerificationFailureReason.Type

const messages: Record<VerificationFailureReason, string> = {
  missing_signature: "The sr-signature header is missing",
  missing_timestamp: "The sr-timestamp header is missing",
  invalid_timestamp: "The sr-timestamp header is not an integer",
  timestamp_expired: `The sr-timestamp is more than ${TOLERANCE_SECONDS} seconds from now`,
  invalid_signature_format: "The sr-signature header does not start with v1=",
  signature_mismatch: "The signature does not match the body",
  event_id_mismatch: "The signed body has no id, or the sr-event-id header differs from it"
}

/** A delivery that fails verification: answer it with 401 and do not process it. */
export class WebhookVerificationError extends Schema.TaggedError<WebhookVerificationError>()(
  "WebhookVerificationError",
  { reason: VerificationFailureReason, message: Schema.String }
) {
  static of(reason: VerificationFailureReason) {
    return new WebhookVerificationError({ reason, message: messages[reason] })
  }
}

/** The receiver was given a secret that is not an endpoint's: 64 hex characters. A setup error, not a bad delivery. */
export class InvalidWebhookSecret extends Schema.TaggedError<InvalidWebhookSecret>()("InvalidWebhookSecret", {
  message: Schema.String
}) {}

/** The key a secret stands for: its 32 hex-decoded bytes. */
export const secretKey = (secret: string): Either.Either<Buffer, InvalidWebhookSecret> =>
  /^[0-9a-fA-F]{64}$/.test(secret)
    ? Either.right(Buffer.from(secret, "hex"))
    : Either.left(new InvalidWebhookSecret({ message: "The webhook secret must be 64 hex characters" }))

const hmac = (key: Buffer, timestamp: number | string, body: string | Uint8Array): string =>
  `v1=${Crypto.createHmac("sha256", key).update(`${timestamp}.`).update(body).digest("hex")}`

/**
 * `v1=` and the lowercase hex HMAC-SHA256, keyed by the hex-decoded secret, of `<timestamp>.<body>`.
 * Throws `InvalidWebhookSecret` when `secret` is not 64 hex characters.
 */
export const sign = (secret: string, timestamp: number | string, body: string | Uint8Array): string =>
  hmac(Either.getOrThrowWith(secretKey(secret), identity), timestamp, body)

/** What a receiver reads off a delivery: the two headers (absent: undefined) and the raw body. */
export interface SignedDelivery {
  readonly signature: string | undefined
  readonly timestamp: string | undefined
  readonly body: string | Uint8Array
}

/**
 * The receiver rules on the signature, in their order, at `nowSeconds`: the timestamp, when the
 * delivery is genuine; otherwise the first reason it is not. Signatures are compared in constant time.
 */
export const check = (
  delivery: SignedDelivery,
  key: Buffer,
  nowSeconds: number,
  tolerance: number = TOLERANCE_SECONDS
): Either.Either<number, VerificationFailureReason> => {
  if (delivery.signature === undefined) return Either.left("missing_signature")
  if (delivery.timestamp === undefined) return Either.left("missing_timestamp")
  const text = delivery.timestamp.trim()
  if (!/^-?\d{1,15}$/.test(text)) return Either.left("invalid_timestamp")
  const timestamp = Number(text)
  if (Math.abs(nowSeconds - timestamp) > tolerance) return Either.left("timestamp_expired")
  if (!delivery.signature.startsWith("v1=")) return Either.left("invalid_signature_format")
  const expected = Buffer.from(hmac(key, text, delivery.body))
  const given = Buffer.from(delivery.signature.trim())
  return given.length === expected.length && Crypto.timingSafeEqual(given, expected)
    ? Either.right(timestamp)
    : Either.left("signature_mismatch")
}
