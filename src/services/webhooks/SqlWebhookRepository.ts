import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { DeliveryId, Mode, type Owner, UserId, WebhookEndpointId } from "../../domain/Ids.js"
import {
  Delivery,
  DeliveryStatus,
  EventType,
  MAX_IN_FLIGHT_PER_ENDPOINT,
  TestEventData,
  WebhookEndpoint,
  WebhookEndpointDisabled,
  WebhookEndpointNotFound
} from "../../domain/Webhook.js"
import * as Batched from "../../sql/Batched.js"
import { orDie } from "../../sql/Defects.js"
import { WEBHOOK_CHANNEL } from "../../sql/Channels.js"
import { iso } from "../../sql/Outbox.js"
import * as Tables from "../../sql/Tables.js"
import type { AttemptResult, DueDelivery, NewEndpoint, NewTestEvent, WebhookRepository } from "./WebhookRepository.js"
import * as Tracing from "../../Tracing.js"

const Timestamp = Schema.DateTimeUtcFromDate

/** A row of `webhook_endpoints`. */
const EndpointRow = Schema.Struct({
  id: WebhookEndpointId,
  user_id: UserId,
  url: Schema.String,
  mode: Mode,
  events: Schema.Array(EventType),
  secret: Schema.String,
  created_at: Timestamp,
  disabled_at: Schema.NullOr(Timestamp)
})

/** An endpoint as it is read back: everything but its secret. */
const EndpointView = EndpointRow.omit("secret")

/** A row of `webhook_deliveries`. */
const DeliveryRow = Schema.Struct({
  id: DeliveryId,
  endpoint_id: WebhookEndpointId,
  /** The intent's event it carries, or else (exactly one of the two) its test event. */
  event_id: Schema.NullOr(Schema.String),
  test_event_id: Schema.NullOr(Schema.String),
  status: DeliveryStatus,
  attempts: Schema.Int,
  failures: Schema.Int,
  claims: Schema.Int,
  last_status_code: Schema.NullOr(Schema.Int),
  next_attempt_at: Schema.NullOr(Timestamp),
  locked_until: Schema.NullOr(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp
})

/** A row of `webhook_attempts`. */
const AttemptRow = Schema.Struct({
  delivery_id: DeliveryId,
  number: Schema.Int,
  attempted_at: Timestamp,
  status_code: Schema.NullOr(Schema.Int),
  error: Schema.NullOr(Schema.String),
  duration_ms: Schema.Int
})

/** A claimed delivery with its endpoint's address and secret and the envelope to send. */
const DueRow = Schema.Struct({
  ...DeliveryRow.pick("id", "claims", "failures", "endpoint_id").fields,
  ...EndpointRow.pick("url", "mode", "secret").fields,
  event_id: Schema.String,
  body: Schema.String
})

/** A delivery as the operator API shows it, with its event's type and its attempts, built by the database. */
const DeliveryView = Schema.Struct({ delivery: Delivery })

/** One claim of a delivery: what fences a worker that lost its lease. */
const Claim = DeliveryRow.pick("id", "claims")

/** An attempt and the state it leaves its delivery in, for {@link WebhookRepository} `complete`. */
const Outcome = Schema.Struct({
  ...Claim.fields,
  ...AttemptRow.pick("attempted_at", "status_code", "error", "duration_ms").fields,
  status: DeliveryStatus,
  failed: Schema.Int,
  next_attempt_at: Schema.NullOr(Timestamp)
})

/** {@link Outcome}'s columns in a `json_to_recordset`. */
const outcomeRecordset = Tables.recordsetTypes(Outcome, {
  id: "uuid",
  claims: "int",
  attempted_at: "timestamptz",
  status_code: "int",
  error: "text",
  duration_ms: "int",
  status: "text",
  failed: "int",
  next_attempt_at: "timestamptz"
})

const Lease = Schema.Struct({ at: Timestamp, until: Timestamp })

/**
 * `ev`, the event the delivery `d` carries (`id`, `type`, `created_at`, `data`): an intent's or a
 * test event, exactly one of which the delivery names.
 */
const eventOf = (d: string) =>
  `CROSS JOIN LATERAL (
     SELECT id, type, created_at, data FROM events WHERE id = ${d}.event_id
     UNION ALL
     SELECT id, type, created_at, data FROM webhook_test_events WHERE id = ${d}.test_event_id
   ) ev`

/** A delivery as the operator API shows it, built by the database with its attempts (`ev`: {@link eventOf}). */
const deliveryObject = `json_build_object(
  'id', d.id, 'endpoint_id', d.endpoint_id, 'event_id', ev.id, 'type', ev.type, 'status', d.status,
  'attempts', d.attempts, 'last_status_code', d.last_status_code,
  'next_attempt_at', CASE WHEN d.status = 'pending' THEN ${iso("d.next_attempt_at")} END,
  'created_at', ${iso("d.created_at")},
  'history', COALESCE((
    SELECT json_agg(json_build_object(
      'attempted_at', ${iso("a.attempted_at")}, 'status_code', a.status_code, 'error', a.error,
      'duration_ms', a.duration_ms) ORDER BY a.number)
    FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]'::json))`

const endpointColumns = "id, user_id, url, mode, events, created_at, disabled_at"

/** An endpoint with the count of its failing deliveries, for {@link WebhookRepository} `listEndpointsOf`. */
const HealthRow = Schema.Struct({ ...EndpointView.fields, failing: Schema.Int })

/** An attempt that was not a success: no answer, or not a 2xx. */
const failedAttempt = "(a.status_code IS NULL OR a.status_code NOT BETWEEN 200 AND 299)"

const toEndpoint = (row: typeof EndpointView.Type) => new WebhookEndpoint(row)

const toDue = (row: typeof DueRow.Type): DueDelivery => ({
  id: row.id,
  claims: row.claims,
  failures: row.failures,
  endpointId: row.endpoint_id,
  url: row.url,
  mode: row.mode,
  secret: Redacted.make(row.secret),
  eventId: row.event_id,
  body: row.body
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  /**
   * The ids of the deliveries matching `where`, locked in the order of their ids: every statement
   * that writes many deliveries locks them so (a single row's writes need not), so that two of
   * them never each hold a row the other waits for.
   */
  const inIdOrder = (where: Statement.Fragment) =>
    sql`SELECT id FROM webhook_deliveries WHERE ${where} ORDER BY id FOR UPDATE`
  const lease = (duration: Duration.Duration) =>
    Effect.map(DateTime.now, (at) => ({ at, until: DateTime.addDuration(at, duration) }))

  const insertEndpoint = SqlSchema.single({
    Request: EndpointRow,
    Result: EndpointView,
    execute: (e) =>
      sql`INSERT INTO webhook_endpoints (id, user_id, url, mode, events, secret, created_at)
          VALUES (${e.id}, ${e.user_id}, ${e.url}, ${e.mode}, ${JSON.stringify(e.events)}::jsonb, ${e.secret}, ${e.created_at})
          RETURNING ${sql.literal(endpointColumns)}`
  })
  const selectEndpoints = SqlSchema.findAll({
    Request: UserId,
    Result: EndpointView,
    execute: (userId) =>
      sql`SELECT ${sql.literal(endpointColumns)} FROM webhook_endpoints WHERE user_id = ${userId} ORDER BY created_at, id`
  })
  const selectEndpoint = SqlSchema.findOne({
    Request: WebhookEndpointId,
    Result: EndpointView,
    execute: (id) => sql`SELECT ${sql.literal(endpointColumns)} FROM webhook_endpoints WHERE id = ${id}`
  })
  const deleteAttempts = SqlSchema.void({
    Request: WebhookEndpointId,
    execute: (id) =>
      sql`DELETE FROM webhook_attempts a USING webhook_deliveries d WHERE a.delivery_id = d.id AND d.endpoint_id = ${id}`
  })
  const deleteDeliveries = SqlSchema.void({
    Request: WebhookEndpointId,
    execute: (id) =>
      sql`DELETE FROM webhook_deliveries WHERE id IN (${inIdOrder(sql`endpoint_id = ${id}`)})`
  })
  const deleteEndpointRow = SqlSchema.findOne({
    Request: WebhookEndpointId,
    Result: EndpointRow.pick("id"),
    execute: (id) => sql`DELETE FROM webhook_endpoints WHERE id = ${id} RETURNING id`
  })
  const selectDeliveries = SqlSchema.findAll({
    Request: Schema.Struct({ endpointId: WebhookEndpointId, limit: Schema.Int }),
    Result: DeliveryView,
    execute: ({ endpointId, limit }) =>
      sql`SELECT ${sql.literal(deliveryObject)} AS delivery
          FROM webhook_deliveries d ${sql.literal(eventOf("d"))}
          WHERE d.endpoint_id = ${endpointId} ORDER BY d.created_at DESC, d.id DESC LIMIT ${limit}`
  })
  const selectDelivery = SqlSchema.findOne({
    Request: DeliveryId,
    Result: DeliveryView,
    execute: (id) =>
      sql`SELECT ${sql.literal(deliveryObject)} AS delivery
          FROM webhook_deliveries d ${sql.literal(eventOf("d"))} WHERE d.id = ${id}`
  })
  const updateResend = SqlSchema.findOne({
    Request: Schema.Struct({ id: DeliveryId, at: Timestamp }),
    Result: DeliveryRow.pick("id"),
    execute: ({ at, id }) =>
      sql`UPDATE webhook_deliveries d SET status = 'pending', failures = 0, next_attempt_at = ${at}, updated_at = ${at}
          FROM webhook_endpoints w
          WHERE d.id = ${id} AND w.id = d.endpoint_id AND w.disabled_at IS NULL
          RETURNING d.id`
  })
  const selectEndpointsOf = SqlSchema.findAll({
    Request: Schema.Struct({ user_id: UserId, mode: Mode, since: Timestamp }),
    Result: HealthRow,
    execute: ({ mode, since, user_id }) =>
      sql`SELECT ${sql.literal(endpointColumns)},
                 (SELECT count(*) FROM webhook_deliveries d
                  WHERE d.endpoint_id = w.id AND d.created_at >= ${since}
                    AND (d.status = 'failed' OR (d.status = 'pending' AND EXISTS (
                      SELECT 1 FROM webhook_attempts a WHERE a.delivery_id = d.id AND ${sql.literal(failedAttempt)}
                    ))))::int AS failing
          FROM webhook_endpoints w
          WHERE w.user_id = ${user_id} AND w.mode = ${mode}
          ORDER BY w.created_at, w.id`
  })
  const updateSecret = SqlSchema.findOne({
    Request: EndpointRow.pick("id", "user_id", "secret"),
    Result: EndpointView,
    execute: ({ id, secret, user_id }) =>
      sql`UPDATE webhook_endpoints SET secret = ${secret} WHERE id = ${id} AND user_id = ${user_id}
          RETURNING ${sql.literal(endpointColumns)}`
  })
  const updateDisabled = SqlSchema.findOne({
    Request: Schema.Struct({ id: WebhookEndpointId, user_id: UserId, at: Timestamp }),
    Result: EndpointView,
    // Disabling as a 410 does: the pending deliveries fail with it (the claim fails any written meanwhile).
    execute: ({ at, id, user_id }) =>
      sql`WITH endpoint AS (
            UPDATE webhook_endpoints SET disabled_at = COALESCE(disabled_at, ${at})
            WHERE id = ${id} AND user_id = ${user_id}
            RETURNING ${sql.literal(endpointColumns)}
          ), failed AS (
            UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, updated_at = ${at}
            WHERE id IN (${inIdOrder(sql`endpoint_id IN (SELECT id FROM endpoint) AND status = 'pending'`)})
          )
          SELECT ${sql.literal(endpointColumns)} FROM endpoint`
  })
  const updateEnabled = SqlSchema.findOne({
    Request: Schema.Struct({ id: WebhookEndpointId, user_id: UserId }),
    Result: EndpointView,
    execute: ({ id, user_id }) =>
      sql`UPDATE webhook_endpoints SET disabled_at = NULL WHERE id = ${id} AND user_id = ${user_id}
          RETURNING ${sql.literal(endpointColumns)}`
  })
  const insertTestEvent = SqlSchema.single({
    Request: Schema.Struct({
      id: Schema.String,
      delivery_id: DeliveryId,
      endpoint_id: WebhookEndpointId,
      user_id: UserId,
      data: Schema.parseJson(TestEventData),
      created_at: Timestamp
    }),
    Result: Schema.Struct({ found: Schema.Boolean, created: Schema.Boolean }),
    // The endpoint's row is locked for the check, so a disabling committed just before is seen and
    // nothing is written. A disabling that waited for the lock may miss the new delivery (its
    // snapshot is older): the claim fails it unsent, as it does an event's delivery written meanwhile.
    execute: (e) =>
      sql`WITH target AS (
            SELECT id, disabled_at FROM webhook_endpoints
            WHERE id = ${e.endpoint_id} AND user_id = ${e.user_id}
            FOR SHARE
          ), test_event AS (
            INSERT INTO webhook_test_events (id, endpoint_id, type, data, created_at)
            SELECT ${e.id}, t.id, 'webhook.test', ${e.data}::json, ${e.created_at} FROM target t WHERE t.disabled_at IS NULL
            RETURNING id, endpoint_id, created_at
          ), delivery AS (
            INSERT INTO webhook_deliveries (id, endpoint_id, test_event_id, status, next_attempt_at, created_at, updated_at)
            SELECT ${e.delivery_id}, t.endpoint_id, t.id, 'pending', t.created_at, t.created_at, t.created_at FROM test_event t
            RETURNING id
          )
          SELECT EXISTS (SELECT 1 FROM target) AS found, EXISTS (SELECT 1 FROM delivery) AS created`
  })
  const notifyDue = SqlSchema.void({
    Request: Schema.Void,
    execute: () => sql`SELECT pg_notify(${WEBHOOK_CHANNEL}, 'due')`
  })

  /** Per endpoint, its deliveries currently held under an unexpired lease, by any instance. */
  const busy = (at: Date) =>
    sql`SELECT endpoint_id, count(*) AS n FROM webhook_deliveries
        WHERE status = 'pending' AND locked_until IS NOT NULL AND locked_until >= ${at} GROUP BY endpoint_id`

  const claimDue = SqlSchema.findAll({
    Request: Schema.Struct({ ...Lease.fields, limit: Schema.Int }),
    Result: DueRow,
    // Per endpoint, its earliest due deliveries up to its free in-flight slots (an index probe per
    // endpoint, not a scan of the backlog), then the earliest of those: taken in one order by every
    // instance, so two claiming at once compete for the same rows (SKIP LOCKED) rather than each
    // taking a full share. Nothing is sent to a disabled endpoint: a delivery written while its
    // endpoint was being disabled fails here, unsent, up to `limit` of them per claim. Every probe
    // reads an endpoint's rows in index order with a limit: joined to the disabled endpoints
    // instead, the orphans' probe was planned as a scan of every endpoint's due deliveries once
    // any endpoint was disabled (5 ms a claim with 30,000 pending).
    //
    // An endpoint's deliveries in flight are counted only for endpoints with deliveries due, by a
    // probe in lease order capped at the in-flight limit. Read so, the probe is an index scan,
    // which marks the entries of rows updated since as dead and skips them from then on: every
    // claim and every answer recorded leaves such an entry in the index of leased deliveries until
    // the table is vacuumed, and a count of every endpoint's leases at once (a bitmap scan) grew
    // with the deliveries made since (5 ms a claim after 26,000). Counted for every endpoint, the
    // probe cost about 50 µs each (130 ms a claim with 2,000 idle endpoints).
    //
    // The rows to lock and write are named by id (`= ANY`), read from the primary key whatever
    // the table's statistics say: planned on statistics taken while few deliveries were pending,
    // a join to them read every pending delivery instead (a backlog arrives faster than the table
    // is analyzed). Like every statement on this queue, it is planned for each call, not prepared:
    // the table swings from empty to a backlog of thousands, and a prepared statement's plan, made
    // once while it was small, kept reading it whole (25 ms a claim with 18,000 pending).
    execute: ({ at, limit, until }) =>
      sql`
        WITH orphans AS (
          SELECT o.id FROM webhook_endpoints w
          CROSS JOIN LATERAL (
            SELECT d.id FROM webhook_deliveries d
            WHERE d.endpoint_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= ${at}
              AND (d.locked_until IS NULL OR d.locked_until < ${at})
            ORDER BY d.next_attempt_at, d.id
            LIMIT ${limit}
            FOR UPDATE OF d SKIP LOCKED
          ) o
          WHERE w.disabled_at IS NOT NULL
        ), orphaned AS (
          UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, updated_at = ${at}
          WHERE id = ANY(ARRAY(SELECT id FROM orphans))
        ), waiting AS (
          SELECT w.id AS endpoint_id, c.id, c.next_attempt_at,
                 row_number() OVER (PARTITION BY w.id ORDER BY c.next_attempt_at, c.id) AS place
          FROM webhook_endpoints w
          CROSS JOIN LATERAL (
            SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
            WHERE d.endpoint_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= ${at}
              AND (d.locked_until IS NULL OR d.locked_until < ${at})
            ORDER BY d.next_attempt_at, d.id
            LIMIT ${MAX_IN_FLIGHT_PER_ENDPOINT}
          ) c
          WHERE w.disabled_at IS NULL
        ), candidates AS (
          SELECT c.id, c.next_attempt_at
          FROM (SELECT DISTINCT endpoint_id FROM waiting) e
          CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM (
              SELECT 1 FROM webhook_deliveries l
              WHERE l.endpoint_id = e.endpoint_id AND l.status = 'pending' AND l.locked_until IS NOT NULL
                AND l.locked_until >= ${at}
              ORDER BY l.locked_until
              LIMIT ${MAX_IN_FLIGHT_PER_ENDPOINT}
            ) leased
          ) b
          JOIN waiting c ON c.endpoint_id = e.endpoint_id AND c.place <= ${MAX_IN_FLIGHT_PER_ENDPOINT} - b.n
        ), due AS (
          SELECT d.id FROM webhook_deliveries d
          WHERE d.id = ANY(ARRAY(SELECT id FROM candidates ORDER BY next_attempt_at, id LIMIT ${limit}))
            AND d.status = 'pending' AND (d.locked_until IS NULL OR d.locked_until < ${at})
          FOR UPDATE SKIP LOCKED
        ), claimed AS (
          UPDATE webhook_deliveries d SET locked_until = ${until}, claims = d.claims + 1
          WHERE d.id = ANY(ARRAY(SELECT id FROM due))
          RETURNING d.id, d.claims, d.failures, d.endpoint_id, d.event_id, d.test_event_id, d.next_attempt_at
        )
        SELECT c.id, c.claims, c.failures, c.endpoint_id, w.url, w.mode, w.secret, ev.id AS event_id,
               json_build_object('id', ev.id, 'type', ev.type, 'created_at', ${sql.literal(iso("ev.created_at"))},
                                 'data', ev.data)::text AS body
        FROM claimed c JOIN webhook_endpoints w ON w.id = c.endpoint_id ${sql.literal(eventOf("c"))}
        ORDER BY c.next_attempt_at, c.id`
  })

  const selectNextDue = SqlSchema.single({
    Request: Timestamp,
    Result: Schema.Struct({ due: Schema.NullOr(Timestamp) }),
    // A leased delivery is due when its lease runs out; another, when due, unless its endpoint has
    // no free in-flight slot (then one of that endpoint's leases ending comes first anyway). A
    // disabled endpoint's pending delivery counts: the claim fails it.
    execute: (at) =>
      sql`
        WITH busy AS (${busy(at)})
        SELECT min(due) AS due FROM (
          SELECT min(locked_until) AS due FROM webhook_deliveries
          WHERE status = 'pending' AND locked_until IS NOT NULL AND locked_until >= ${at}
          UNION ALL
          SELECT min(c.next_attempt_at) FROM webhook_endpoints w
          LEFT JOIN busy b ON b.endpoint_id = w.id
          CROSS JOIN LATERAL (
            SELECT d.next_attempt_at FROM webhook_deliveries d
            WHERE d.endpoint_id = w.id AND d.status = 'pending' AND (d.locked_until IS NULL OR d.locked_until < ${at})
            ORDER BY d.next_attempt_at LIMIT 1
          ) c
          WHERE COALESCE(b.n, 0) < ${MAX_IN_FLIGHT_PER_ENDPOINT}
        ) x`
  })

  const extendLeases = SqlSchema.void({
    Request: Schema.Struct({ until: Timestamp, claims: Schema.NonEmptyArray(Claim) }),
    execute: ({ claims, until }) =>
      sql`UPDATE webhook_deliveries SET locked_until = ${until}
          WHERE id IN (
            SELECT id FROM webhook_deliveries
            WHERE locked_until IS NOT NULL AND ${sql.or(claims.map((d) => sql`(id = ${d.id} AND claims = ${d.claims})`))}
            FOR UPDATE SKIP LOCKED
          )`
  })

  /**
   * Attempts and their consequences, of many deliveries in one statement: each delivery's row and
   * its attempt, only if still claimed. An attempt that would be retried fails instead once its
   * endpoint is disabled (a 410 to another delivery while this one was in flight). The rows are
   * locked in the order of their ids first, as every statement that writes many deliveries locks
   * them, so that two such statements never wait for each other (a deadlock). The rows are found
   * by their ids in the primary key (`= ANY`): joined to the input alone, a plan could read the
   * whole table (8 ms a statement with 12,000 deliveries).
   */
  const recordAll = SqlSchema.findAll({
    Request: Schema.Array(Outcome),
    Result: DeliveryRow.pick("id", "endpoint_id"),
    execute: (outcomes) =>
      sql`
        WITH o AS (
          SELECT * FROM json_to_recordset(${JSON.stringify(outcomes)}::json) AS o(${sql.literal(outcomeRecordset)})
        ), locked AS (
          SELECT d.id FROM webhook_deliveries d JOIN o ON o.id = d.id AND o.claims = d.claims
          WHERE d.id = ANY(ARRAY(SELECT id FROM o)) AND d.locked_until IS NOT NULL
          ORDER BY d.id
          FOR UPDATE OF d
        ), owned AS (
          UPDATE webhook_deliveries d SET
            attempts = d.attempts + 1,
            last_status_code = o.status_code,
            status = CASE WHEN w.disabled_at IS NULL THEN o.status ELSE 'failed' END,
            failures = d.failures + o.failed,
            next_attempt_at = CASE WHEN w.disabled_at IS NULL THEN o.next_attempt_at END,
            locked_until = NULL,
            updated_at = o.attempted_at
          FROM locked l, o, webhook_endpoints w
          WHERE d.id = l.id AND o.id = l.id AND o.claims = d.claims AND w.id = d.endpoint_id
          RETURNING d.id, d.attempts, d.endpoint_id, o.attempted_at, o.status_code, o.error, o.duration_ms
        ), attempt AS (
          INSERT INTO webhook_attempts (delivery_id, number, attempted_at, status_code, error, duration_ms)
          SELECT id, attempts, attempted_at, status_code, error, duration_ms FROM owned
        )
        SELECT id, endpoint_id FROM owned`
  })

  const disableEndpoint = SqlSchema.findOne({
    Request: Schema.Struct({ id: WebhookEndpointId, at: Timestamp }),
    Result: EndpointRow.pick("id"),
    execute: ({ at, id }) =>
      sql`UPDATE webhook_endpoints SET disabled_at = ${at} WHERE id = ${id} AND disabled_at IS NULL RETURNING id`
  })
  const failPending = SqlSchema.void({
    Request: Schema.Struct({ id: WebhookEndpointId, at: Timestamp }),
    execute: ({ at, id }) =>
      sql`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, updated_at = ${at}
          WHERE id IN (${inIdOrder(sql`endpoint_id = ${id} AND status = 'pending'`)})`
  })

  /** After a 410: the endpoint is disabled and its other pending deliveries fail. */
  const disable = (id: WebhookEndpointId, at: DateTime.Utc) =>
    Effect.gen(function*() {
      if (Option.isSome(yield* disableEndpoint({ id, at }))) yield* failPending({ id, at })
    })

  const releaseClaim = SqlSchema.void({
    Request: Schema.Struct({ ...Claim.fields, at: Timestamp }),
    execute: ({ at, claims, id }) =>
      sql`UPDATE webhook_deliveries SET locked_until = NULL, next_attempt_at = ${at} WHERE id = ${id} AND claims = ${claims}`
  })

  const recorded: Exit.Exit<void> = Exit.void

  /**
   * Attempts recorded together, one statement for a batch; should it fail, each is recorded alone,
   * so that one bad attempt costs the others nothing. Made once, its steps in loops (see "Hot
   * paths" in docs/development.md).
   */
  const recordBatch = Effect.fnUntraced(function*(outcomes: ReadonlyArray<typeof Outcome.Type>) {
    const together = yield* Effect.exit(recordAll(outcomes))
    const answers: Array<Exit.Exit<void>> = []
    if (Exit.isSuccess(together)) {
      for (let i = 0; i < outcomes.length; i++) answers.push(recorded)
      return answers
    }
    for (const one of outcomes) answers.push(yield* Effect.exit(orDie(Effect.asVoid(recordAll([one])))))
    return answers
  }, (effect, outcomes) => Tracing.span("WebhookRepository.recordBatch", { attributes: { "batch.size": outcomes.length } })(effect))

  /**
   * Attempts that arrive together (in one turn of the event loop, or while two batches are in
   * flight) are recorded by one statement; inside a caller's transaction, in it.
   */
  const recordBatched = yield* Batched.make(recordBatch, { name: "webhook_complete", maxBatch: 100, concurrency: 2 })
  const recordOne = Batched.unlessInTransaction(
    (outcome: typeof Outcome.Type) => Effect.asVoid(orDie(recordAll([outcome]))),
    recordBatched
  )

  const outcome = (delivery: DueDelivery, result: AttemptResult): typeof Outcome.Type => {
    const next = result.next
    return {
      id: delivery.id,
      claims: delivery.claims,
      attempted_at: result.at,
      status_code: result.statusCode,
      error: result.error,
      duration_ms: Math.round(result.durationMs),
      status: next._tag === "succeeded" ? "succeeded" : next._tag === "retry" ? "pending" : "failed",
      failed: next._tag === "succeeded" ? 0 : 1,
      next_attempt_at: next._tag === "retry" ? next.at : null
    }
  }

  return identity<Context.Tag.Service<typeof WebhookRepository>>({
    createEndpoint: Effect.fnUntraced(function*(endpoint: NewEndpoint) {
      return toEndpoint(yield* insertEndpoint({ ...endpoint, disabled_at: null }))
    }, orDie, Tracing.span("WebhookRepository.createEndpoint")),

    listEndpoints: Effect.fnUntraced(function*(userId: UserId) {
      return (yield* selectEndpoints(userId)).map(toEndpoint)
    }, orDie, Tracing.span("WebhookRepository.listEndpoints")),

    findEndpoint: Effect.fnUntraced(function*(id: WebhookEndpointId) {
      return Option.map(yield* selectEndpoint(id), toEndpoint)
    }, orDie, Tracing.span("WebhookRepository.findEndpoint")),

    listEndpointsOf: Effect.fnUntraced(function*(owner: Owner, since: DateTime.Utc) {
      const rows = yield* selectEndpointsOf({ user_id: owner.userId, mode: owner.mode, since })
      return rows.map(({ failing, ...endpoint }) => ({ endpoint: toEndpoint(endpoint), failingDeliveries: failing }))
    }, orDie, Tracing.span("WebhookRepository.listEndpointsOf")),

    rotateSecret: Effect.fnUntraced(
      function*(userId: UserId, id: WebhookEndpointId, secret: string) {
        return Option.map(yield* updateSecret({ id, user_id: userId, secret }), toEndpoint)
      },
      orDie,
      Tracing.span("WebhookRepository.rotateSecret")
    ),

    setDisabled: Effect.fnUntraced(
      function*(userId: UserId, id: WebhookEndpointId, at: DateTime.Utc | null) {
        const row = at === null
          ? yield* updateEnabled({ id, user_id: userId })
          : yield* updateDisabled({ id, user_id: userId, at })
        return Option.map(row, toEndpoint)
      },
      orDie,
      Tracing.span("WebhookRepository.setDisabled")
    ),

    createTestDelivery: Effect.fnUntraced(function*(event: NewTestEvent) {
      const { created, found } = yield* insertTestEvent(event)
      if (!found) return yield* new WebhookEndpointNotFound()
      if (!created) return yield* new WebhookEndpointDisabled()
      yield* notifyDue(undefined)
      const written = yield* selectDelivery(event.delivery_id)
      return (yield* written).delivery
    }, sql.withTransaction, orDie, Tracing.span("WebhookRepository.createTestDelivery")),

    deleteEndpoint: Effect.fnUntraced(function*(id: WebhookEndpointId) {
      yield* deleteAttempts(id)
      yield* deleteDeliveries(id)
      return Option.isSome(yield* deleteEndpointRow(id))
    }, sql.withTransaction, orDie, Tracing.span("WebhookRepository.deleteEndpoint")),

    listDeliveries: Effect.fnUntraced(function*(endpointId: WebhookEndpointId, limit: number) {
      return (yield* selectDeliveries({ endpointId, limit })).map((row) => row.delivery)
    }, orDie, Tracing.span("WebhookRepository.listDeliveries")),

    findDelivery: Effect.fnUntraced(function*(id: DeliveryId) {
      return Option.map(yield* selectDelivery(id), (row) => row.delivery)
    }, orDie, Tracing.span("WebhookRepository.findDelivery")),

    resend: Effect.fnUntraced(function*(id: DeliveryId, at: DateTime.Utc) {
      const resent = Option.isSome(yield* updateResend({ id, at }))
      if (resent) yield* notifyDue(undefined)
      return resent
    }, sql.withTransaction, orDie, Tracing.span("WebhookRepository.resend")),

    claim: Effect.fnUntraced(function*(limit: number, duration: Duration.Duration) {
      const rows = yield* claimDue({ ...(yield* lease(duration)), limit })
      return rows.map(toDue)
    }, orDie, Tracing.span("WebhookRepository.claim")),

    nextDue: Effect.flatMap(DateTime.now, selectNextDue).pipe(
      Effect.map((row) => Option.fromNullable(row.due)),
      orDie,
      Tracing.span("WebhookRepository.nextDue")
    ),

    extend: Effect.fnUntraced(
      function*(deliveries: ReadonlyArray<DueDelivery>, duration: Duration.Duration) {
        const [first, ...rest] = deliveries
        if (first === undefined) return
        const { until } = yield* lease(duration)
        yield* extendLeases({ until, claims: [first, ...rest] })
      },
      orDie,
      Tracing.span("WebhookRepository.extend")
    ),

    complete: Effect.fnUntraced(function*(delivery: DueDelivery, result: AttemptResult) {
      if (result.next._tag !== "gone") return yield* recordOne(outcome(delivery, result))
      yield* Effect.gen(function*() {
        const [owned] = yield* recordAll([outcome(delivery, result)])
        if (owned !== undefined) yield* disable(owned.endpoint_id, result.at)
      }).pipe(sql.withTransaction)
    }, orDie, Tracing.span("WebhookRepository.complete")),

    release: Effect.fnUntraced(function*(delivery: DueDelivery, at: DateTime.Utc) {
      yield* releaseClaim({ id: delivery.id, claims: delivery.claims, at })
    }, orDie, Tracing.span("WebhookRepository.release"))
  })
})

