import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type { BrokerKind } from "../../domain/Account.js"
import type { QuotaExceeded } from "../../domain/Auth.js"
import type { Unavailable } from "../../domain/Errors.js"
import type { IntentId, Owner, UserId } from "../../domain/Ids.js"
import type {
  DuplicateIntent,
  IntentNotCancelable,
  IntentNotFound,
  IntentStatus,
  NewIntent,
  TradeIntent
} from "../../domain/Intent.js"
import * as InMemoryIntentRepository from "./InMemoryIntentRepository.js"
import * as SqlIntentRepository from "./SqlIntentRepository.js"

/** The monthly quota a creation is held to (live intents only). */
export interface Quota {
  readonly limit: number
  /** First day of the current period (UTC calendar month), `YYYY-MM-DD`. */
  readonly period: string
  /** Seconds until the next period, for the 429's `retry_after`. */
  readonly retryAfter: number
}

/** What a creation is written with beside the intent. */
export interface CreateOptions {
  readonly now: DateTime.Utc
  readonly quota: Quota | undefined
  readonly eventId: string
  readonly brokerKind?: BrokerKind | undefined
}

export interface IntentQuery {
  readonly page: number
  readonly pageSize: number
  readonly status?: IntentStatus | undefined
  readonly symbol?: string | undefined
  readonly brokerId?: string | undefined
}

/** An intent named by our id or by its owner's own `intent_id`. */
export type IntentRef = { readonly id: IntentId } | { readonly intentId: string }

export class IntentRepository extends Context.Tag("IntentRepository")<IntentRepository, {
  /**
   * Inserts a pending intent. Idempotency rests on the unique (user, mode, intent_id); the quota
   * is counted in the same statement, after the duplicate check, and held by the database, so
   * neither can be overshot. The routing job and the `intent.created` event are written in that
   * statement too. A retry of a creation that did commit (same id) answers with the intent, not a
   * duplicate. While the database is too slow to keep up, a creation is refused at once
   * (`Unavailable`). Given the kind of broker the intent goes to, the submission may be claimed in
   * that statement and handed to this instance's routing worker at commit (see `RoutingHandoff`).
   */
  readonly create: (
    intent: NewIntent,
    options: CreateOptions
  ) => Effect.Effect<TradeIntent, DuplicateIntent | QuotaExceeded | Unavailable>
  /**
   * `create`, answered with the new intent's JSON exactly as the API writes it (what `create`
   * decodes): a creation's 201, served with no encoding in the service.
   */
  readonly createJson: (
    intent: NewIntent,
    options: CreateOptions
  ) => Effect.Effect<string, DuplicateIntent | QuotaExceeded | Unavailable>
  /** Live intents the user created in the month starting `period` (`YYYY-MM-01`), as the quota counts them. */
  readonly monthlyUsage: (userId: UserId, period: string) => Effect.Effect<number>
  readonly findById: (owner: Owner, id: IntentId) => Effect.Effect<Option.Option<TradeIntent>>
  readonly findByExternalId: (owner: Owner, intentId: string) => Effect.Effect<Option.Option<TradeIntent>>
  /**
   * A client's cancel: refused when the intent is final; canceled at once when no order can exist
   * yet; otherwise recorded and handed to routing (`requested`).
   */
  readonly requestCancel: (
    owner: Owner,
    id: IntentId,
    options: { readonly now: DateTime.Utc; readonly eventId: string }
  ) => Effect.Effect<"canceled" | "requested", IntentNotFound | IntentNotCancelable>
  /**
   * An intent's JSON exactly as the API writes it (what `findById` decodes), named by its id or by
   * its owner's `intent_id`: a lookup's answer, served with no decoding and encoding again.
   */
  readonly findJson: (owner: Owner, ref: IntentRef) => Effect.Effect<Option.Option<string>>
  /** `list`'s page as the API writes it: `items` a JSON array of intents, and the total matching. */
  readonly listJson: (
    owner: Owner,
    query: IntentQuery
  ) => Effect.Effect<{ readonly items: string; readonly total: number }>
  /** Newest first (`created_at` desc, then `id` desc). */
  readonly list: (
    owner: Owner,
    query: IntentQuery
  ) => Effect.Effect<{ readonly items: ReadonlyArray<TradeIntent>; readonly total: number }>
  /**
   * Housekeeping of the counts behind `total`: their rows written by database connections that
   * have ended are merged, so that a total stays a sum of few rows. Totals do not change. How many
   * rows were merged.
   */
  readonly foldCounts: Effect.Effect<number>
}>() {
  // The implementations import this Tag as a type only, so the Layers may name them directly.
  /** On the `SqlClient` in context, creations batched (at most `creationQueue` waiting). */
  static readonly layerSql = (options: SqlIntentRepository.Options = {}) =>
    Layer.scoped(this, SqlIntentRepository.make(options))
  /** In memory: no database at all. */
  static readonly layerInMemory = Layer.effect(this, InMemoryIntentRepository.make)
}
