import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import type * as Cause from "effect/Cause"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type BrokerId, IntentId, OrderId } from "../../domain/Ids.js"
import {
  applyOrderUpdate,
  type BrokerFill,
  eventType,
  finalOrderStatuses,
  heardReason,
  isFinal,
  nextOrderStatus,
  type Transition
} from "../../domain/Routing.js"
import { IdGenerator } from "../IdGenerator.js"
import * as Batched from "../../sql/Batched.js"
import { orDie } from "../../sql/Defects.js"
import * as Outbox from "../../sql/Outbox.js"
import { PREPARED, uuidArray } from "../../sql/Prepared.js"
import * as Tables from "../../sql/Tables.js"
import type { BrokerExecution, BrokerOrder } from "../brokers/BrokerGateway.js"
import type { FollowUp, Recording } from "./RoutingRepository.js"
import { claimOf, type JobEnds } from "./SqlJobEnds.js"
import * as Tracing from "../../Tracing.js"

/** A word to record, heard on the update stream of connection `via` when set. */
type Heard = Recording & { readonly via?: BrokerId | undefined }

/** A fill as the orders' statement writes it: its order by client order id, which the statement resolves. */
const OrderFill = Schema.Struct({ client_order_id: Schema.String, ...Tables.Fills.row.omit("order_id").fields })
const fillColumns = Tables.columnsOf(Tables.Fills.row)
const fillRecordset = `client_order_id text, ${Tables.recordsetTypes(Tables.Fills.row.omit("order_id"), Tables.Fills.types)}`
const orderColumns = Tables.columnList(Tables.Orders.row)
const orderRecordset = Tables.recordsetTypes(Tables.Orders.row, Tables.Orders.types)
const encodeOrders = Schema.encodeSync(Schema.Array(Tables.Orders.row))
const encodeFills = Schema.encodeSync(Schema.Array(OrderFill))

/**
 * What the statement of an unlocked recording reads of each intent: what it was decided on (the
 * status its claim read, or the version of its row a read found) and the transition decided.
 */
const UNLOCKED_RECORDSET =
  "intent_id uuid, assumed text, version text, status text, status_reason text, changed boolean, final boolean, event_id text, type text"

/**
 * What an unlocked recording decides a word on, and what its write checks: the intent as its job's
 * claim read it (`assumed`, the status read) or a version of its row (`version`, from a read or
 * from the write of the word before).
 */
interface Standing {
  readonly state: Outbox.LockedState
  readonly assumed: Outbox.LockedState["status"] | null
  readonly version: string | null
}

/** The intents an unlocked recording wrote, each with the version of its row it wrote. */
const Written = Schema.Struct({
  written: Schema.parseJson(Schema.Array(Schema.Struct({ id: IntentId, version: Schema.String })))
})
const decodeWritten = Schema.decodeUnknown(Schema.Array(Written))

/** How many intents the recording remembers as it last wrote them (see `lastWritten`). */
const KEPT = 1_000

/** Where an intent stands after a transition: its status and fills. */
const after = (state: Outbox.LockedState, transition: Transition): Outbox.LockedState => ({
  ...state,
  status: transition.status,
  fills: [...state.fills, ...transition.fills.map(({ id, quantity }) => ({ id, quantity }))]
})

/** A broker's execution as a transition weighs it. */
const fillTerms = ({ id, price, quantity }: BrokerExecution): BrokerFill => ({ id, price, quantity })

/** When the broker says an order's fill `fillId` happened, if it says. */
const filledAtOf = (order: BrokerOrder, fillId: string): DateTime.Utc | undefined => {
  for (const fill of order.fills) if (fill.id === fillId) return fill.filledAt
  return undefined
}

/** Whether any of these words (by their indexes in `recordings`) was heard on a stream. */
const heardOnStream = (recordings: ReadonlyArray<Heard>, words: ReadonlyArray<readonly [number, Transition]>) => {
  for (const [index] of words) if (recordings[index]?.via !== undefined) return true
  return false
}

/** An order `s` of `saved` as its intent's document shows it, with its fills' array from `first_fills`. */
const firstOrder = Outbox.orderObject("s", "COALESCE(first_fills.fills, '[]'::json)")

/** {@link nextOrderStatus} in SQL, for an order row written again: its status never goes back. */
const NEXT_STATUS = `CASE
  WHEN orders.status IN (${[...finalOrderStatuses].map((status) => `'${status}'`).join(", ")}) THEN orders.status
  WHEN orders.status = 'partially_filled' AND EXCLUDED.status = 'new' THEN orders.status
  ELSE EXCLUDED.status END`

/**
 * How routing records the broker's word about orders (a submission's answer, a cancel's, a sync's,
 * an update heard on a connection's stream): the order, its new fills, the intent's transition
 * with its event, the job's end and the work that follows, written together, in batches.
 * `recordMany` takes words that must be recorded (a worker's); `recordHeardMany` words heard on a
 * stream, each left out (answered with none) when its intent is gone, final or routed elsewhere.
 */
export const make = (transitions: Outbox.Transitions, ends: JobEnds) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ids = yield* IdGenerator
  const newEventId = ids.eventId
  const prepared = sql.literal(PREPARED)
  const { applyAll, lockStates } = transitions
  const { amongIntents, endings, finishJobs } = ends

  /**
   * Orders and their new fills, whatever their number, as the common table expressions `saved`
   * (each order's row as written) and `fills_saved` (each new fill's row); with `among` (a query of
   * intent ids), only those intents' orders and fills.
   */
  const ordersSaved = (
    orders: ReadonlyArray<typeof Tables.Orders.row.Encoded>,
    fills: ReadonlyArray<typeof OrderFill.Encoded>,
    among?: Statement.Fragment
  ) =>
    sql`saved AS (
        INSERT INTO orders (${sql.literal(orderColumns)})
        SELECT ${sql.literal(orderColumns)} FROM json_to_recordset(${JSON.stringify(orders)}::json) AS o(${sql.literal(orderRecordset)})
        ${amongIntents("o.intent_id", among)}
        ON CONFLICT (client_order_id) DO UPDATE SET
          broker_order_id = EXCLUDED.broker_order_id,
          status = ${sql.literal(NEXT_STATUS)},
          updated_at = CASE WHEN orders.status = ${sql.literal(NEXT_STATUS)} THEN orders.updated_at
            ELSE EXCLUDED.updated_at END
        RETURNING *
      ), fills_saved AS (
        INSERT INTO fills (${sql.literal(Tables.columnList(Tables.Fills.row))})
        SELECT ${sql.literal(fillColumns.map((column) => column === "order_id" ? "saved.id" : `f.${column}`).join(", "))}
        FROM saved JOIN json_to_recordset(${JSON.stringify(fills)}::json) AS f(${sql.literal(fillRecordset)})
          ON f.client_order_id = saved.client_order_id
        ON CONFLICT (order_id, broker_fill_id) DO NOTHING
        RETURNING *
      )`

  /**
   * The common table expressions `first_fills` and `first_orders`: for each intent of `saved`, its
   * orders written and their fills as its document's JSON array, built from what the statement
   * wrote, once (materialized: the planner, which takes a common table expression for one row,
   * would otherwise build every array again for each intent it joins). The recording gives it to
   * the intents whose claim found no order, which the statement's lock checked on their
   * documents: those have no other order, and their row trigger builds the document around that
   * array (see the migration `0024_documents_around_written_orders`) instead of looking their
   * orders and fills up, which the statement's own writes would otherwise have to be visible for.
   */
  const firstOrders = sql.literal(`first_fills AS MATERIALIZED (
        SELECT f.order_id, json_agg(${Outbox.fillObject("f")} ORDER BY ${Outbox.fillSequence("f")}) AS fills
        FROM fills_saved f GROUP BY f.order_id
      ), first_orders AS MATERIALIZED (
        SELECT s.intent_id, json_agg(${firstOrder} ORDER BY ${Outbox.orderSequence("s")}) AS orders
        FROM saved s LEFT JOIN first_fills ON first_fills.order_id = s.id
        GROUP BY s.intent_id
      )`)

  /**
   * Orders and their new fills, whatever their number: one statement. It leaves their intents'
   * documents to the recording's next statement, which writes every one of those intents (the
   * triggers on `orders` and `fills` skip the statement named by `tir.documents_rebuilt_by`, for
   * this transaction): each document is built once per recorded word, not three times.
   */
  const saveOrders = SqlSchema.void({
    Request: Schema.Struct({ orders: Schema.NonEmptyArray(Tables.Orders.row), fills: Schema.Array(OrderFill) }),
    execute: ({ fills, orders }) =>
      sql`WITH ${ordersSaved(orders, fills)} SELECT set_config('tir.documents_rebuilt_by', statement_timestamp()::text, true)`
  })

  /** The intents' documents built again (by their row trigger): those whose recorded word changed no status. */
  const rebuildDocuments = (intentIds: ReadonlyArray<IntentId>) =>
    intentIds.length === 0 ? [] : [sql`documents AS (UPDATE intents SET document = NULL WHERE id IN ${sql.in(intentIds)})`]

  /** The work that follows an order the recording left open (see {@link FollowUp}), if any. */
  const nextWork = (
    intentId: IntentId,
    followUp: FollowUp | undefined,
    state: { readonly status: Transition["status"]; readonly cancelRequested: boolean },
    now: DateTime.Utc
  ): Outbox.Work | undefined => {
    if (followUp === undefined || isFinal(state.status)) return undefined
    if (state.cancelRequested) return { intentId, kind: "cancel", runAt: now }
    return followUp.syncAt === undefined ? undefined : { intentId, kind: "sync", runAt: followUp.syncAt }
  }

  /**
   * What recording a word on an intent in `state` writes: the transition, the order, its new fills
   * and the work that follows.
   *
   * This and the recording's other steps are made once, their steps in loops (see "Hot paths" in
   * docs/development.md).
   */
  const planOf = Effect.fnUntraced(function*({ done, followUp, intentId, order, via }: Heard, state: Outbox.LockedState, now: DateTime.Utc) {
    const transition = applyOrderUpdate(state, {
      status: order.status,
      reason: via === undefined ? order.reason : heardReason(order, state.cancelRequested),
      fills: order.fills.map(fillTerms)
    })
    const fills: Array<typeof OrderFill.Type> = []
    for (const fill of transition.fills) {
      fills.push({
        id: yield* ids.uuid,
        client_order_id: order.clientOrderId,
        broker_fill_id: fill.id,
        quantity: fill.quantity,
        price: fill.price,
        filled_at: filledAtOf(order, fill.id) ?? now
      })
    }
    const row = {
      id: OrderId.make(yield* ids.uuid),
      intent_id: intentId,
      client_order_id: order.clientOrderId,
      broker_order_id: order.brokerOrderId,
      status: order.status,
      created_at: now,
      updated_at: now
    }
    const next = nextWork(intentId, followUp, { status: transition.status, cancelRequested: state.cancelRequested }, now)
    return { intentId, transition, done, row, fills, next }
  })

  /**
   * Records the broker's word about orders, each of a different intent: the intents locked and
   * read in one statement, the orders and new fills written in one, the transitions with their
   * events and the jobs' ends in one, whatever their number. A heard word the lock shows not to
   * be recorded is answered with none.
   */
  const recordEach = Effect.fnUntraced(function*(recordings: ReadonlyArray<Heard>, now: DateTime.Utc) {
    const intentIds: Array<IntentId> = []
    for (const { intentId } of recordings) intentIds.push(intentId)
    const states = yield* lockStates(intentIds)
    const answers: Array<Option.Option<Transition>> = []
    const written: Array<Plan> = []
    const orders: Array<Plan["row"]> = []
    const fills: Array<typeof OrderFill.Type> = []
    const unchanged: Array<IntentId> = []
    const next: Array<Outbox.Work> = []
    for (const recording of recordings) {
      const { intentId, via } = recording
      const state = states.get(intentId)
      // A word heard on a connection's stream is left out when the intent is gone, final, or
      // routed elsewhere; any other word about an intent that vanished is a defect.
      if (state === undefined && via === undefined) return yield* Effect.dieMessage(`intent ${intentId} vanished`)
      if (state === undefined || (via !== undefined && (state.brokerId !== via || isFinal(state.status)))) {
        answers.push(Option.none())
        continue
      }
      const plan = yield* planOf(recording, state, now)
      answers.push(Option.some(plan.transition))
      written.push(plan)
      orders.push(plan.row)
      fills.push(...plan.fills)
      if (!plan.transition.changed) unchanged.push(intentId)
      if (plan.next !== undefined) next.push(plan.next)
    }
    const [first, ...rest] = orders
    if (first === undefined) return answers
    yield* saveOrders({ orders: [first, ...rest], fills })
    // Every intent whose orders and fills were saved is written now: a changed one by its
    // transition, the others by rebuilding their documents; the work that follows is queued.
    yield* applyAll(
      written,
      DateTime.toDate(now),
      endings(written, [...rebuildDocuments(unchanged), ...(next.length === 0 ? [] : [transitions.queued(next, now)])])
    )
    return answers
  })

  /**
   * The intent of a submission's answer as its job's claim read it, when that claim found no order
   * and no cancel asked for: what an unlocked recording assumes (see `recordUnlocked`).
   */
  const claimedState = ({ done, intentId, via }: Heard): Outbox.LockedState | undefined => {
    const context = via === undefined && done !== undefined ? Option.getOrUndefined(done.context) : undefined
    if (context === undefined || context.intentId !== intentId || context.hasOrder || context.cancelRequested || isFinal(context.status)) {
      return undefined
    }
    return { status: context.status, quantity: context.spec.quantity, fills: [], brokerId: context.connection.id, cancelRequested: false }
  }

  const countUnlocked = Batched.countServed("routing_record_unlocked")

  /** A statement of the recording without locks failed: what is left of the batch is recorded under locks. */
  const underLocks = (cause: Cause.Cause<unknown>) =>
    Effect.as(Effect.logWarning("could not record without locks; recording under locks", cause), undefined)

  /**
   * Where the last unlocked write left each open intent, or each made final by a word heard on a
   * stream (at most `KEPT` of them, the oldest forgotten first), for the next batch's words about
   * it: the fill heard after its submission's answer was written, or the answer that comes after
   * the fill, is then written in one round trip, with no read first and no lock. The
   * batches keep an intent's words in order (no two batches in flight hold words about one intent),
   * so an intent kept is always as this instance last wrote it; should anyone else have written it
   * since, its version no longer matches and the word is recorded under a lock.
   */
  const lastWritten = new Map<IntentId, Standing>()
  const keep = (intentId: IntentId, standing: Standing) => {
    if (lastWritten.size >= KEPT) {
      const oldest = lastWritten.keys().next()
      if (oldest.done !== true) lastWritten.delete(oldest.value)
    }
    lastWritten.set(intentId, standing)
  }

  /** What recording one word writes (see `planOf`). */
  type Plan = Effect.Effect.Success<ReturnType<typeof planOf>>

  /** What one write of an unlocked recording carries for an intent (see `fold`). */
  interface Folded {
    /** Where the write was decided: the intent as read or claimed, or as the last write left it. */
    readonly standing: Standing
    /** The write: the order's row and new fills, the last word's transition, the work that follows. */
    readonly plan: Plan
    /** The jobs the words end. */
    readonly dones: ReadonlyArray<NonNullable<Heard["done"]>>
    /** Each word written, by its index in the batch, with its own transition. */
    readonly words: ReadonlyArray<readonly [number, Transition]>
    /** Where the intent stands once written. */
    readonly state: Outbox.LockedState
  }

  /**
   * The next words about one intent (in the order they arrived) planned as one write, each on where
   * the word before left the intent: a submission's answer and the fill heard on the stream a moment
   * later are one statement, not two. A word that changes the intent's status is the write's last
   * (a write carries one transition and its event), and a word about another order than the write's
   * starts the next write; the words left go to the next statement. A word heard on a stream about
   * an intent found final or routed elsewhere is `skipped` (answered with none). `used` counts the
   * words taken, written or skipped.
   */
  const fold = Effect.fnUntraced(function*(words: ReadonlyArray<readonly [number, Heard]>, standing: Standing, now: DateTime.Utc) {
    let state = standing.state
    let plan: Folded["plan"] | undefined
    const dones: Array<NonNullable<Heard["done"]>> = []
    const written: Array<readonly [number, Transition]> = []
    const skipped: Array<number> = []
    let used = 0
    for (const [index, recording] of words) {
      if (plan !== undefined && (plan.transition.changed || recording.order.clientOrderId !== plan.row.client_order_id)) break
      used++
      if (recording.via !== undefined && (state.brokerId !== recording.via || isFinal(state.status))) {
        skipped.push(index)
        continue
      }
      const next = yield* planOf(recording, state, now)
      state = after(state, next.transition)
      if (recording.done !== undefined) dones.push(recording.done)
      written.push([index, next.transition])
      plan = plan === undefined ? next : {
        ...next,
        row: { ...plan.row, ...next.row, id: plan.row.id, status: nextOrderStatus(plan.row.status, next.row.status) },
        fills: [...plan.fills, ...next.fills],
        next: isFinal(state.status) ? undefined : next.next ?? plan.next
      }
    }
    const folded: Folded | undefined = plan === undefined ? undefined : { standing, plan, dones, words: written, state }
    return { folded, skipped, used }
  })

  /**
   * Writes about different intents, without locks, in one statement (see `recordUnlocked`), each
   * decided on where its intent stood; each answered with the version of the row written, or none
   * if its intent no longer stood so.
   */
  const writeUnlocked = Effect.fnUntraced(function*(folds: ReadonlyArray<Folded>, now: DateTime.Utc) {
    const changes = []
    const toWrite: Array<IntentId> = []
    const rows: Array<Plan["row"]> = []
    const fills: Array<typeof OrderFill.Type> = []
    const dones: Array<ReturnType<typeof claimOf>> = []
    const next: Array<Outbox.Work> = []
    for (const { dones: ended, plan, standing: { assumed, version } } of folds) {
      const { intentId, transition } = plan
      changes.push({
        intent_id: intentId,
        assumed,
        version,
        status: transition.status,
        status_reason: transition.reason,
        changed: transition.changed,
        final: transition.changed && isFinal(transition.status),
        event_id: transition.changed ? yield* newEventId : null,
        type: eventType(transition.status)
      })
      toWrite.push(intentId)
      rows.push(plan.row)
      fills.push(...plan.fills)
      for (const done of ended) dones.push(claimOf(done))
      if (plan.next !== undefined) next.push(plan.next)
    }
    const at = DateTime.toDate(now)
    const intentIds = uuidArray(sql, toWrite)
    const among = sql`SELECT id FROM locked`
    const answer = yield* sql`${prepared}
      WITH claimed AS (
        SELECT * FROM json_to_recordset(${JSON.stringify(changes)}::json) AS c(${sql.literal(UNLOCKED_RECORDSET)})
      ), locked AS (
        SELECT i.id FROM intents i JOIN claimed c ON c.intent_id = i.id
        WHERE i.id = ANY(${intentIds}) AND CASE WHEN c.version IS NULL
          THEN i.status = c.assumed AND i.cancel_requested_at IS NULL AND json_array_length(i.document -> 'orders') = 0
          ELSE i.xmin = c.version::xid END
        ORDER BY i.id FOR UPDATE OF i SKIP LOCKED
      ), ${ordersSaved(encodeOrders(rows), encodeFills(fills), among)},
      ${firstOrders},
      written AS (
        UPDATE intents SET status = c.status,
          status_reason = CASE WHEN c.changed THEN c.status_reason ELSE intents.status_reason END,
          updated_at = CASE WHEN c.changed THEN ${at} ELSE intents.updated_at END,
          document = CASE WHEN c.version IS NULL THEN first_orders.orders END
        FROM claimed c JOIN locked l ON l.id = c.intent_id LEFT JOIN first_orders ON first_orders.intent_id = c.intent_id
        WHERE intents.id = c.intent_id AND intents.id = ANY(${intentIds})
          AND (SELECT count(*) FROM saved) + (SELECT count(*) FROM fills_saved) >= 0
        RETURNING intents.*, intents.xmin::text AS version, c.changed, c.event_id, c.type
      ), ${Outbox.eventTables(sql, sql`written i WHERE i.changed`, { id: sql`i.event_id`, type: sql`i.type`, at: sql`${at}` })},
      ${finishJobs(dones, among)},
      jobs_moot AS (
        DELETE FROM routing_jobs WHERE intent_id IN (SELECT intent_id FROM claimed WHERE final)
          AND intent_id IN (${among}) AND locked_until IS NULL
      ), ${transitions.queued(next, now, among)}
      SELECT set_config('tir.documents_rebuilt_by', statement_timestamp()::text, true),
        ${sql.literal(Outbox.DELIVERIES_DUE)}, ${sql.literal(Outbox.EVENTS_WRITTEN)},
        COALESCE((SELECT json_agg(json_build_object('id', id, 'version', version)) FROM written), '[]')::text AS written`
    const [{ written } = { written: [] }] = yield* decodeWritten(answer)
    if (written.length > 0) countUnlocked(written.length)
    const versions = new Map<IntentId, string>()
    for (const { id, version } of written) versions.set(id, version)
    const answers: Array<Folded & { readonly version: string | undefined }> = []
    for (const folded of folds) answers.push({ ...folded, version: versions.get(folded.plan.intentId) })
    return answers
  })

  /**
   * Records words without locks: no lock is held between round trips, and a write is one round trip
   * (words whose intent stands as its job's claim read it: a submission's answer about an intent
   * found with no order and no cancel asked for, and the words after it; or words after others
   * about the same intent so recorded) or two (any other: the intent is read first, with its row's
   * version) instead of five. Each transition is decided on that reading, and each intent is
   * written only if it still stands so (for a claim's reading: the same status, no cancel asked
   * for, no order in its document; otherwise: the same version of its row, which every change to
   * it writes anew), checked again on the latest row should it have changed, and only if no other
   * transaction holds it. Its order, fills, status, event, jobs' ends and follow-up are written
   * together in one statement, the status after the orders and fills so that the document its
   * trigger builds shows them. The words about an intent are folded into as few writes as one
   * transition each allows (see `fold`), and the writes about different intents share a
   * statement; a word after a transition is decided on what that transition left, in the next
   * statement. A word heard on a stream about an intent found final or routed elsewhere is
   * answered with none, as under a lock: neither ever changes back. Answered by the recordings'
   * indexes; an intent gone or changed meanwhile is left to the locking recording, with every later
   * word about it.
   */
  const recordUnlocked = Effect.fnUntraced(function*(recordings: ReadonlyArray<Heard>, now: DateTime.Utc) {
    const answers = new Map<number, Option.Option<Transition>>()
    // Each intent's words still to write, in the order they arrived, by their indexes in the batch.
    const pending = new Map<IntentId, Array<readonly [number, Heard]>>()
    for (const [index, recording] of recordings.entries()) {
      const words = pending.get(recording.intentId)
      if (words === undefined) pending.set(recording.intentId, [[index, recording]])
      else words.push([index, recording])
    }
    // Where each intent stands for its next write (kept from the last batch, or as its job's
    // claim read it); undefined once it is left to the lock.
    const known = new Map<IntentId, Standing | undefined>()
    for (const [intentId, words] of pending) {
      const kept = lastWritten.get(intentId)
      lastWritten.delete(intentId)
      const claimed = kept === undefined && words[0] !== undefined ? claimedState(words[0][1]) : undefined
      const standing = kept ?? (claimed === undefined ? undefined : { state: claimed, assumed: claimed.status, version: null })
      if (standing !== undefined) known.set(intentId, standing)
    }
    const unknown: Array<IntentId> = []
    for (const intentId of pending.keys()) if (!known.has(intentId)) unknown.push(intentId)
    const read = yield* Effect.catchAllCause(transitions.readStates(unknown), underLocks)
    if (read === undefined) return answers
    for (const intentId of pending.keys()) {
      const state = read.get(intentId)
      if (!known.has(intentId)) known.set(intentId, state === undefined ? undefined : { state, assumed: null, version: state.version })
    }
    for (;;) {
      const folds: Array<Folded> = []
      for (const [intentId, words] of pending) {
        const standing = known.get(intentId)
        const { folded, skipped, used } = standing === undefined
          ? { folded: undefined, skipped: [], used: words.length }
          : yield* fold(words, standing, now)
        for (const index of skipped) answers.set(index, Option.none())
        if (folded !== undefined) folds.push(folded)
        if (used < words.length) pending.set(intentId, words.slice(used))
        else pending.delete(intentId)
      }
      if (folds.length === 0) return answers
      // Should a statement fail (it then wrote nothing), its words and every later one go under locks.
      const written = yield* Effect.catchAllCause(writeUnlocked(folds, now), underLocks)
      if (written === undefined) return answers
      for (const { plan: { intentId }, state, version, words } of written) {
        lastWritten.delete(intentId)
        if (version === undefined) {
          known.set(intentId, undefined)
          continue
        }
        for (const [index, transition] of words) answers.set(index, Option.some(transition))
        const standing = { state, assumed: null, version }
        known.set(intentId, standing)
        // A final intent is kept only when a stream's word made it so: the submission's answer
        // may still be on its way, and finds it here.
        if (!isFinal(state.status) || heardOnStream(recordings, words)) keep(intentId, standing)
      }
    }
  }, (effect, recordings) =>
    Tracing.span("RoutingRepository.recordUnlocked", { attributes: { "batch.size": recordings.length } })(effect))

  /**
   * Records in one transaction, in rounds of distinct intents: a second word about an intent is
   * recorded after the first, on the state the first left.
   */
  const recordAll = (recordings: ReadonlyArray<Heard>) =>
    Effect.gen(function*() {
      const now = yield* DateTime.now
      const answers: Array<Option.Option<Transition>> = []
      for (const round of Batched.rounds(recordings, ({ intentId }) => intentId)) {
        const recorded = yield* recordEach(round.map(([, recording]) => recording), now)
        round.forEach(([index], i) => {
          const answer = recorded[i]
          if (answer !== undefined) answers[index] = answer
        })
      }
      return answers
    }).pipe(sql.withTransaction, orDie)

  /** The answer to the recording at `index`; a defect should the batch have left it out. */
  const answerOf = (answers: ReadonlyArray<Option.Option<Transition>>, index: number): Exit.Exit<Option.Option<Transition>> => {
    const answer = answers.at(index)
    return answer === undefined ? Exit.die(new Error("a recording went unanswered")) : Exit.succeed(answer)
  }

  /** One recording in a transaction of its own, or in the caller's. */
  const recordOne = (recording: Heard) => Effect.flatten(Effect.map(recordAll([recording]), (answers) => answerOf(answers, 0)))

  /**
   * Recordings under locks in one transaction; should it fail, each is recorded alone, so that one
   * bad recording fails no other (recording again what a lost commit wrote changes nothing).
   */
  const recordLocked = (recordings: ReadonlyArray<Heard>) =>
    recordAll(recordings).pipe(
      Effect.map((answers) => recordings.map((_, i) => answerOf(answers, i))),
      Effect.catchAllCause(() => Effect.forEach(recordings, (recording) => Effect.exit(recordOne(recording))))
    )

  /**
   * Recordings that arrive together (the workers' jobs claimed together, a broker's stream): the
   * submissions' answers about intents still as their claims read them in one statement without
   * locks, the rest (and any of those that found their intent changed) in one transaction.
   */
  const noneUnlocked = (cause: Cause.Cause<unknown>) => Effect.as(underLocks(cause), new Map<number, Option.Option<Transition>>())
  const recordBatch = Effect.fnUntraced(function*(recordings: ReadonlyArray<Heard>) {
    const unlocked = yield* Effect.catchAllCause(recordUnlocked(recordings, yield* DateTime.now), noneUnlocked)
    const rest: Array<Heard> = []
    for (const [index, recording] of recordings.entries()) if (!unlocked.has(index)) rest.push(recording)
    const locked = rest.length === 0 ? [] : yield* recordLocked(rest)
    let next = 0
    const answers: Array<Exit.Exit<Option.Option<Transition>>> = []
    for (let index = 0; index < recordings.length; index++) {
      const answer = unlocked.get(index)
      answers.push(answer !== undefined ? Exit.succeed(answer) : locked[next++] ?? Exit.die(new Error("a recording went unanswered")))
    }
    return answers
  }, (effect, recordings) => Tracing.span("RoutingRepository.recordBatch", { attributes: { "batch.size": recordings.length } })(effect))
  const recordBatched = yield* Batched.makeMany(recordBatch, {
    name: "routing_record",
    maxBatch: 100,
    concurrency: 2,
    key: ({ intentId }) => intentId
  })

  /**
   * Recordings batched with those arriving meanwhile; inside a caller's transaction, in it (they
   * cannot wait for a batch), together under locks: a few statements whatever their number.
   */
  const recordHeardMany = Batched.unlessInTransaction(recordLocked, recordBatched)

  /** A word recorded whatever the intent's state (only a word heard on a stream is ever left out). */
  const certain = (exit: Exit.Exit<Option.Option<Transition>>): Exit.Exit<Transition> =>
    Exit.flatMap(exit, Option.match({
      onNone: () => Exit.die(new Error("a recording not heard on a stream was left out")),
      onSome: Exit.succeed
    }))

  const recordMany = (recordings: ReadonlyArray<Recording>) =>
    Effect.map(recordHeardMany(recordings), (exits) => exits.map(certain))

  return { recordMany, recordHeardMany }
})
