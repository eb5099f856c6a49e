/**
 * The receiver's side of webhooks: checks that a delivery comes from the Trade Intent Router and
 * is fresh, exactly as SPEC.md's receiver rules say. Pass the raw body, before any JSON parsing.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { TradeIntent } from "./domain/Intent.js"
import { EventType } from "./domain/Webhook.js"
import { check, TOLERANCE_SECONDS, WebhookVerificationError } from "./domain/WebhookSignature.js"

export {
  sign,
  TOLERANCE_SECONDS,
  VerificationFailureReason,
  WebhookVerificationError
} from "./domain/WebhookSignature.js"

export { EventType } from "./domain/Webhook.js"

/** A delivery's body, DESIGN.md section 7: `data` is the Trade Intent as GET showed it then. */
export class WebhookEvent extends Schema.Class<WebhookEvent>("WebhookEvent")({
  id: Schema.String,
  type: EventType,
  created_at: Schema.DateTimeUtc,
  data: TradeIntent
}) {}

/** Decodes a verified body into a `WebhookEvent`. */
export const decodeEvent = Schema.decodeUnknown(Schema.parseJson(WebhookEvent))

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

/** A genuine delivery: its event id (for deduplication), when it was signed, and its body. */
export interface VerifiedDelivery {
  readonly eventId: string | undefined
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

const verifyAt = (options: VerifyOptions, nowMillis: number): Either.Either<VerifiedDelivery, WebhookVerificationError> =>
  check(
    { signature: header(options.headers, "sr-signature"), timestamp: header(options.headers, "sr-timestamp"), body: options.body },
    options.secret,
    Math.floor(nowMillis / 1000),
    options.tolerance ?? TOLERANCE_SECONDS
  ).pipe(
    Either.mapLeft(WebhookVerificationError.of),
    Either.map((timestamp) => ({
      eventId: header(options.headers, "sr-event-id"),
      timestamp,
      body: typeof options.body === "string" ? options.body : Buffer.from(options.body).toString("utf8")
    }))
  )

/** Verifies a delivery against Effect's `Clock`; fails with one of SPEC.md's six reasons. */
export const verify = (options: VerifyOptions): Effect.Effect<VerifiedDelivery, WebhookVerificationError> =>
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
 * `WebhookVerificationError` whose `reason` is one of SPEC.md's six.
 */
export const verifyWebhook = async (options: VerifyOptions): Promise<VerifiedDelivery> =>
  Either.getOrThrowWith(verifyAt(options, Date.now()), (error) => error)
