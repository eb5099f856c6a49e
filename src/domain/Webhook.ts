import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { detail, WireErrors } from "./Errors.js"
import { DeliveryId, Mode, UserId, WebhookEndpointId } from "./Ids.js"

/** Every state change of an intent is one event of one of these types. */
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

/**
 * What a delivery carries: an intent's event, or a `webhook.test` event that a user sends to one
 * endpoint to try it (never an intent's, never in the events API, never to another endpoint).
 */
export const DeliveryType = Schema.Literal(...EventType.literals, "webhook.test")
export type DeliveryType = typeof DeliveryType.Type

/** The `data` of a `webhook.test` event: the endpoint it was sent to. */
export const TestEventData = Schema.Struct({ endpoint_id: WebhookEndpointId, message: Schema.String })
export type TestEventData = typeof TestEventData.Type

export const TEST_EVENT_MESSAGE = "A test event from the Trade Intent Router"

/** Where a user's systems hear about their intents, in one mode. */
export class WebhookEndpoint extends Schema.Class<WebhookEndpoint>("WebhookEndpoint")({
  id: WebhookEndpointId,
  user_id: UserId,
  url: Schema.String,
  mode: Mode,
  events: Schema.Array(EventType),
  created_at: Schema.DateTimeUtc,
  /** Set when the endpoint answered 410 Gone or its owner disabled it: nothing is sent to it until it is enabled. */
  disabled_at: Schema.NullOr(Schema.DateTimeUtc)
}) {}

/**
 * Deliveries of one endpoint in flight at once, across instances: a slow or unanswering receiver
 * holds at most this many of the workers' slots, so other endpoints keep their latency.
 */
export const MAX_IN_FLIGHT_PER_ENDPOINT = 16

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
  type: DeliveryType,
  status: DeliveryStatus,
  attempts: Schema.Int,
  last_status_code: Schema.NullOr(Schema.Int),
  next_attempt_at: Schema.NullOr(Schema.DateTimeUtc),
  created_at: Schema.DateTimeUtc,
  history: Schema.Array(DeliveryAttempt)
}) {}

export class WebhookEndpointNotFound extends Schema.TaggedError<WebhookEndpointNotFound>()("WebhookEndpointNotFound", {
  detail: detail(WireErrors.WebhookEndpointNotFound)
}) {}

export class DeliveryNotFound extends Schema.TaggedError<DeliveryNotFound>()("DeliveryNotFound", {
  detail: detail(WireErrors.DeliveryNotFound)
}) {}

export class WebhookEndpointDisabled extends Schema.TaggedError<WebhookEndpointDisabled>()("WebhookEndpointDisabled", {
  detail: detail(WireErrors.WebhookEndpointDisabled)
}) {}

/**
 * The rules a URL must meet before any address is looked up: http(s), no credentials, and for live
 * mode https only. Returns the URL, or the reason it is refused.
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
    (a === 192 && b === 88 && c === 99) || // 6to4 relay anycast: forwards into whatever IPv6 it carries
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    (a === 198 && b === 51 && c === 100) || // TEST-NET-2
    (a === 203 && b === 0 && c === 113) // TEST-NET-3
  )

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a dotted IPv4 tail converted), or undefined. */
const ipv6Groups = (address: string): ReadonlyArray<number> | undefined => {
  let text = address
  const tail = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (tail?.[1] !== undefined && tail[2] !== undefined) {
    const v4 = ipv4Parts(tail[2])
    if (v4 === undefined) return undefined
    const [a = 0, b = 0, c = 0, d = 0] = v4
    text = `${tail[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const parse = (half: string | undefined) => (half === undefined || half === "" ? [] : half.split(":"))
  const head = parse(halves[0])
  const rest = parse(halves[1])
  const missing = 8 - head.length - rest.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined
  const groups = [...head, ...Array.from({ length: halves.length === 1 ? 0 : missing }, () => "0"), ...rest]
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/.test(group))) return undefined
  return groups.map((group) => Number.parseInt(group, 16))
}

/**
 * Whether an IP address (as `dns.lookup` prints it) is reachable on the public internet: not
 * loopback, private, link-local, shared, multicast or reserved, for IPv4 and IPv6 (IPv4-mapped
 * addresses judged as IPv4). Transition prefixes that lead into IPv4 or onto another network
 * (NAT64, 6to4, Teredo) are refused whatever they embed, as are site-local and discard-only ones.
 */
export const isPublicAddress = (address: string): boolean => {
  const v4 = ipv4Parts(address)
  if (v4 !== undefined) return isPublicIpv4(v4)
  const groups = ipv6Groups(address.toLowerCase().replace(/^\[|\]$/g, "").replace(/%.*$/, ""))
  if (groups === undefined) return false
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = groups
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0xffff) {
    return isPublicIpv4([g6 >> 8, g6 & 0xff, g7 >> 8, g7 & 0xff]) // IPv4-mapped
  }
  return !(
    g0 === 0 || // unspecified, loopback, IPv4-compatible and other reserved
    (g0 === 0x64 && g1 === 0xff9b) || // NAT64, well-known (64:ff9b::/96) and local-use (64:ff9b:1::/48)
    (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) || // discard-only
    (g0 === 0x2001 && g1 === 0) || // Teredo
    (g0 === 0x2001 && g1 === 0xdb8) || // documentation
    g0 === 0x2002 || // 6to4
    (g0 & 0xfe00) === 0xfc00 || // unique local
    (g0 & 0xffc0) === 0xfe80 || // link-local
    (g0 & 0xffc0) === 0xfec0 || // site-local
    (g0 & 0xff00) === 0xff00 // multicast
  )
}
