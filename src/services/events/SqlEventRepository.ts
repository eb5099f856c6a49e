import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { EVENT_RETENTION, type EventCursor, type EventPage, FEED_START, IntentEvent, TAIL_PAGE } from "../../domain/Event.js"
import { IntentId, Mode, UserId } from "../../domain/Ids.js"
import type { Owner } from "../../domain/Ids.js"
import * as Batched from "../../sql/Batched.js"
import { orDie } from "../../sql/Defects.js"
import { iso } from "../../sql/Outbox.js"
import { PREPARED, unplanned } from "../../sql/Prepared.js"
import type { EventRepository, FeedQuery, FeedTail } from "./EventRepository.js"
import * as Tracing from "../../Tracing.js"

/** An event as the API shows it, built by PostgreSQL: the webhook envelope, exactly. */
const envelope = `json_build_object('id', e.id, 'type', e.type, 'created_at', ${iso("e.created_at")}, 'data', e.data)::text`

const Owned = Schema.Struct({ user_id: UserId, mode: Mode, since: Schema.DateTimeUtc })

const FeedRow = Schema.Struct({ xid: Schema.String, seq: Schema.String, body: Schema.String })

/** One reader's read in a batch of tails: `i` numbers it in the batch. */
const TailRead = Schema.Struct({ i: Schema.Int, user_id: UserId, mode: Mode, xid: Schema.String, seq: Schema.String })

const TailRow = Schema.Struct({
  i: Schema.Int,
  xid: Schema.NullOr(Schema.String),
  seq: Schema.NullOr(Schema.String),
  body: Schema.NullOr(Schema.String),
  held: Schema.Boolean
})

/** A reader's read: its owner's events after its cursor. */
interface Read {
  readonly owner: Owner
  readonly after: EventCursor
}

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const prepared = sql.literal(PREPARED)

  /** A page of the feed, prepared once per connection; its size `unplanned`, so that the walk along the feed's index is kept. */
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
      sql`${prepared} SELECT e.xid::text AS xid, e.seq::text AS seq, ${sql.literal(envelope)} AS body
          FROM events e
          WHERE e.user_id = ${q.user_id} AND e.mode = ${q.mode}
            AND (e.xid, e.seq) > (${q.xid}::xid8, ${q.seq}::bigint)
            AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
            AND e.created_at >= ${q.since}
            ${q.type === null ? sql`` : sql`AND e.type = ${q.type}`}
            ${q.intent_id === null ? sql`` : sql`AND e.intent_id = ${q.intent_id}`}
          ORDER BY e.xid, e.seq
          LIMIT ${unplanned(sql, q.limit)}`
  })

  const selectHead = SqlSchema.findOne({
    Request: Schema.Struct({ user_id: UserId, mode: Mode }),
    Result: Schema.Struct({ xid: Schema.String, seq: Schema.String }),
    execute: (q) =>
      sql`SELECT e.xid::text AS xid, e.seq::text AS seq FROM events e
          WHERE e.user_id = ${q.user_id} AND e.mode = ${q.mode} AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
          ORDER BY e.xid DESC, e.seq DESC LIMIT 1`
  })

  /**
   * Many readers' next pages in one statement, each read a row of `reads` numbered by `i`: a row
   * per event listed (none listed: one row of nulls), each with whether committed events after the
   * reader's cursor are held back (past the horizon: written by a transaction no older than every
   * one in flight). One snapshot decides both. Events are held back exactly when the owner's last
   * event lies after the cursor and past the horizon (no event after the cursor has a larger
   * `xid`): one step back along the feed's index. `since` is one bound for the whole statement, so
   * the planner sees that it keeps nearly every row and reads each owner's events by that index
   * whatever it knows of the owners; `held` is computed once per read (the materialized `reads`).
   */
  const selectTails = SqlSchema.findAll({
    Request: Schema.Struct({ reads: Schema.Array(TailRead), since: Schema.DateTimeUtc }),
    Result: TailRow,
    execute: ({ reads, since }) =>
      sql`WITH horizon AS MATERIALIZED (
            SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin
          ), reads AS MATERIALIZED (
            SELECT r.i, r.user_id, r.mode, r.xid, r.seq, COALESCE((
                     SELECT (e.xid, e.seq) > (r.xid, r.seq) AND e.xid >= horizon.xmin
                     FROM events e
                     WHERE e.user_id = r.user_id AND e.mode = r.mode AND e.created_at >= ${since}
                     ORDER BY e.xid DESC, e.seq DESC
                     LIMIT 1
                   ), false) AS held
            FROM json_to_recordset(${JSON.stringify(reads)}::json) AS r(i int, user_id uuid, mode text, xid xid8, seq bigint)
            CROSS JOIN horizon
          )
          SELECT r.i, p.xid::text AS xid, p.seq::text AS seq, p.body, r.held
          FROM reads r CROSS JOIN horizon
          LEFT JOIN LATERAL (
            SELECT e.xid, e.seq, ${sql.literal(envelope)} AS body FROM events e
            WHERE e.user_id = r.user_id AND e.mode = r.mode AND (e.xid, e.seq) > (r.xid, r.seq)
              AND e.xid < horizon.xmin AND e.created_at >= ${since}
            ORDER BY e.xid, e.seq
            LIMIT ${TAIL_PAGE + 1}
          ) p ON true
          ORDER BY r.i, p.xid, p.seq`
  })

  /** The reads' tails, in the reads' order: the events the retention keeps, by the clock now. */
  const tails = (reads: ReadonlyArray<Read>) =>
    Effect.flatMap(DateTime.now, (now) =>
      selectTails({
        reads: reads.map((read, i) => ({
          i,
          user_id: read.owner.userId,
          mode: read.owner.mode,
          xid: read.after.xid,
          seq: read.after.seq
        })),
        since: DateTime.subtractDuration(now, EVENT_RETENTION)
      })
    ).pipe(
      Effect.map((rows) => {
        const listed = reads.map((read) => ({ read, items: new Array<EventPage["items"][number]>(), held: false }))
        for (const row of rows) {
          const into = listed[row.i]
          if (into === undefined) continue
          into.held = row.held
          if (row.body !== null && row.xid !== null && row.seq !== null) {
            into.items.push({ json: row.body, cursor: { xid: row.xid, seq: row.seq } })
          }
        }
        return listed.map(({ held, items, read }): Exit.Exit<FeedTail> => {
          const page = items.slice(0, TAIL_PAGE)
          return Exit.succeed({
            items: page,
            nextCursor: page.at(-1)?.cursor ?? read.after,
            hasMore: items.length > TAIL_PAGE,
            held
          })
        })
      }),
      orDie,
      Tracing.span("EventRepository.tails", { attributes: { "batch.size": reads.length } })
    )

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

  const tailOne = yield* Batched.make(tails, { name: "event_tail", maxBatch: 100, concurrency: 2 })

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

    tail: (owner, after) => tailOne({ owner, after }),

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
