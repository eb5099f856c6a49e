import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { BrokerNotFound } from "../../domain/Account.js"
import { Forbidden } from "../../domain/Auth.js"
import { IntentId, BrokerId, type Owner, type UserId, type Mode } from "../../domain/Ids.js"
import {
  type CreateIntentPayload,
  IntentNotFound,
  type NewIntent,
  type TradeIntent,
  validateOrder
} from "../../domain/Intent.js"
import { monthlyPeriod } from "../../domain/Limits.js"
import { isFinal } from "../../domain/Routing.js"
import { AccountRepository } from "../accounts/AccountRepository.js"
import { IdGenerator } from "../IdGenerator.js"
import { type CreateOptions, type IntentQuery, type IntentRef, IntentRepository } from "./IntentRepository.js"
import * as Tracing from "../../Tracing.js"

/** How long a cancel waits for the broker's answer before answering with the intent as it stands. */
const CANCEL_WAIT = "3 seconds"

/** Who creates: the key's user and mode, and the user's monthly quota of live intents. */
export interface Creator {
  readonly userId: UserId
  readonly mode: Mode
  readonly intentsPerMonth: number
}

/** The Trade Intent use cases, above the repositories and below HTTP. */
export class Intents extends Effect.Service<Intents>()("Intents", {
  effect: Effect.gen(function*() {
    const repository = yield* IntentRepository
    const accounts = yield* AccountRepository
    const ids = yield* IdGenerator

    /**
     * The intent a creation writes, and how, once its checks after the body pass: rules (422), broker
     * (404/403); the repository's are next: duplicate (409), quota (429).
     */
    const creation = Effect.fnUntraced(function*(creator: Creator, payload: CreateIntentPayload) {
      const order = yield* validateOrder(payload)
      const broker = yield* accounts.findBroker(creator.userId, payload.broker_id).pipe(
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(new BrokerNotFound()), onSome: Effect.succeed }))
      )
      if (broker.mode !== creator.mode) return yield* new Forbidden()
      const now = yield* DateTime.now
      const id = IntentId.make(yield* ids.uuid)
      const quota = creator.mode === "live"
        ? { limit: creator.intentsPerMonth, ...monthlyPeriod(now) }
        : undefined
      const intent: NewIntent = {
        ...order,
        id,
        user_id: creator.userId,
        mode: creator.mode,
        intent_id: payload.intent_id,
        broker_id: BrokerId.make(broker.id)
      }
      const options: CreateOptions = { now, quota, brokerKind: broker.kind, eventId: yield* ids.eventId }
      return [intent, options] as const
    })

    /** A creation whose checks pass, written by `write`, in the creation's span. */
    const creating = <A, E>(write: (intent: NewIntent, options: CreateOptions) => Effect.Effect<A, E>) =>
    (creator: Creator, payload: CreateIntentPayload) =>
      Effect.flatMap(creation(creator, payload), ([intent, options]) => write(intent, options)).pipe(
        Tracing.span("Intents.create")
      )

    /** Creates a pending intent, queued for routing; the answer is the intent as created. */
    const create = creating(repository.create)

    /** `create`, answered with the new intent's JSON as the API writes it: a creation's 201. */
    const createJson = creating(repository.createJson)

    const found = <A, E>(lookup: Effect.Effect<Option.Option<A>, E>) =>
      Effect.flatMap(lookup, Option.match({ onNone: () => Effect.fail(new IntentNotFound()), onSome: Effect.succeed }))

    /** Cancels, waiting briefly for the broker's answer when an order is out there. */
    const cancel = Effect.fnUntraced(function*(owner: Owner, id: IntentId) {
      const now = yield* DateTime.now
      const outcome = yield* repository.requestCancel(owner, id, {
        now,
        eventId: yield* ids.eventId
      })
      const current = found(repository.findById(owner, id))
      if (outcome === "canceled") return yield* current
      const untilFinal = Schedule.spaced("25 millis").pipe(
        Schedule.whileInput((intent: TradeIntent) => !isFinal(intent.status)),
        Schedule.passthrough
      )
      return yield* current.pipe(
        Effect.repeat(untilFinal),
        Effect.timeout(CANCEL_WAIT),
        Effect.catchTag("TimeoutException", () => current)
      )
    }, Tracing.span("Intents.cancel"))

    /** The same cancel, for a client that knows the intent only by its own `intent_id`. */
    const cancelByExternalId = Effect.fnUntraced(function*(owner: Owner, intentId: string) {
      const intent = yield* found(repository.findByExternalId(owner, intentId))
      return yield* cancel(owner, intent.id)
    }, Tracing.span("Intents.cancelByExternalId"))

    return {
      create,
      createJson,
      cancel,
      cancelByExternalId,
      get: Effect.fnUntraced(function*(owner: Owner, id: IntentId) {
        return yield* found(repository.findById(owner, id))
      }, Tracing.span("Intents.get")),
      list: Effect.fnUntraced(function*(owner: Owner, query: IntentQuery) {
        return yield* repository.list(owner, query)
      }, Tracing.span("Intents.list")),
      /** The intent's JSON as the API writes it, for a lookup's answer: no decoding and encoding again. */
      getJson: (owner: Owner, ref: IntentRef) => found(repository.findJson(owner, ref)).pipe(Tracing.span("Intents.getJson")),
      /** `list`'s page as the API writes it (`items` a JSON array), for a listing's answer. */
      listJson: (owner: Owner, query: IntentQuery) => repository.listJson(owner, query).pipe(Tracing.span("Intents.listJson"))
    } as const
  })
}) {}
