import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Order from "effect/Order"
import * as Ref from "effect/Ref"
import { QuotaExceeded } from "../../domain/Auth.js"
import type { Mode, Owner, UserId } from "../../domain/Ids.js"
import { DuplicateIntent, IntentNotCancelable, IntentNotFound, intentJson, TradeIntent } from "../../domain/Intent.js"
import { isFinal } from "../../domain/Routing.js"
import type { IntentQuery, IntentRepository } from "./IntentRepository.js"

interface Stored {
  readonly intent: TradeIntent
  readonly userId: UserId
  readonly mode: Mode
}

interface State {
  readonly intents: ReadonlyArray<Stored>
  /** Live intents counted per `user/period`. */
  readonly usage: ReadonlyMap<string, number>
}

const newestFirst = Order.combine(
  Order.reverse(Order.mapInput(DateTime.Order, (s: Stored) => s.intent.created_at)),
  Order.reverse(Order.mapInput(Order.string, (s: Stored) => s.intent.id))
)

const owns = (owner: Owner) => (s: Stored) => s.userId === owner.userId && s.mode === owner.mode

/** For fast unit tests of the logic above the repository; the contract suite holds it to the SQL one. */
export const make = Effect.gen(function*() {
  const state = yield* Ref.make<State>({ intents: [], usage: new Map() })

  const page = (owner: Owner, query: IntentQuery) =>
    Effect.map(Ref.get(state), (s) => {
      const matching = s.intents
        .filter((x) =>
          owns(owner)(x) &&
          (query.status === undefined || x.intent.status === query.status) &&
          (query.symbol === undefined || x.intent.symbol === query.symbol.toUpperCase()) &&
          (query.brokerId === undefined || x.intent.broker_id === query.brokerId)
        )
        .sort(newestFirst)
      const start = (query.page - 1) * query.pageSize
      return { items: matching.slice(start, start + query.pageSize).map((x) => x.intent), total: matching.length }
    })

  const find = (owner: Owner, predicate: (intent: TradeIntent) => boolean) =>
    Effect.map(Ref.get(state), (s) =>
      Option.fromNullable(s.intents.find((x) => owns(owner)(x) && predicate(x.intent))).pipe(
        Option.map((x) => x.intent)
      ))

  const create: Context.Tag.Service<typeof IntentRepository>["create"] = (input, { now, quota }) =>
    Ref.modify(state, (s): [Effect.Effect<TradeIntent, DuplicateIntent | QuotaExceeded>, State] => {
      const owner = { userId: input.user_id, mode: input.mode }
      const existing = s.intents.find((x) => owns(owner)(x) && x.intent.intent_id === input.intent_id)
      if (existing?.intent.id === input.id) return [Effect.succeed(existing.intent), s]
      if (existing) return [Effect.fail(new DuplicateIntent({ existing: existing.intent.id })), s]
      const usageKey = `${input.user_id}/${quota?.period}`
      const used = s.usage.get(usageKey) ?? 0
      if (quota !== undefined && used >= quota.limit) {
        return [Effect.fail(new QuotaExceeded({ retry_after: quota.retryAfter })), s]
      }
      const intent = new TradeIntent({
        ...input,
        status: "pending",
        status_reason: null,
        orders: [],
        created_at: now,
        updated_at: now
      })
      return [Effect.succeed(intent), {
        intents: [...s.intents, { intent, userId: input.user_id, mode: input.mode }],
        usage: quota === undefined ? s.usage : new Map(s.usage).set(usageKey, used + 1)
      }]
    }).pipe(Effect.flatten)

  return identity<Context.Tag.Service<typeof IntentRepository>>({
    create,
    createJson: (input, options) => Effect.map(create(input, options), intentJson),
    monthlyUsage: (userId, period) => Effect.map(Ref.get(state), (s) => s.usage.get(`${userId}/${period}`) ?? 0),
    findById: (owner, id) => find(owner, (intent) => intent.id === id),
    findByExternalId: (owner, intentId) => find(owner, (intent) => intent.intent_id === intentId),
    requestCancel: (owner, id, { now }) =>
      Ref.modify(state, (s): [Effect.Effect<"canceled", IntentNotFound | IntentNotCancelable>, State] => {
        const stored = s.intents.find((x) => owns(owner)(x) && x.intent.id === id)
        if (stored === undefined) return [Effect.fail(new IntentNotFound()), s]
        if (isFinal(stored.intent.status)) return [Effect.fail(IntentNotCancelable.of(stored.intent.status)), s]
        // Nothing routes in memory: every cancel happens before submission.
        const intent = new TradeIntent({
          ...stored.intent,
          status: "canceled",
          status_reason: "Canceled by the client before submission",
          updated_at: now
        })
        return [
          Effect.succeed("canceled"),
          { ...s, intents: s.intents.map((x) => x === stored ? { ...stored, intent } : x) }
        ]
      }).pipe(Effect.flatten),
    findJson: (owner, ref) =>
      Effect.map(
        find(owner, (intent) => "id" in ref ? intent.id === ref.id : intent.intent_id === ref.intentId),
        Option.map(intentJson)
      ),
    listJson: (owner, query) =>
      Effect.map(page(owner, query), ({ items, total }) => ({ items: `[${items.map(intentJson).join(",")}]`, total })),
    list: (owner, query) => page(owner, query),
    // Totals are counted from the intents themselves: no count rows to merge.
    foldCounts: Effect.succeed(0)
  })
})
