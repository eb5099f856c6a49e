import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type EventCursor, FEED_START, IntentEvent } from "../../domain/Event.js"
import { IntentId, Mode, UserId } from "../../domain/Ids.js"
import type { Owner } from "../../domain/Ids.js"
import { orDie } from "../../sql/Defects.js"
import { iso } from "../../sql/Outbox.js"
import type { EventRepository, FeedQuery } from "./EventRepository.js"
import * as Tracing from "../../Tracing.js"

/** An event as the API shows it, built by PostgreSQL: the webhook envelope, exactly. */
const envelope = `json_build_object('id', e.id, 'type', e.type, 'created_at', ${iso("e.created_at")}, 'data', e.data)::text`

const Owned = Schema.Struct({ user_id: UserId, mode: Mode, since: Schema.DateTimeUtc })

const FeedRow = Schema.Struct({ xid: Schema.String, seq: Schema.String, body: Schema.String })

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const selectPage = SqlSchema.findAll({
    Request: Schema.Struct({
      ...Owned.fields,
      xid: Schema.String,
      seq: Schema.String,
      limit: Schema.Int,
      type: Schema.NullOr(Schema.String),
      intent_id: Schema.NullOr(IntentId)
    }),
    Result: FeedRow,
    execute: (q) =>
      sql`SELECT e.xid::text AS xid, e.seq::text AS seq, ${sql.literal(envelope)} AS body
          FROM events e
          WHERE e.user_id = ${q.user_id} AND e.mode = ${q.mode}
            AND (e.xid, e.seq) > (${q.xid}::xid8, ${q.seq}::bigint)
            AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
            AND e.created_at >= ${q.since}
            ${q.type === null ? sql`` : sql`AND e.type = ${q.type}`}
            ${q.intent_id === null ? sql`` : sql`AND e.intent_id = ${q.intent_id}`}
          ORDER BY e.xid, e.seq
          LIMIT ${q.limit}`
  })

  const selectHead = SqlSchema.findOne({
    Request: Schema.Struct({ user_id: UserId, mode: Mode }),
    Result: Schema.Struct({ xid: Schema.String, seq: Schema.String }),
    execute: (q) =>
      sql`SELECT e.xid::text AS xid, e.seq::text AS seq FROM events e
          WHERE e.user_id = ${q.user_id} AND e.mode = ${q.mode} AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
          ORDER BY e.xid DESC, e.seq DESC LIMIT 1`
  })

  const selectUnread = SqlSchema.single({
    Request: Schema.Struct({ ...Owned.fields, xid: Schema.String, seq: Schema.String }),
    Result: Schema.Struct({ unread: Schema.Boolean }),
    execute: (q) =>
      sql`SELECT EXISTS (
            SELECT 1 FROM events e
            WHERE e.user_id = ${q.user_id} AND e.mode = ${q.mode}
              AND (e.xid, e.seq) > (${q.xid}::xid8, ${q.seq}::bigint)
              AND e.created_at >= ${q.since}
          ) AS unread`
  })

  const selectOne = SqlSchema.findOne({
    Request: Schema.Struct({ ...Owned.fields, id: Schema.String }),
    Result: Schema.Struct({ body: Schema.parseJson(IntentEvent) }),
    execute: (q) =>
      sql`SELECT ${sql.literal(envelope)} AS body FROM events e
          WHERE e.id = ${q.id} AND e.user_id = ${q.user_id} AND e.mode = ${q.mode} AND e.created_at >= ${q.since}`
  })

  const selectTimeline = SqlSchema.findOne({
    Request: Schema.Struct({ ...Owned.fields, intent_id: IntentId }),
    Result: Schema.Struct({ bodies: Schema.parseJson(Schema.Array(IntentEvent)) }),
    // One row if the intent is the owner's, with its events in the order they were written (an
    // intent's changes are serialized by its row lock, so that is also their commit order).
    execute: (q) =>
      sql`SELECT COALESCE((
                SELECT json_agg(json_build_object('id', e.id, 'type', e.type, 'created_at', ${
        sql.literal(iso("e.created_at"))
      }, 'data', e.data) ORDER BY e.seq)
                FROM events e WHERE e.intent_id = i.id AND e.created_at >= ${q.since}), '[]'::json)::text AS bodies
          FROM intents i WHERE i.id = ${q.intent_id} AND i.user_id = ${q.user_id} AND i.mode = ${q.mode}`
  })

  const deleteOld = SqlSchema.single({
    Request: Schema.Struct({ before: Schema.DateTimeUtc, limit: Schema.Int }),
    Result: Schema.Struct({ n: Schema.Number }),
    execute: ({ before, limit }) =>
      sql`WITH old AS (
            SELECT id FROM events WHERE created_at < ${before} ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
          ), gone_deliveries AS (
            DELETE FROM webhook_deliveries WHERE event_id IN (SELECT id FROM old)
          ), gone AS (
            DELETE FROM events WHERE id IN (SELECT id FROM old) RETURNING 1
          )
          SELECT count(*)::int AS n FROM gone`
  })

  const owned = (owner: Owner, since: DateTime.Utc) => ({ user_id: owner.userId, mode: owner.mode, since })

  return identity<Context.Tag.Service<typeof EventRepository>>({
    page: Effect.fnUntraced(function*(owner: Owner, query: FeedQuery) {
      // One more than asked: whether there is more to read now.
      const rows = yield* selectPage({
        ...owned(owner, query.since),
        xid: query.after.xid,
        seq: query.after.seq,
        limit: query.limit + 1,
        type: query.type ?? null,
        intent_id: query.intentId ?? null
      })
      const items = rows.slice(0, query.limit).map((row) => ({ json: row.body, cursor: { xid: row.xid, seq: row.seq } }))
      return { items, nextCursor: items.at(-1)?.cursor ?? query.after, hasMore: rows.length > query.limit }
    }, orDie, Tracing.span("EventRepository.page")),

    head: Effect.fnUntraced(function*(owner: Owner) {
      return Option.getOrElse(yield* selectHead({ user_id: owner.userId, mode: owner.mode }), () => FEED_START)
    }, orDie, Tracing.span("EventRepository.head")),

    unread: Effect.fnUntraced(function*(owner: Owner, after: EventCursor, since: DateTime.Utc) {
      return (yield* selectUnread({ ...owned(owner, since), ...after })).unread
    }, orDie, Tracing.span("EventRepository.unread")),

    find: Effect.fnUntraced(function*(owner: Owner, id: string, since: DateTime.Utc) {
      return Option.map(yield* selectOne({ ...owned(owner, since), id }), (row) => row.body)
    }, orDie, Tracing.span("EventRepository.find")),

    timeline: Effect.fnUntraced(function*(owner: Owner, intentId: IntentId, since: DateTime.Utc) {
      return Option.map(yield* selectTimeline({ ...owned(owner, since), intent_id: intentId }), (row) => row.bodies)
    }, orDie, Tracing.span("EventRepository.timeline")),

    purge: Effect.fnUntraced(function*(before: DateTime.Utc, limit: number) {
      return (yield* deleteOld({ before, limit })).n
    }, orDie, Tracing.span("EventRepository.purge"))
  })
})
