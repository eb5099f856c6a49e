import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ApiKey, User } from "../../domain/Account.js"
import type { ApiKeyId } from "../../domain/Ids.js"
import { API_KEYS_CHANNEL, KeyCreated } from "../../sql/Channels.js"
import { Notifications } from "../../sql/Database.js"
import { type ActiveApiKey, AccountRepository } from "./AccountRepository.js"

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

/** The keys that exist and are not revoked: when each expires (Unix milliseconds), by hash; hashes by id. */
interface ActiveKeys {
  readonly byHash: Map<string, { readonly id: string; readonly expiresAt: number | null }>
  readonly byId: Map<string, string>
}

/** How long a key found stays cached at most; revocations reach the cache at once through LISTEN. */
const TTL = Duration.seconds(60)
const MAX_ENTRIES = 10_000

/** The payload the cache sends itself to learn that its LISTEN connection hears. */
const PROBE = "probe"

const decodeCreated = Schema.decodeUnknownOption(KeyCreated)

/**
 * API keys by hash. While notifications on the keys' channel are heard, every instance holds the
 * hashes of all unrevoked keys (loaded once the LISTEN connection hears, then kept current by the
 * notifications that every creation and revocation sends at commit): an unknown, revoked or expired
 * key is refused from memory, so a flood of bad keys costs no query. The keys found are cached, so
 * that an authenticated request needs no key lookup either; a revocation drops its key at once.
 * While notifications are not heard (from the moment the LISTEN stream fails until a probe comes
 * back through a new one), every lookup reads the database and nothing is cached.
 */
export class ApiKeyCache extends Effect.Service<ApiKeyCache>()("ApiKeyCache", {
  scoped: Effect.gen(function*() {
    const accounts = yield* AccountRepository
    const notifications = yield* Effect.serviceOption(Notifications)
    // Plain variables, read and replaced in synchronous steps (the process has one thread): a lookup
    // answered from memory is then one step of the runtime, not a `Ref` read and a clock read more.
    let state: State = { listening: false, generation: 0, entries: new Map() }
    // Mutated in place: copying every key's hash on each creation would cost more than it protects.
    let active: ActiveKeys | undefined = undefined

    const setListening = (listening: boolean) =>
      Effect.sync(() => {
        if (!listening) active = undefined
        if (state.listening !== listening) {
          state = { listening, generation: state.generation + 1, entries: listening ? state.entries : new Map() }
        }
      })

    const add = (keys: ActiveKeys, id: string, hash: string, expiresAt: number | null) => {
      keys.byHash.set(hash, { id, expiresAt })
      keys.byId.set(id, hash)
    }

    const invalidate = (keyId: ApiKeyId | string) =>
      Effect.sync(() => {
        const hash = active?.byId.get(keyId)
        if (hash !== undefined) {
          active?.byId.delete(keyId)
          active?.byHash.delete(hash)
        }
        state = {
          ...state,
          generation: state.generation + 1,
          entries: new Map([...state.entries].filter(([, entry]) => entry.found.key.id !== keyId))
        }
      })

    const expiry = (key: ActiveApiKey) => key.expires_at === null ? null : DateTime.toEpochMillis(key.expires_at)

    /** A key created on this instance: known here at once, before its notification comes back. */
    const created = (key: ActiveApiKey) =>
      Effect.sync(() => {
        if (active !== undefined) add(active, key.id, key.key_hash, expiry(key))
      })

    const load = Effect.gen(function*() {
      const keys = yield* accounts.listActiveApiKeys()
      const loaded: ActiveKeys = { byHash: new Map(), byId: new Map() }
      for (const key of keys) add(loaded, key.id, key.key_hash, expiry(key))
      active = loaded
    })

    /**
     * The first notification through a stream shows that it hears: the keys are loaded then, and the
     * notifications that arrive meanwhile wait in the stream, to be applied after in their order.
     */
    const heard = (payload: string) =>
      Effect.gen(function*() {
        if (!state.listening) {
          yield* load
          yield* setListening(true)
        }
        if (payload === PROBE) return
        const creation = decodeCreated(payload)
        if (Option.isNone(creation)) return yield* invalidate(payload)
        const { created: id, expires_at, key_hash } = creation.value
        if (active !== undefined) add(active, id, key_hash, expires_at)
      })

    if (Option.isSome(notifications)) {
      yield* notifications.value.listen(API_KEYS_CHANNEL).pipe(
        Stream.runForEach(heard),
        Effect.onExit(() => setListening(false)),
        Effect.catchAllCause((cause) => Effect.logWarning("API key notifications not received; looking keys up", cause)),
        Effect.repeat(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
      // Memory answers (again) once a probe comes back: only then is every change sure to be heard.
      const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
      if (Option.isSome(sql)) {
        const probe = Effect.asVoid(sql.value`SELECT pg_notify(${API_KEYS_CHANNEL}, ${PROBE})`)
        yield* Effect.suspend(() => state.listening ? Effect.void : probe).pipe(
          Effect.ignore,
          Effect.repeat(Schedule.spaced("1 second")),
          Effect.forkScoped
        )
      }
    }

    /** Keeps what the database said of a key, unless a revocation or a change of `listening` came meanwhile. */
    const remember = (hash: string, found: Option.Option<Found>, before: State, now: number) =>
      Effect.sync(() => {
        if (Option.isNone(found) || !before.listening || !state.listening || state.generation !== before.generation) return
        const entries = state.entries.size >= MAX_ENTRIES ? new Map<string, Entry>() : new Map(state.entries)
        state = { ...state, entries: entries.set(hash, { found: found.value, until: now + Duration.toMillis(TTL) }) }
      })

    // A key known or cached is answered in one step of the runtime, with the clock read in it.
    const lookup = (hash: string): Effect.Effect<Option.Option<Found>> =>
      Effect.clockWith((clock) => {
        const now = clock.unsafeCurrentTimeMillis()
        const before = state
        if (before.listening && active !== undefined) {
          const known = active.byHash.get(hash)
          if (known === undefined || (known.expiresAt !== null && known.expiresAt <= now)) return Effect.succeedNone
        }
        const cached = before.entries.get(hash)
        if (cached !== undefined && cached.until > now) return Effect.succeedSome(cached.found)
        return Effect.tap(accounts.findApiKeyByHash(hash), (found) => remember(hash, found, before, now))
      })

    /** Whether unknown keys are refused from memory (the keys loaded and every change heard). */
    const answersFromMemory = Effect.sync(() => state.listening && active !== undefined)

    return { lookup, invalidate, created, answersFromMemory } as const
  })
}) {}
