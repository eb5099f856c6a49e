import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { ApiKey, User } from "../../domain/Account.js"
import type { ApiKeyId } from "../../domain/Ids.js"
import { Notifications } from "../../sql/Database.js"
import { AccountRepository } from "./AccountRepository.js"
import { API_KEYS_CHANNEL } from "./SqlAccountRepository.js"

type Found = { readonly key: ApiKey; readonly user: User }
type Entry = { readonly found: Found; readonly until: number }

/**
 * What the cache holds. `generation` moves on with every revocation heard and every change of
 * `listening`: a key looked up before it moved is not cached, since it may be revoked already.
 */
type State = {
  readonly listening: boolean
  readonly generation: number
  readonly entries: ReadonlyMap<string, Entry>
}

/** How long a key found stays cached at most; revocations reach the cache at once through LISTEN. */
const TTL = Duration.seconds(60)
const MAX_ENTRIES = 10_000

/**
 * API keys by hash, cached so that an authenticated request needs no key lookup. A revocation
 * drops the key here at once (on this instance directly, on the others through the notification
 * its commit sends); while notifications are not being received, nothing is cached: from the moment
 * the LISTEN stream fails (its connection lost, see `Notifications`) until a probe comes back
 * through a new one.
 */
export class ApiKeyCache extends Effect.Service<ApiKeyCache>()("ApiKeyCache", {
  scoped: Effect.gen(function*() {
    const accounts = yield* AccountRepository
    const notifications = yield* Effect.serviceOption(Notifications)
    const state = yield* Ref.make<State>({ listening: false, generation: 0, entries: new Map() })

    const setListening = (listening: boolean) =>
      Ref.update(state, (s) =>
        s.listening === listening ? s : { listening, generation: s.generation + 1, entries: listening ? s.entries : new Map() })

    const invalidate = (keyId: ApiKeyId | string) =>
      Ref.update(state, (s) => ({
        ...s,
        generation: s.generation + 1,
        entries: new Map([...s.entries].filter(([, entry]) => entry.found.key.id !== keyId))
      }))

    if (Option.isSome(notifications)) {
      yield* notifications.value.listen(API_KEYS_CHANNEL).pipe(
        Stream.tap(() => setListening(true)),
        Stream.runForEach(invalidate),
        Effect.onExit(() => setListening(false)),
        Effect.catchAllCause((cause) => Effect.logWarning("API key revocations not received; not caching keys", cause)),
        Effect.repeat(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
      // Caching (re)starts once a probe comes back: only then is a revocation sure to be heard.
      const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
      if (Option.isSome(sql)) {
        const probe = sql.value`SELECT pg_notify(${API_KEYS_CHANNEL}, 'probe')`
        yield* Ref.get(state).pipe(
          Effect.flatMap((s) => s.listening ? Effect.void : probe),
          Effect.ignore,
          Effect.repeat(Schedule.spaced("1 second")),
          Effect.forkScoped
        )
      }
    }

    const lookup = (hash: string): Effect.Effect<Option.Option<Found>> =>
      Effect.gen(function*() {
        const now = Date.now()
        const before = yield* Ref.get(state)
        const cached = before.entries.get(hash)
        if (cached !== undefined && cached.until > now) return Option.some(cached.found)
        const found = yield* accounts.findApiKeyByHash(hash)
        if (Option.isSome(found) && before.listening) {
          yield* Ref.update(state, (s) => {
            if (!s.listening || s.generation !== before.generation) return s
            const entries = s.entries.size >= MAX_ENTRIES ? new Map<string, Entry>() : new Map(s.entries)
            return { ...s, entries: entries.set(hash, { found: found.value, until: now + Duration.toMillis(TTL) }) }
          })
        }
        return found
      })

    return { lookup, invalidate } as const
  })
}) {}
