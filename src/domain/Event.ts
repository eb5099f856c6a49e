import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { detail, WireErrors } from "./Errors.js"
import { TradeIntent } from "./Intent.js"
import { EventType } from "./Webhook.js"

/**
 * One state change of an intent, as webhooks deliver it and the events API lists it: `data` is the
 * Trade Intent as GET returned it at that moment.
 */
export class IntentEvent extends Schema.Class<IntentEvent>("IntentEvent")({
  id: Schema.String,
  type: EventType,
  created_at: Schema.DateTimeUtc,
  data: TradeIntent
}) {}

/** The most events one read of a reader following the feed (an event stream) takes. */
export const TAIL_PAGE = 100

/** How long events stay readable through the events API. */
export const EVENT_RETENTION = Duration.days(30)

/**
 * Where a reader of the feed stands: after the event written by transaction `xid` as number `seq`.
 * Clients hold it as an opaque string (`<xid>_<seq>`); the start of the feed is `0_0`.
 */
export interface EventCursor {
  readonly xid: string
  readonly seq: string
}

export const FEED_START: EventCursor = { xid: "0", seq: "0" }

const CURSOR = /^(\d{1,20})_(\d{1,19})$/

export const formatCursor = (cursor: EventCursor): string => `${cursor.xid}_${cursor.seq}`

/** A cursor from its string, if it is one (numbers within PostgreSQL's 64-bit range). */
export const parseCursor = (text: string): Option.Option<EventCursor> => {
  const match = CURSOR.exec(text)
  if (match === null) return Option.none()
  const [, xid = "", seq = ""] = match
  return BigInt(xid) < 2n ** 64n && BigInt(seq) < 2n ** 63n
    ? Option.some({ xid: BigInt(xid).toString(), seq: BigInt(seq).toString() })
    : Option.none()
}

/** A cursor as a query parameter or `Last-Event-ID`: a 400 names the rule when it is not one. */
export const EventCursorFromString = Schema.String.pipe(
  Schema.filter((text) => Option.isSome(parseCursor(text)), {
    message: () => "must be a cursor the events API returned (next_cursor, or an event's stream id)"
  }),
  Schema.transform(Schema.Struct({ xid: Schema.String, seq: Schema.String }), {
    strict: true,
    decode: (text) => Option.getOrElse(parseCursor(text), () => FEED_START),
    encode: formatCursor
  })
)

/**
 * A page of the feed: oldest first; `nextCursor` is where the next page starts. Each event is its
 * JSON envelope exactly as webhooks send it (built by the database from the intent's columns), so
 * pages and streams pass it on without decoding and encoding it again.
 */
export interface EventPage {
  readonly items: ReadonlyArray<{ readonly json: string; readonly cursor: EventCursor }>
  readonly nextCursor: EventCursor
  readonly hasMore: boolean
}

export class EventNotFound extends Schema.TaggedError<EventNotFound>()("EventNotFound", {
  detail: detail(WireErrors.EventNotFound)
}) {}
