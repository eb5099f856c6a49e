import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { detail } from "./Errors.js"
import { DeliveryId, Mode, UserId, WebhookEndpointId } from "./Ids.js"

/** Every state change of an intent is one event of one of these types (DESIGN.md section 7). */
export const EventType = Schema.Literal(
  "intent.created",
  "intent.partially_filled",
  "intent.filled",
  "intent.canceled",
  "intent.rejected",
  "intent.failed"
)
export type EventType = typeof EventType.Type
export const allEventTypes: ReadonlyArray<EventType> = EventType.literals

/** Where a user's systems hear about their intents, in one mode. */
export class WebhookEndpoint extends Schema.Class<WebhookEndpoint>("WebhookEndpoint")({
  id: WebhookEndpointId,
  user_id: UserId,
  url: Schema.String,
  mode: Mode,
  events: Schema.Array(EventType),
  created_at: Schema.DateTimeUtc,
  /** Set when the endpoint answered 410 Gone: nothing more is sent to it. */
  disabled_at: Schema.NullOr(Schema.DateTimeUtc)
}) {}

export const DeliveryStatus = Schema.Literal("pending", "succeeded", "failed")
export type DeliveryStatus = typeof DeliveryStatus.Type

/** One POST of an event to an endpoint: its HTTP status, or why there was none. */
export class DeliveryAttempt extends Schema.Class<DeliveryAttempt>("DeliveryAttempt")({
  attempted_at: Schema.DateTimeUtc,
  status_code: Schema.NullOr(Schema.Int),
  error: Schema.NullOr(Schema.String),
  duration_ms: Schema.Int
}) {}

/** An event on its way to one endpoint. */
export class Delivery extends Schema.Class<Delivery>("Delivery")({
  id: DeliveryId,
  endpoint_id: WebhookEndpointId,
  event_id: Schema.String,
  type: EventType,
  status: DeliveryStatus,
  attempts: Schema.Int,
  last_status_code: Schema.NullOr(Schema.Int),
  next_attempt_at: Schema.NullOr(Schema.DateTimeUtc),
  created_at: Schema.DateTimeUtc,
  history: Schema.Array(DeliveryAttempt)
}) {}

export class WebhookEndpointNotFound extends Schema.TaggedError<WebhookEndpointNotFound>()("WebhookEndpointNotFound", {
  detail: detail("Webhook endpoint not found")
}) {}

export class DeliveryNotFound extends Schema.TaggedError<DeliveryNotFound>()("DeliveryNotFound", {
  detail: detail("Delivery not found")
}) {}

export class WebhookEndpointDisabled extends Schema.TaggedError<WebhookEndpointDisabled>()("WebhookEndpointDisabled", {
  detail: detail("The webhook endpoint is disabled: it answered 410 Gone. Create a new endpoint to receive events again")
}) {}

/**
 * The rules a URL must meet before any address is looked up: http(s), no credentials, and for live
 * mode https only (DESIGN.md section 7). Returns the URL, or the reason it is refused.
 */
export const checkEndpointUrl = (text: string, mode: Mode): Either.Either<URL, string> => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return Either.left("url must be an absolute http or https URL")
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return Either.left("url must be an http or https URL")
  if (mode === "live" && url.protocol !== "https:") return Either.left("url of a live endpoint must be https")
  if (url.username !== "" || url.password !== "") return Either.left("url must not carry credentials")
  if (text.length > 2048) return Either.left("url must be at most 2048 characters")
  return Either.right(url)
}

const ipv4Parts = (address: string): ReadonlyArray<number> | undefined => {
  const parts = address.split(".")
  if (parts.length !== 4) return undefined
  const numbers = parts.map((part) => (/^\d{1,3}$/.test(part) ? Number(part) : NaN))
  return numbers.every((n) => n >= 0 && n <= 255) ? numbers : undefined
}

const isPublicIpv4 = ([a = 0, b = 0, c = 0]: ReadonlyArray<number>): boolean =>
  !(
    a === 0 || a === 10 || a === 127 || a >= 224 || // this network, private, loopback, multicast and reserved
    (a === 100 && b >= 64 && b <= 127) || // shared address space (carrier-grade NAT)
    (a === 169 && b === 254) || // link-local
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && (c === 0 || c === 2)) || // IETF protocol assignments, TEST-NET-1
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    (a === 198 && b === 51 && c === 100) || // TEST-NET-2
    (a === 203 && b === 0 && c === 113) // TEST-NET-3
  )

/**
 * Whether an IP address (as `dns.lookup` prints it) is reachable on the public internet: not
 * loopback, private, link-local, shared, multicast or reserved, for IPv4 and IPv6 (with IPv4-mapped
 * addresses judged as IPv4).
 */
export const isPublicAddress = (address: string): boolean => {
  const v4 = ipv4Parts(address)
  if (v4 !== undefined) return isPublicIpv4(v4)
  const lower = address.toLowerCase().replace(/^\[|\]$/g, "")
  if (!lower.includes(":")) return false
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
  if (mapped?.[1] !== undefined) return isPublicAddress(mapped[1])
  if (lower === "::" || lower === "::1") return false
  const first = Number.parseInt(lower.split(":")[0] || "0", 16)
  return !(
    (first & 0xfe00) === 0xfc00 || // unique local
    (first & 0xffc0) === 0xfe80 || // link-local
    (first & 0xff00) === 0xff00 || // multicast
    first === 0 || // IPv4-compatible and other reserved
    lower.startsWith("2001:db8:") // documentation
  )
}
