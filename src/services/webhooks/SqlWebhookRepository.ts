import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { DeliveryId, Mode, UserId, WebhookEndpointId } from "../../domain/Ids.js"
import { Delivery, EventType, WebhookEndpoint } from "../../domain/Webhook.js"
import { iso, WEBHOOK_CHANNEL } from "../intents/SqlTransitions.js"
import { type AttemptResult, MAX_IN_FLIGHT_PER_ENDPOINT, WebhookRepository } from "./WebhookRepository.js"

const Timestamp = Schema.DateTimeUtcFromDate

const EndpointRow = Schema.Struct({
  id: WebhookEndpointId,
  user_id: UserId,
  url: Schema.String,
  mode: Mode,
  events: Schema.Array(EventType),
  created_at: Timestamp,
  disabled_at: Schema.NullOr(Timestamp)
})

const DueRow = Schema.Struct({
  id: DeliveryId,
  claims: Schema.Int,
  failures: Schema.Int,
  endpoint_id: WebhookEndpointId,
  url: Schema.String,
  mode: Mode,
  secret: Schema.String,
  event_id: Schema.String,
  body: Schema.String
})

const DeliveryRow = Schema.Struct({ delivery: Delivery })

/** A delivery as the operator API shows it, built by the database with its attempts. */
const deliveryObject = `json_build_object(
  'id', d.id, 'endpoint_id', d.endpoint_id, 'event_id', d.event_id, 'type', ev.type, 'status', d.status,
  'attempts', d.attempts, 'last_status_code', d.last_status_code,
  'next_attempt_at', CASE WHEN d.status = 'pending' THEN ${iso("d.next_attempt_at")} END,
  'created_at', ${iso("d.created_at")},
  'history', COALESCE((
    SELECT json_agg(json_build_object(
      'attempted_at', ${iso("a.attempted_at")}, 'status_code', a.status_code, 'error', a.error,
      'duration_ms', a.duration_ms) ORDER BY a.number)
    FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]'::json))`

export { MAX_IN_FLIGHT_PER_ENDPOINT }

const endpointColumns = "id, user_id, url, mode, events, created_at, disabled_at"

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const toEndpoint = (row: typeof EndpointRow.Type) => new WebhookEndpoint(row)
  const now = Effect.map(DateTime.now, DateTime.toDate)
  const later = (lease: Duration.Duration) =>
    Effect.map(now, (at) => new Date(at.getTime() + Duration.toMillis(lease)))

  const insertEndpoint = SqlSchema.single({
    Request: Schema.Struct({ ...EndpointRow.fields, secret: Schema.String }),
    Result: EndpointRow,
    execute: (e) =>
      sql`INSERT INTO webhook_endpoints (id, user_id, url, mode, events, secret, created_at)
          VALUES (${e.id}, ${e.user_id}, ${e.url}, ${e.mode}, ${JSON.stringify(e.events)}::jsonb, ${e.secret}, ${e.created_at})
          RETURNING ${sql.literal(endpointColumns)}`
  })
  const selectEndpoints = SqlSchema.findAll({
    Request: UserId,
    Result: EndpointRow,
    execute: (userId) =>
      sql`SELECT ${sql.literal(endpointColumns)} FROM webhook_endpoints WHERE user_id = ${userId} ORDER BY created_at, id`
  })
  const selectEndpoint = SqlSchema.findOne({
    Request: WebhookEndpointId,
    Result: EndpointRow,
    execute: (id) => sql`SELECT ${sql.literal(endpointColumns)} FROM webhook_endpoints WHERE id = ${id}`
  })
  const selectDeliveries = SqlSchema.findAll({
    Request: Schema.Struct({ endpointId: WebhookEndpointId, limit: Schema.Int }),
    Result: DeliveryRow,
    execute: ({ endpointId, limit }) =>
      sql`SELECT ${sql.literal(deliveryObject)} AS delivery
          FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id
          WHERE d.endpoint_id = ${endpointId} ORDER BY d.created_at DESC, d.id DESC LIMIT ${limit}`
  })
  const selectDelivery = SqlSchema.findOne({
    Request: DeliveryId,
    Result: DeliveryRow,
    execute: (id) =>
      sql`SELECT ${sql.literal(deliveryObject)} AS delivery
          FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id WHERE d.id = ${id}`
  })

  /**
   * The attempt and its consequence in one statement: the delivery row and its attempt, only if still
   * claimed. An attempt that would be retried fails instead once its endpoint is disabled (a 410 to
   * another delivery while this one was in flight).
   */
  const record = (delivery: { readonly id: DeliveryId; readonly claims: number }, result: AttemptResult) => {
    const at = DateTime.toDate(result.at)
    const next = result.next
    const status = next._tag === "succeeded" ? "succeeded" : next._tag === "retry" ? "pending" : "failed"
    return sql<{ endpoint_id: string }>`
      WITH owned AS (
        UPDATE webhook_deliveries d SET
          attempts = d.attempts + 1,
          last_status_code = ${result.statusCode},
          status = CASE WHEN w.disabled_at IS NULL THEN ${status} ELSE 'failed' END,
          failures = d.failures + ${next._tag === "succeeded" ? 0 : 1},
          next_attempt_at = CASE WHEN w.disabled_at IS NULL THEN ${next._tag === "retry" ? DateTime.toDate(next.at) : null}::timestamptz END,
          locked_until = NULL,
          updated_at = ${at}
        FROM webhook_endpoints w
        WHERE d.id = ${delivery.id} AND d.claims = ${delivery.claims} AND d.locked_until IS NOT NULL AND w.id = d.endpoint_id
        RETURNING d.id, d.attempts, d.endpoint_id
      ), attempt AS (
        INSERT INTO webhook_attempts (delivery_id, number, attempted_at, status_code, error, duration_ms)
        SELECT id, attempts, ${at}, ${result.statusCode}, ${result.error}, ${Math.round(result.durationMs)} FROM owned
      )
      SELECT endpoint_id FROM owned`
  }

  /** Per endpoint, its deliveries currently held under an unexpired lease, by any instance. */
  const busy = (at: Date) =>
    sql`SELECT endpoint_id, count(*) AS n FROM webhook_deliveries
        WHERE status = 'pending' AND locked_until >= ${at} GROUP BY endpoint_id`

  /** After a 410: the endpoint is disabled and its other pending deliveries fail. */
  const disable = (endpointId: string, at: Date) =>
    Effect.gen(function*() {
      const disabled = yield* sql`UPDATE webhook_endpoints SET disabled_at = ${at}
                                  WHERE id = ${endpointId} AND disabled_at IS NULL RETURNING id`
      if (disabled.length === 0) return
      yield* sql`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, updated_at = ${at}
                 WHERE endpoint_id = ${endpointId} AND status = 'pending'`
    })

  return WebhookRepository.of({
    createEndpoint: (endpoint) =>
      insertEndpoint({ ...endpoint, disabled_at: null }).pipe(
        Effect.map(toEndpoint),
        Effect.orDie,
        Effect.withSpan("WebhookRepository.createEndpoint")
      ),

    listEndpoints: (userId) =>
      selectEndpoints(userId).pipe(
        Effect.map((rows) => rows.map(toEndpoint)),
        Effect.orDie,
        Effect.withSpan("WebhookRepository.listEndpoints")
      ),

    findEndpoint: (id) =>
      selectEndpoint(id).pipe(
        Effect.map(Option.map(toEndpoint)),
        Effect.orDie,
        Effect.withSpan("WebhookRepository.findEndpoint")
      ),

    deleteEndpoint: (id) =>
      Effect.gen(function*() {
        yield* sql`DELETE FROM webhook_attempts a USING webhook_deliveries d
                   WHERE a.delivery_id = d.id AND d.endpoint_id = ${id}`
        yield* sql`DELETE FROM webhook_deliveries WHERE endpoint_id = ${id}`
        const rows = yield* sql`DELETE FROM webhook_endpoints WHERE id = ${id} RETURNING id`
        return rows.length > 0
      }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("WebhookRepository.deleteEndpoint")),

    listDeliveries: (endpointId, limit) =>
      selectDeliveries({ endpointId, limit }).pipe(
        Effect.map((rows) => rows.map((row) => row.delivery)),
        Effect.orDie,
        Effect.withSpan("WebhookRepository.listDeliveries")
      ),

    findDelivery: (id) =>
      selectDelivery(id).pipe(
        Effect.map(Option.map((row) => row.delivery)),
        Effect.orDie,
        Effect.withSpan("WebhookRepository.findDelivery")
      ),

    resend: (id, at) =>
      Effect.gen(function*() {
        const rows = yield* sql`
          UPDATE webhook_deliveries d SET status = 'pending', failures = 0, next_attempt_at = ${DateTime.toDate(at)},
                 updated_at = ${DateTime.toDate(at)}
          FROM webhook_endpoints w
          WHERE d.id = ${id} AND w.id = d.endpoint_id AND w.disabled_at IS NULL
          RETURNING d.id`
        if (rows.length > 0) yield* sql`SELECT pg_notify(${WEBHOOK_CHANNEL}, 'due')`
        return rows.length > 0
      }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("WebhookRepository.resend")),

    claim: (limit, lease) =>
      Effect.gen(function*() {
        const at = yield* now
        const until = yield* later(lease)
        // Per endpoint, only as many as its free in-flight slots, earliest first: ranks are taken in
        // one order by every instance, so two claiming at once compete for the same rows (SKIP LOCKED)
        // rather than each taking a full share. Nothing is sent to a disabled endpoint: a delivery
        // written while its endpoint was being disabled fails here, unsent.
        const rows = yield* sql`
          WITH busy AS (${busy(at)}), orphans AS (
            SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
            WHERE w.disabled_at IS NOT NULL AND d.status = 'pending' AND d.next_attempt_at <= ${at}
              AND (d.locked_until IS NULL OR d.locked_until < ${at})
            FOR UPDATE OF d SKIP LOCKED
          ), orphaned AS (
            UPDATE webhook_deliveries d SET status = 'failed', next_attempt_at = NULL, updated_at = ${at}
            FROM orphans o WHERE d.id = o.id
          ), ranked AS (
            SELECT d.id, d.next_attempt_at, COALESCE(b.n, 0) AS held,
                   row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS rank
            FROM webhook_deliveries d
            JOIN webhook_endpoints w ON w.id = d.endpoint_id AND w.disabled_at IS NULL
            LEFT JOIN busy b ON b.endpoint_id = d.endpoint_id
            WHERE d.status = 'pending' AND d.next_attempt_at <= ${at}
              AND (d.locked_until IS NULL OR d.locked_until < ${at})
          ), due AS (
            SELECT d.id FROM webhook_deliveries d
            WHERE d.id IN (
                SELECT id FROM ranked WHERE rank + held <= ${MAX_IN_FLIGHT_PER_ENDPOINT}
                ORDER BY next_attempt_at, id LIMIT ${limit}
              )
              AND d.status = 'pending' AND (d.locked_until IS NULL OR d.locked_until < ${at})
            FOR UPDATE SKIP LOCKED
          ), claimed AS (
            UPDATE webhook_deliveries d SET locked_until = ${until}, claims = d.claims + 1
            FROM due WHERE d.id = due.id
            RETURNING d.id, d.claims, d.failures, d.endpoint_id, d.event_id, d.next_attempt_at
          )
          SELECT c.id, c.claims, c.failures, c.endpoint_id, w.url, w.mode, w.secret, c.event_id,
                 json_build_object('id', ev.id, 'type', ev.type, 'created_at', ${sql.literal(iso("ev.created_at"))},
                                   'data', ev.data)::text AS body
          FROM claimed c JOIN webhook_endpoints w ON w.id = c.endpoint_id JOIN events ev ON ev.id = c.event_id
          ORDER BY c.next_attempt_at, c.id`
        const decoded = yield* Schema.decodeUnknown(Schema.Array(DueRow))(rows)
        return decoded.map((row) => ({
          id: row.id,
          claims: row.claims,
          failures: row.failures,
          endpointId: row.endpoint_id,
          url: row.url,
          mode: row.mode,
          secret: Redacted.make(row.secret),
          eventId: row.event_id,
          body: row.body
        }))
      }).pipe(Effect.orDie, Effect.withSpan("WebhookRepository.claim")),

    nextDue: Effect.gen(function*() {
      const at = yield* now
      // A leased delivery is due when its lease runs out; another, when due, unless its endpoint has
      // no free in-flight slot (then one of that endpoint's leases ending comes first anyway). A
      // disabled endpoint's pending delivery counts: the claim fails it.
      const [row] = yield* sql`
        WITH busy AS (${busy(at)})
        SELECT min(CASE WHEN d.locked_until >= ${at} THEN d.locked_until ELSE d.next_attempt_at END) AS due
        FROM webhook_deliveries d LEFT JOIN busy b ON b.endpoint_id = d.endpoint_id
        WHERE d.status = 'pending' AND (d.locked_until >= ${at} OR COALESCE(b.n, 0) < ${MAX_IN_FLIGHT_PER_ENDPOINT})`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(Schema.Struct({ due: Schema.NullOr(Timestamp) }))))
      )
      return Option.fromNullable(row?.due)
    }).pipe(Effect.orDie, Effect.withSpan("WebhookRepository.nextDue")),

    extend: (deliveries, lease) =>
      deliveries.length === 0 ? Effect.void : Effect.gen(function*() {
        const until = yield* later(lease)
        yield* sql`UPDATE webhook_deliveries SET locked_until = ${until}
                   WHERE locked_until IS NOT NULL AND ${
          sql.or(deliveries.map((d) => sql`(id = ${d.id} AND claims = ${d.claims})`))
        }`
      }).pipe(Effect.orDie, Effect.withSpan("WebhookRepository.extend")),

    complete: (delivery, result) =>
      (result.next._tag === "gone"
        ? Effect.gen(function*() {
          const [owned] = yield* record(delivery, result)
          if (owned !== undefined) yield* disable(owned.endpoint_id, DateTime.toDate(result.at))
        }).pipe(sql.withTransaction)
        : record(delivery, result)).pipe(Effect.asVoid, Effect.orDie, Effect.withSpan("WebhookRepository.complete")),

    release: (delivery, at) =>
      sql`UPDATE webhook_deliveries SET locked_until = NULL, next_attempt_at = ${DateTime.toDate(at)}
          WHERE id = ${delivery.id} AND claims = ${delivery.claims}`.pipe(
        Effect.asVoid,
        Effect.orDie,
        Effect.withSpan("WebhookRepository.release")
      )
  })
})

export const layer = Layer.effect(WebhookRepository, make)
