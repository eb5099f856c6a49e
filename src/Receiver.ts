/**
 * The receiver's side of webhooks: checks that a delivery comes from the Trade Intent Router and
 * is fresh, then reads its event id from the signed body. Pass the raw body, before any JSON parsing.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { TradeIntent } from "./domain/Intent.js"
import { EventType, TestEventData } from "./domain/Webhook.js"
import {
  check,
  type InvalidWebhookSecret,
  secretKey,
  TOLERANCE_SECONDS,
  WebhookVerificationError
} from "./domain/WebhookSignature.js"

export {
  InvalidWebhookSecret,
  sign,
  TOLERANCE_SECONDS,
  VerificationFailureReason,
  WebhookVerificationError
} from "./domain/WebhookSignature.js"

export { EventType } from "./domain/Webhook.js"

/** A delivery's body: `data` is the Trade Intent as GET showed it then. */
export class WebhookEvent extends Schema.Class<WebhookEvent>("WebhookEvent")({
  id: Schema.String,
  type: EventType,
  created_at: Schema.DateTimeUtc,
  data: TradeIntent
}) {}

/**
 * A test event, sent from the dashboard to one endpoint to check that it receives and verifies
 * deliveries: signed like every other, about no intent.
 */
export class WebhookTestEvent extends Schema.Class<WebhookTestEvent>("WebhookTestEvent")({
  id: Schema.String,
  type: Schema.Literal("webhook.test"),
  created_at: Schema.DateTimeUtc,
  data: TestEventData
}) {}

/** Any delivery's body: an intent's event, or a test event (tell them apart by `type`). */
export type ReceivedEvent = WebhookEvent | WebhookTestEvent

/** Decodes a verified body into a `WebhookEvent`, or a `WebhookTestEvent`. */
export const decodeEvent: (body: string) => Effect.Effect<ReceivedEvent, ParseResult.ParseError> = Schema.decodeUnknown(
  Schema.parseJson(Schema.Union(WebhookEvent, WebhookTestEvent))
)

/** Request headers as `node:http`, `fetch` or `@effect/platform` hold them. */
export type HeadersLike =
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  | { readonly get: (name: string) => string | null }

export interface VerifyOptions {
  readonly headers: HeadersLike
  /** The body exactly as received. */
  readonly body: string | Uint8Array
  /** The endpoint's 64-hex signing secret. */
  readonly secret: string
  /** Seconds either way; 300 unless set. */
  readonly tolerance?: number | undefined
}

/**
 * A genuine delivery: its event id (for deduplication: the signed body's `id`, never the unsigned
 * `sr-event-id` header alone), when it was signed, and its body.
 */
export interface VerifiedDelivery {
  readonly eventId: string
  readonly timestamp: number
  /** The raw body, now safe to `JSON.parse`: `{id, type, created_at, data}`. */
  readonly body: string
}

const isFetchHeaders = (headers: HeadersLike): headers is { readonly get: (name: string) => string | null } =>
  typeof headers.get === "function"

const header = (headers: HeadersLike, name: string): string | undefined => {
  if (isFetchHeaders(headers)) return headers.get(name) ?? undefined
  const value = headers[name] ?? Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1]
  return typeof value === "string" ? value : value?.[0]
}

/** The `id` of a signed body, when it is a JSON object with a string `id`. */
const signedId = (body: string): string | undefined => {
  try {
    const parsed: unknown = JSON.parse(body)
    return typeof parsed === "object" && parsed !== null && "id" in parsed && typeof parsed.id === "string"
      ? parsed.id
      : undefined
  } catch {
    return undefined
  }
}

/** The event id of a genuine body: its own `id`, which an `sr-event-id` header, when sent, must repeat. */
const eventIdOf = (body: string, headerId: string | undefined): Either.Either<string, WebhookVerificationError> => {
  const id = signedId(body)
  return id !== undefined && (headerId === undefined || headerId === id)
    ? Either.right(id)
    : Either.left(WebhookVerificationError.of("event_id_mismatch"))
}

const verifyAt = (
  options: VerifyOptions,
  nowMillis: number
): Either.Either<VerifiedDelivery, WebhookVerificationError | InvalidWebhookSecret> =>
  Either.gen(function*() {
    const key = yield* secretKey(options.secret)
    const timestamp = yield* check(
      { signature: header(options.headers, "sr-signature"), timestamp: header(options.headers, "sr-timestamp"), body: options.body },
      key,
      Math.floor(nowMillis / 1000),
      options.tolerance ?? TOLERANCE_SECONDS
    ).pipe(Either.mapLeft(WebhookVerificationError.of))
    const body = typeof options.body === "string" ? options.body : Buffer.from(options.body).toString("utf8")
    const eventId = yield* eventIdOf(body, header(options.headers, "sr-event-id"))
    return { eventId, timestamp, body }
  })

/**
 * Verifies a delivery against Effect's `Clock`. Fails with a `WebhookVerificationError` (the
 * delivery is not genuine: answer 401) or an `InvalidWebhookSecret` (`secret` is not 64 hex
 * characters: the receiver is misconfigured).
 */
export const verify = (
  options: VerifyOptions
): Effect.Effect<VerifiedDelivery, WebhookVerificationError | InvalidWebhookSecret> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => verifyAt(options, now))

/** Verifies the request being served by an `@effect/platform` HTTP server, reading its raw body. */
export const verifyRequest = (secret: string, options?: { readonly tolerance?: number }) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = new Uint8Array(yield* request.arrayBuffer)
    return yield* verify({ headers: request.headers, body, secret, tolerance: options?.tolerance })
  })

/**
 * For programs that do not use Effect: resolves with the verified delivery, or rejects with a
 * `WebhookVerificationError` (its `reason` says why) or an `InvalidWebhookSecret`.
 */
export const verifyWebhook = async (options: VerifyOptions): Promise<VerifiedDelivery> =>
  Either.getOrThrowWith(verifyAt(options, Date.now()), (error) => error)
