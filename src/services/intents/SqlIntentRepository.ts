import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { ParseError } from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { QuotaExceeded } from "../../domain/Auth.js"
import { Unavailable } from "../../domain/Errors.js"
import { IntentId, Mode, type Owner, UserId } from "../../domain/Ids.js"
import * as Batched from "../../sql/Batched.js"
import {
  DuplicateIntent,
  IntentNotCancelable,
  IntentNotFound,
  IntentStatus,
  intentJson,
  type NewIntent,
  orderSpecOf,
  TradeIntent
} from "../../domain/Intent.js"
import type { BrokerKind } from "../../domain/Account.js"
import { applyLocalCancel, clientOrderId, isFinal } from "../../domain/Routing.js"
import { RoutingHandoff } from "../routing/RoutingHandoff.js"
import type { Job } from "../routing/RoutingRepository.js"
import type { CreateOptions, IntentQuery, IntentRef, IntentRepository } from "./IntentRepository.js"
import { ROUTING_CHANNEL } from "../../sql/Channels.js"
import { orDie } from "../../sql/Defects.js"
import * as Outbox from "../../sql/Outbox.js"
import { DELIVERIES_DUE, eventTables, EVENTS_WRITTEN } from "../../sql/Outbox.js"
import { PREPARED, unplanned, uuidArray } from "../../sql/Prepared.js"
import * as Tables from "../../sql/Tables.js"
import * as Tracing from "../../Tracing.js"

/** The columns a creation writes: all of an intent's but those set later (its reason, a cancel request). */
const NewIntentRow = Tables.Intents.row.omit("status_reason", "cancel_requested_at")
const newIntentColumns = Tables.columnList(NewIntentRow)

/**
 * One creation as the creation statement reads it: its intent's row, its event's id, its place in
 * the batch, and the monthly quota it is counted against (its period and limit; none for a test
 * intent).
 */
const CreationRow = Schema.Struct({
  ...NewIntentRow.fields,
  event_id: Schema.String,
  ord: Schema.Int,
  quota_period: Schema.NullOr(Schema.String),
  quota_limit: Schema.NullOr(Schema.Int)
})
const creationRecordset = Tables.recordsetTypes(CreationRow, {
  ...Tables.Intents.types,
  event_id: "text",
  ord: "int",
  quota_period: "date",
  quota_limit: "int"
})

/** The check that refuses a monthly count past its limit (migration `0018_usage_within_limit`). */
const WITHIN_LIMIT = "intent_usage_within_limit"

/** Whether a creation's statement failed because it would have counted a user past their quota. */
const isOverQuota = (error: SqlError | ParseError) =>
  error._tag === "SqlError" && typeof error.cause === "object" && error.cause !== null &&
  "code" in error.cause && error.cause.code === "23514" &&
  "constraint" in error.cause && error.cause.constraint === WITHIN_LIMIT

/**
 * A live creation its batch held back with the others of its user, whose new intents would not all
 * fit their quota: its request tries it alone, to write it if it still fits.
 */
class HeldByQuota extends Data.TaggedError("HeldByQuota") {}

/** The unique key of an intent: who created it, in which mode, under which of their ids. */
const IntentKey = Tables.Intents.row.pick("user_id", "mode", "intent_id")
const keyOf = (key: typeof IntentKey.Type) => `${key.user_id}/${key.mode}/${key.intent_id}`

/** An intent as the API shows it, built by the database. */
const IntentView = Schema.Struct({ intent: TradeIntent })

/** An intent's JSON, as the API writes it. */
const decodeIntent = Schema.decode(Schema.parseJson(TradeIntent))

/** A page's JSON array of intents, as the API writes it. */
const decodeIntents = Schema.decode(Schema.parseJson(Schema.Array(TradeIntent)))

const OwnerRequest = Schema.Struct({ user_id: UserId, mode: Mode })

/** A page of the listing that the counters total: no symbol or broker filter. */
const CountedPage = Schema.Struct({
  ...OwnerRequest.fields,
  status: Schema.NullOr(IntentStatus),
  size: Schema.Int,
  skip: Schema.Int
})

const ListRequest = Schema.Struct({
  ...OwnerRequest.fields,
  status: Schema.optional(IntentStatus),
  symbol: Schema.optional(Schema.String),
  broker_id: Schema.optional(Schema.String),
  limit: Schema.Int,
  offset: Schema.Int
})

export interface Options {
  /**
   * Creations that may wait for a batch while the database is slow; beyond, a creation is refused
   * at once with 503 (nothing written) instead of queueing without bound.
   */
  readonly creationQueue?: number | undefined
}

/** The default bound of the creation queue: a few batches' worth. */
export const CREATION_QUEUE = 1_000

/** A submission claimed at its intent's creation, with the context a claim would have read. */
const submission = (input: NewIntent, brokerKind: BrokerKind): Job => ({
  intentId: input.id,
  kind: "submit",
  claims: 1,
  version: 0,
  context: Option.some({
    intentId: input.id,
    userId: input.user_id,
    mode: input.mode,
    status: "pending",
    spec: orderSpecOf(input),
    connection: { id: input.broker_id, kind: brokerKind },
    clientOrderId: clientOrderId(input.id),
    hasOrder: false,
    cancelRequested: false,
    filled: 0
  })
})

export const make = (options: Options = {}) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const handoff = yield* Effect.serviceOption(RoutingHandoff)
  // Each intent's API document, which triggers keep current in its row.
  const intent = sql.literal("i.document AS intent")
  // The hottest statements, whose text is fixed: parsed and planned once per connection.
  const prepared = sql.literal(PREPARED)

  const ownedBy = (owner: typeof OwnerRequest.Encoded) => [sql`i.user_id = ${owner.user_id}`, sql`i.mode = ${owner.mode}`]
  const owned = (owner: Owner) => ({ user_id: owner.userId, mode: owner.mode })

  /**
   * Creations, each with its intent, its routing job, the `intent.created` event and its webhook
   * deliveries, with the workers woken at commit, in one statement (one round trip, an atomic
   * whole). An intent whose intent_id is taken is not written: only those written are returned,
   * each with its document (the API's JSON of the intent as created, built by its row trigger).
   *
   * Live creations are counted against their users' monthly quotas in the same statement, after
   * the duplicate check (a duplicate spends nothing). A user whose new intents in the batch would
   * pass their quota, as the statement's snapshot counts, gets none of them written: each is then
   * tried alone, to write those that fit. Should a count have moved past that snapshot meanwhile
   * (another batch counting the same user's last intents), the database's check of the count
   * against its limit fails the whole statement, and nothing is written.
   */
  const insertCreations = SqlSchema.findAll({
    Request: Schema.Struct({ rows: Schema.Array(CreationRow), claimed_until: Schema.NullOr(Schema.DateTimeUtcFromDate) }),
    Result: Schema.Struct({ ...Tables.Intents.row.pick("id").fields, intent: Schema.String }),
    execute: ({ claimed_until, rows }) =>
      sql`${prepared}
        WITH input AS (
          SELECT * FROM json_to_recordset(${JSON.stringify(rows)}::json) AS x(${sql.literal(creationRecordset)})
        ), over_quota AS (
          SELECT x.user_id, x.quota_period FROM input x
          WHERE x.quota_limit IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM intents i WHERE i.user_id = x.user_id AND i.mode = x.mode AND i.intent_id = x.intent_id
          )
          GROUP BY x.user_id, x.quota_period
          HAVING count(DISTINCT (x.mode, x.intent_id)) + COALESCE((
            SELECT u.count FROM intent_usage u WHERE u.user_id = x.user_id AND u.period_start = x.quota_period
          ), 0) > min(x.quota_limit)
        ), created AS (
          INSERT INTO intents (${sql.literal(newIntentColumns)})
          SELECT ${sql.literal(newIntentColumns)}
          FROM input x
          WHERE NOT EXISTS (SELECT 1 FROM over_quota o WHERE o.user_id = x.user_id AND o.quota_period = x.quota_period)
          ORDER BY ord
          ON CONFLICT (user_id, mode, intent_id) DO NOTHING
          RETURNING *
        ), usage AS (
          INSERT INTO intent_usage (user_id, period_start, count, monthly_limit)
          SELECT x.user_id, x.quota_period, count(*), min(x.quota_limit)
          FROM created i JOIN input x ON x.id = i.id
          WHERE x.quota_limit IS NOT NULL
          GROUP BY x.user_id, x.quota_period
          ORDER BY x.user_id, x.quota_period
          ON CONFLICT (user_id, period_start)
            DO UPDATE SET count = intent_usage.count + EXCLUDED.count, monthly_limit = EXCLUDED.monthly_limit
        ), job AS (
          INSERT INTO routing_jobs (intent_id, kind, run_at, created_at, locked_until, claims)
          SELECT id, 'submit', created_at, created_at, ${claimed_until}::timestamptz, ${claimed_until === null ? 0 : 1}
          FROM created
        ), ${eventTables(sql, sql`created i JOIN input x ON x.id = i.id`, {
        id: sql`x.event_id`,
        type: sql`${"intent.created"}`,
        at: sql`i.created_at`
      })}
        SELECT id, document::text AS intent, ${claimed_until === null ? sql`pg_notify(${ROUTING_CHANNEL}, 'submit'),` : sql``} ${
          sql.literal(DELIVERIES_DUE)
        }, ${sql.literal(EVENTS_WRITTEN)} FROM created`
  })

  /** The intents that hold these keys. */
  const selectHolders = SqlSchema.findAll({
    Request: Schema.NonEmptyArray(IntentKey),
    Result: Tables.Intents.row.pick("id", "user_id", "mode", "intent_id"),
    execute: (keys) =>
      sql`SELECT id, user_id, mode, intent_id FROM intents
          WHERE ${sql.or(keys.map((key) => sql`(user_id = ${key.user_id} AND mode = ${key.mode} AND intent_id = ${key.intent_id})`))}`
  })

  const selectUsage = SqlSchema.findOne({
    Request: Schema.Struct({ user_id: UserId, period: Schema.String }),
    Result: Schema.Struct({ count: Schema.Int }),
    execute: ({ period, user_id }) =>
      sql`SELECT count FROM intent_usage WHERE user_id = ${user_id} AND period_start = ${period}`
  })

  const selectIntent = SqlSchema.findOne({
    Request: Schema.Struct({ ...OwnerRequest.fields, id: Schema.optional(IntentId), intent_id: Schema.optional(Schema.String) }),
    Result: IntentView,
    execute: (request) =>
      sql`SELECT ${intent} FROM intents i WHERE ${
        sql.and([
          ...ownedBy(request),
          ...(request.id !== undefined ? [sql`i.id = ${request.id}`] : []),
          ...(request.intent_id !== undefined ? [sql`i.intent_id = ${request.intent_id}`] : [])
        ])
      }`
  })

  const listRequest = (owner: Owner, query: IntentQuery) => ({
    ...owned(owner),
    status: query.status,
    symbol: query.symbol?.toUpperCase(),
    broker_id: query.brokerId,
    limit: query.pageSize,
    offset: (query.page - 1) * query.pageSize
  })

  const listWhere = (query: typeof ListRequest.Encoded) =>
    sql.and([
      ...ownedBy(query),
      ...(query.status !== undefined ? [sql`i.status = ${query.status}`] : []),
      ...(query.symbol !== undefined ? [sql`i.symbol = ${query.symbol}`] : []),
      ...(query.broker_id !== undefined ? [sql`i.broker_id::text = ${query.broker_id}`] : [])
    ])

  const selectIntentJson = SqlSchema.findOne({
    Request: Schema.Struct({ ...OwnerRequest.fields, intent_id: Schema.String }),
    Result: Schema.Struct({ intent: Schema.String }),
    execute: (request) =>
      sql`${prepared} SELECT i.document::text AS intent FROM intents i
          WHERE ${sql.and([...ownedBy(request), sql`i.intent_id = ${request.intent_id}`])}`
  })

  /**
   * Folds the count rows of connections that have ended into `backend` 0, in one statement: every
   * sum stays as it was. Rows another transaction holds are skipped (a later fold takes them), so a
   * fold never waits on a writer; the rows it adds to are locked in one order, so two folds never
   * wait on each other in a circle.
   */
  const foldCountRows = SqlSchema.single({
    Request: Schema.Void,
    Result: Schema.Struct({ n: Schema.Int }),
    execute: () =>
      sql`WITH ended AS (
            SELECT user_id, mode, status, backend FROM intent_counts c
            WHERE backend <> 0 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.backend)
            FOR UPDATE SKIP LOCKED
          ), gone AS (
            DELETE FROM intent_counts c USING ended e
            WHERE c.user_id = e.user_id AND c.mode = e.mode AND c.status = e.status AND c.backend = e.backend
            RETURNING c.user_id, c.mode, c.status, c.n
          ), folded AS (
            INSERT INTO intent_counts (user_id, mode, status, backend, n)
            SELECT user_id, mode, status, 0, sum(n) FROM gone
            GROUP BY user_id, mode, status ORDER BY user_id, mode, status
            ON CONFLICT (user_id, mode, status, backend) DO UPDATE SET n = intent_counts.n + EXCLUDED.n
          )
          SELECT count(*)::int AS n FROM gone`
  })

  /**
   * Many lookups by id in one statement, whoever asked: each intent's owner with its document, for
   * each lookup to keep only its owner's.
   */
  const selectDocuments = SqlSchema.findAll({
    Request: Schema.Array(IntentId),
    Result: Schema.Struct({ id: IntentId, user_id: UserId, mode: Mode, intent: Schema.String }),
    execute: (ids) =>
      sql`${prepared} SELECT i.id, i.user_id, i.mode, i.document::text AS intent FROM intents i
          WHERE i.id = ANY(${uuidArray(sql, ids)})`
  })

  /** Lookups by id that arrive together, each answered with its intent's document if its owner's. */
  const lookupBatch = (lookups: ReadonlyArray<{ readonly owner: Owner; readonly id: IntentId }>) =>
    selectDocuments([...new Set(lookups.map(({ id }) => id))]).pipe(
      Effect.map((rows) => {
        const found = new Map<string, (typeof rows)[number]>(rows.map((row) => [row.id, row]))
        return lookups.map(({ id, owner }) => {
          // PostgreSQL writes a uuid in lower case; a path may spell it in upper case.
          const row = found.get(id.toLowerCase())
          return Exit.succeed(
            row !== undefined && row.user_id === owner.userId && row.mode === owner.mode ? Option.some(row.intent) : Option.none()
          )
        })
      }),
      orDie,
      Tracing.span("IntentRepository.lookupBatch", { attributes: { "batch.size": lookups.length } })
    )

  /**
   * A page filtered by symbol or broker and its total (a count of its own rows: the counters keep
   * no such totals) in one round trip, the page built as one JSON array by the database; its size
   * and offset `unplanned`, so that the prepared walk down the listing index is kept. The other
   * pages are read together (`selectPagesJson`).
   */
  const selectPageJson = SqlSchema.single({
    Request: ListRequest,
    Result: Schema.Struct({ items: Schema.String, total: Schema.NumberFromString }),
    execute: (query) =>
      sql`${prepared} SELECT
            (SELECT count(*) FROM intents i WHERE ${listWhere(query)})::text AS total,
            COALESCE((
              SELECT json_agg(page.intent ORDER BY page.created_at DESC, page.id DESC) FROM (
                SELECT i.created_at, i.id, i.document AS intent FROM intents i WHERE ${listWhere(query)}
                ORDER BY i.created_at DESC, i.id DESC
                LIMIT ${unplanned(sql, query.limit)} OFFSET ${unplanned(sql, query.offset)}
              ) page
            ), '[]'::json)::text AS items`
  })

  /**
   * Pages whose total the counters give (no symbol or broker filter), read together: each is one
   * walk down the listing index from its own row of the input, its total summed from its owner's
   * counters, both in the statement's one snapshot as a page alone reads them. `n` answers each
   * row to its page.
   */
  const selectPagesJson = SqlSchema.findAll({
    Request: Schema.Array(Schema.Struct({ ...CountedPage.fields, n: Schema.Int })),
    Result: Schema.Struct({ n: Schema.Int, items: Schema.String, total: Schema.NumberFromString }),
    execute: (pages) =>
      sql`${prepared} SELECT q.n,
            (SELECT COALESCE(sum(c.n), 0) FROM intent_counts c
             WHERE c.user_id = q.user_id AND c.mode = q.mode AND (q.status IS NULL OR c.status = q.status))::text AS total,
            COALESCE((
              SELECT json_agg(page.intent ORDER BY page.created_at DESC, page.id DESC) FROM (
                SELECT i.created_at, i.id, i.document AS intent FROM intents i
                WHERE i.user_id = q.user_id AND i.mode = q.mode AND (q.status IS NULL OR i.status = q.status)
                ORDER BY i.created_at DESC, i.id DESC
                LIMIT q.size OFFSET q.skip
              ) page
            ), '[]'::json)::text AS items
          FROM json_to_recordset(${JSON.stringify(pages)}::json)
            AS q(n int, user_id uuid, mode text, status text, size int, skip int)`
  })

  /** Pages asked for together, each answered with its items and total. */
  const pageBatch = (requests: ReadonlyArray<typeof CountedPage.Type>) =>
    selectPagesJson(requests.map((request, n) => ({ ...request, n }))).pipe(
      Effect.map((rows) => {
        const found = new Map(rows.map(({ n, ...page }) => [n, page]))
        return requests.map((_, n) => {
          const page = found.get(n)
          return page === undefined ? Exit.die(new Error("a page went unanswered")) : Exit.succeed(page)
        })
      }),
      orDie,
      Tracing.span("IntentRepository.pageBatch", { attributes: { "batch.size": requests.length } })
    )

  /** Locks an intent of its owner for a cancel: its status, and whether it has an order at the broker. */
  const lockForCancel = SqlSchema.findOne({
    Request: Schema.Struct({ ...OwnerRequest.fields, id: IntentId }),
    Result: Schema.Struct({ status: IntentStatus, has_order: Schema.Boolean }),
    execute: ({ id, mode, user_id }) =>
      sql`
        SELECT status, EXISTS (SELECT 1 FROM orders o WHERE o.intent_id = i.id) AS has_order
        FROM intents i WHERE id = ${id} AND user_id = ${user_id} AND mode = ${mode}
        FOR UPDATE`
  })

  const CancelAt = Tables.Intents.row.pick("id", "cancel_requested_at")
  const markCancelRequested = SqlSchema.void({
    Request: CancelAt,
    execute: ({ cancel_requested_at, id }) =>
      sql`UPDATE intents SET cancel_requested_at = ${cancel_requested_at} WHERE id = ${id}`
  })

  /** Takes back a submission no worker has claimed yet. */
  const takeSubmission = SqlSchema.findOne({
    Request: IntentId,
    Result: Tables.RoutingJobs.row.pick("intent_id"),
    execute: (intentId) =>
      sql`DELETE FROM routing_jobs
          WHERE intent_id = ${intentId} AND kind = 'submit' AND claims = 0
          RETURNING intent_id`
  })

  /** Brings a claimed submission forward, to decide with the broker's answer, and wakes the workers. */
  const hastenSubmission = SqlSchema.void({
    Request: Tables.RoutingJobs.row.pick("intent_id", "run_at"),
    execute: ({ intent_id, run_at }) =>
      sql`WITH due AS (
            UPDATE routing_jobs SET run_at = LEAST(run_at, ${run_at})
            WHERE intent_id = ${intent_id} AND kind = 'submit'
          )
          SELECT pg_notify(${ROUTING_CHANNEL}, 'submit')`
  })

  /**
   * The JSON of an intent as its creation wrote it, for a creation whose statement did not return
   * it: an earlier try of the same creation had committed (only its answer was lost). Its fields
   * come from the decoded payload and the generated ids, typed as the class wants them, so the
   * class's own check is skipped (a whole-schema validation).
   */
  const createdJson = ({ mode: _mode, user_id: _user, ...fields }: NewIntent, now: DateTime.Utc) =>
    intentJson(
      new TradeIntent(
        { ...fields, status: "pending", status_reason: null, orders: [], created_at: now, updated_at: now },
        true
      )
    )

  const creationRow = (
    { eventId, input, now, quota }: CreateOptions & { readonly input: NewIntent },
    ord: number
  ): typeof CreationRow.Type => ({
    ...input,
    status: "pending",
    created_at: now,
    updated_at: now,
    event_id: eventId,
    ord,
    quota_period: quota?.period ?? null,
    quota_limit: quota?.limit ?? null
  })

  /**
   * Until when the submissions of these creations are claimed by this instance's routing worker,
   * to be handed to it at commit: only while a worker takes them, and only when each creation
   * says which kind of broker it goes to (the worker's context needs it); null otherwise.
   */
  const claimFor = Effect.fnUntraced(function*(creations: ReadonlyArray<CreateOptions>) {
    const now = yield* DateTime.now
    const lease = Option.isSome(handoff) ? handoff.value.lease() : undefined
    if (lease === undefined) return null
    for (const { brokerKind } of creations) if (brokerKind === undefined) return null
    return DateTime.addDuration(now, lease)
  })

  /**
   * Hands the submissions of the creations written to the routing worker, when their statement
   * claimed them (`claimedUntil` set). Called as a step of the creation's own generator.
   */
  const handOver = (claimedUntil: DateTime.Utc | null, written: ReadonlyArray<CreateOptions & { readonly input: NewIntent }>) => {
    if (claimedUntil === null || Option.isNone(handoff)) return
    const submissions: Array<Job> = []
    for (const { brokerKind, input } of written) if (brokerKind !== undefined) submissions.push(submission(input, brokerKind))
    handoff.value.hand(submissions)
  }

  const quotaExceeded = ({ quota }: CreateOptions) => new QuotaExceeded({ retry_after: quota?.retryAfter ?? 0 })

  /**
   * One creation alone. Not written, it answers with the intent that holds its intent_id: itself
   * when an earlier try committed and only its acknowledgement was lost (its id is ours), another
   * as a duplicate; held by none, its quota was spent.
   */
  const createOne = Effect.fnUntraced(
    function*(input: NewIntent, creation: CreateOptions) {
      const claimedUntil = yield* claimFor([creation])
      const inserted = yield* insertCreations({ rows: [creationRow({ ...creation, input }, 0)], claimed_until: claimedUntil })
        .pipe(Effect.catchIf(isOverQuota, () => quotaExceeded(creation)))
      const [written] = inserted
      if (written === undefined) {
        const [existing] = yield* selectHolders([input])
        if (existing?.id === input.id) return createdJson(input, creation.now)
        if (existing === undefined && creation.quota !== undefined) return yield* quotaExceeded(creation)
        return yield* new DuplicateIntent({ existing: existing?.id })
      }
      handOver(claimedUntil, [{ ...creation, input }])
      return written.intent
    },
    orDie,
    Tracing.span("IntentRepository.create")
  )

  /**
   * Creations that arrive together, in one statement and one commit: each is answered after that
   * commit, with its intent or, when its intent_id was taken (by an earlier intent or an earlier
   * creation of the same batch), the intent that holds it. A live creation not written and whose
   * intent_id no intent holds was held back by its user's quota (`HeldByQuota`): its request tries
   * it alone, so that those that still fit are written, without holding up the batches. Should
   * the batch fail as a whole, each creation is tried alone, so that one bad creation fails no
   * other; one whose batch did commit (only the answer was lost) finds its own intent and answers
   * as the batch would have.
   */
  const createBatch = Effect.fnUntraced(
    // Made once, its steps in loops (see "Hot paths" in docs/development.md).
    function*(creations: ReadonlyArray<CreateOptions & { readonly input: NewIntent }>) {
      const claimedUntil = yield* claimFor(creations)
      const inserted = yield* insertCreations({ rows: creations.map(creationRow), claimed_until: claimedUntil })
      const created = new Map<string, string>()
      for (const row of inserted) created.set(row.id, row.intent)
      const written: Array<CreateOptions & { readonly input: NewIntent }> = []
      const notWritten: Array<NewIntent> = []
      for (const creation of creations) {
        if (created.has(creation.input.id)) written.push(creation)
        else notWritten.push(creation.input)
      }
      handOver(claimedUntil, written)
      const [first, ...rest] = notWritten
      const holders = first === undefined ? [] : yield* selectHolders([first, ...rest])
      const holderOf = new Map<string, IntentId>()
      for (const row of holders) holderOf.set(keyOf(row), row.id)
      const answers: Array<Exit.Exit<string, DuplicateIntent | QuotaExceeded | HeldByQuota>> = []
      for (const { input, now, quota } of creations) {
        const holder = holderOf.get(keyOf(input))
        const json = created.get(input.id)
        if (json !== undefined) answers.push(Exit.succeed(json))
        else if (holder === input.id) answers.push(Exit.succeed(createdJson(input, now)))
        else if (holder === undefined && quota !== undefined) answers.push(Exit.fail(new HeldByQuota()))
        else answers.push(Exit.fail(new DuplicateIntent({ existing: holder })))
      }
      return answers
    },
    (effect, creations) =>
      effect.pipe(
        Effect.catchTags({
          SqlError: () =>
            Effect.forEach(creations, (creation) => Effect.exit(createOne(creation.input, creation)), { concurrency: 4 }),
          ParseError: Effect.die
        }),
        // The batch runs apart from the requests that wait for it: its own span, with its statements under it.
        Tracing.span("IntentRepository.createBatch", { attributes: { "batch.size": creations.length } })
      )
  )

  const lookupBatched = yield* Batched.make(lookupBatch, { name: "intent_lookup", maxBatch: 100, concurrency: 2 })

  const pagesBatched = yield* Batched.make(pageBatch, { name: "intent_page", maxBatch: 100, concurrency: 4 })

  /** A page and its total: read with the other pages asked for meanwhile when the counters total it. */
  const page = (owner: Owner, query: IntentQuery) => {
    const request = listRequest(owner, query)
    return request.symbol === undefined && request.broker_id === undefined
      ? pagesBatched({ ...owned(owner), status: request.status ?? null, size: request.limit, skip: request.offset })
      : selectPageJson(request).pipe(orDie)
  }

  const createBatched = yield* Batched.make(createBatch, {
    name: "intent_create",
    maxBatch: 200,
    concurrency: 2,
    whenFull: {
      capacity: options.creationQueue ?? CREATION_QUEUE,
      error: () => new Unavailable({ detail: "Too many creations are waiting for the database; retry shortly" })
    }
  })

  const createJson = (input: NewIntent, options: CreateOptions) =>
    createBatched({ input, ...options }).pipe(
      Effect.catchTag("HeldByQuota", () => createOne(input, options)),
      // The creation's span, whichever form it answers in.
      Tracing.span("IntentRepository.create", { attributes: { batched: true } })
    )

  return identity<Context.Tag.Service<typeof IntentRepository>>({
    create: (input, options) => Effect.flatMap(createJson(input, options), (json) => Effect.orDie(decodeIntent(json))),

    createJson,

    monthlyUsage: Effect.fnUntraced(function*(userId: UserId, period: string) {
      return Option.match(yield* selectUsage({ user_id: userId, period }), { onNone: () => 0, onSome: (row) => row.count })
    }, orDie, Tracing.span("IntentRepository.monthlyUsage")),

    findById: Effect.fnUntraced(function*(owner: Owner, id: IntentId) {
      return Option.map(yield* selectIntent({ ...owned(owner), id }), (row) => row.intent)
    }, orDie, Tracing.span("IntentRepository.findById")),

    findByExternalId: Effect.fnUntraced(function*(owner: Owner, intentId: string) {
      return Option.map(yield* selectIntent({ ...owned(owner), intent_id: intentId }), (row) => row.intent)
    }, orDie, Tracing.span("IntentRepository.findByExternalId")),

    requestCancel: Effect.fnUntraced(
      function*(owner: Owner, intentId: IntentId, { eventId, now }: { readonly now: DateTime.Utc; readonly eventId: string }) {
        const found = yield* lockForCancel({ ...owned(owner), id: intentId })
        if (Option.isNone(found)) return yield* new IntentNotFound()
        const intent = found.value
        if (isFinal(intent.status)) return yield* IntentNotCancelable.of(intent.status)
        const at = DateTime.toDate(now)
        const transitions = Outbox.make(sql, Effect.succeed(eventId))
        yield* markCancelRequested({ id: intentId, cancel_requested_at: now })
        if (!intent.has_order) {
          // A submission never claimed cannot have reached the broker: take it back and cancel here.
          // Once claimed, it may have: its job decides with the broker's answer, so bring it forward.
          if (Option.isSome(yield* takeSubmission(intentId))) {
            const state = yield* transitions.lockState(intentId)
            yield* transitions.apply(intentId, applyLocalCancel(state, "Canceled by the client before submission"), at)
            return "canceled" as const
          }
          yield* hastenSubmission({ intent_id: intentId, run_at: now })
          return "requested" as const
        }
        yield* transitions.enqueue(intentId, "cancel", now, now)
        return "requested" as const
      },
      sql.withTransaction,
      orDie,
      Tracing.span("IntentRepository.requestCancel")
    ),

    // The lookups' and pages' statements, piped rather than in generators: fewer steps of the
    // runtime per request on the hottest paths. Lookups by id that arrive together (in one turn of
    // the event loop, or while two such statements are in flight) share one statement.
    findJson: (owner: Owner, ref: IntentRef) =>
      ("id" in ref
        ? lookupBatched({ owner, id: ref.id })
        : selectIntentJson({ ...owned(owner), intent_id: ref.intentId }).pipe(Effect.map(Option.map((row) => row.intent)), orDie)
      ).pipe(Tracing.span("IntentRepository.findJson")),

    listJson: (owner: Owner, query: IntentQuery) => page(owner, query).pipe(Tracing.span("IntentRepository.listJson")),

    list: Effect.fnUntraced(function*(owner: Owner, query: IntentQuery) {
      const { items, total } = yield* page(owner, query)
      return { items: yield* decodeIntents(items), total }
    }, orDie, Tracing.span("IntentRepository.list")),

    foldCounts: foldCountRows(undefined).pipe(
      Effect.map((folded) => folded.n),
      orDie,
      Tracing.span("IntentRepository.foldCounts")
    )
  })
})

/** The repository on the `SqlClient` in context: PostgreSQL or embedded PGlite alike. */
