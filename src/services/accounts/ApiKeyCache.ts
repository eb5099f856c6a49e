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

/** How long a key found stays cached at most; revocations reach the cache at once through LISTEN. */
const TTL = Duration.seconds(60)
const MAX_ENTRIES = 10_000

/**
 * API keys by hash, cached so that an authenticated request needs no key lookup. A revocation
 * drops the key here at once (on this instance directly, on the others through the notification
 * its commit sends); while notifications are not being received, nothing is cached.
 */
export class ApiKeyCache extends Effect.Service<ApiKeyCache>()("ApiKeyCache", {
  scoped: Effect.gen(function*() {
    const accounts = yield* AccountRepository
    const notifications = yield* Effect.serviceOption(Notifications)
    const entries = yield* Ref.make(new Map<string, { readonly found: Found; readonly until: number }>())
    const listening = yield* Ref.make(false)

    const invalidate = (keyId: ApiKeyId | string) =>
      Ref.update(entries, (map) => new Map([...map].filter(([, entry]) => entry.found.key.id !== keyId)))

    if (Option.isSome(notifications)) {
      yield* notifications.value.listen(API_KEYS_CHANNEL).pipe(
        Stream.tap(() => Ref.set(listening, true)),
        Stream.runForEach(invalidate),
        Effect.onExit(() => Effect.zipRight(Ref.set(listening, false), Ref.set(entries, new Map()))),
        Effect.catchAllCause((cause) => Effect.logWarning("API key revocations not received; not caching keys", cause)),
        Effect.repeat(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
      // Caching starts once a probe comes back: only then is a revocation sure to be heard.
      const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
      if (Option.isSome(sql)) {
        yield* sql.value`SELECT pg_notify(${API_KEYS_CHANNEL}, 'probe')`.pipe(
          Effect.zipRight(Effect.delay(Ref.get(listening), "200 millis")),
          Effect.repeat({ schedule: Schedule.spaced("1 second"), until: (live) => live }),
          Effect.ignore,
          Effect.forkScoped
        )
      }
    }

    const lookup = (hash: string): Effect.Effect<Option.Option<Found>> =>
      Effect.gen(function*() {
        const now = Date.now()
        const cached = (yield* Ref.get(entries)).get(hash)
        if (cached !== undefined && cached.until > now) return Option.some(cached.found)
        const found = yield* accounts.findApiKeyByHash(hash)
        if (Option.isSome(found) && Option.isSome(notifications) && (yield* Ref.get(listening))) {
          yield* Ref.update(entries, (map) => {
            const next = map.size >= MAX_ENTRIES ? new Map<string, { readonly found: Found; readonly until: number }>() : new Map(map)
            return next.set(hash, { found: found.value, until: now + Duration.toMillis(TTL) })
          })
        }
        return found
      })

    return { lookup, invalidate } as const
  })
}) {}
