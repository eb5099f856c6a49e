import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { ApiKeyCache } from "../../src/services/accounts/ApiKeyCache.js"
import * as InMemoryAccountRepository from "../../src/services/accounts/InMemoryAccountRepository.js"
import { Notifications } from "../../src/sql/Database.js"
import { newApiKey, seedUser } from "../support/Fixtures.js"

/**
 * Notifications the test controls: `Option.some(payload)` is a notification, `Option.none()` the
 * connection lost (the stream fails; the cache listens again a second later).
 */
const harness = Effect.gen(function*() {
  const feed = yield* Queue.unbounded<Option.Option<string>>()
  const notifications = Notifications.of({
    listen: () =>
      Stream.fromQueue(feed).pipe(
        Stream.mapEffect(Option.match({
          onNone: () => Effect.fail(new SqlError({ message: "connection lost" })),
          onSome: Effect.succeed
        }))
      )
  })
  // While a lookup reads the repository, `during` runs: a revocation heard in that moment.
  const during = yield* Ref.make<Effect.Effect<void>>(Effect.void)
  const repository = Layer.effect(
    AccountRepository,
    Effect.map(InMemoryAccountRepository.make, (accounts) =>
      AccountRepository.of({
        ...accounts,
        findApiKeyByHash: (hash) => Effect.tap(accounts.findApiKeyByHash(hash), () => Effect.flatten(Ref.get(during)))
      }))
  )
  const layer = ApiKeyCache.Default.pipe(
    Layer.provideMerge(repository),
    Layer.provide(Layer.succeed(Notifications, notifications))
  )
  /** Lets the cache's listening fiber take what was fed. */
  const settle = Effect.repeatN(Effect.yieldNow(), 20)
  const notify = (payload: string) => Effect.zipRight(Queue.offer(feed, Option.some(payload)), settle)
  const lose = Effect.zipRight(Queue.offer(feed, Option.none()), settle)
  return { layer, notify, lose, during, settle }
})

/** A new key of a new user; `revoke` revokes it in the repository without telling the cache. */
const newKey = Effect.gen(function*() {
  const accounts = yield* AccountRepository
  const { user } = yield* seedUser
  const input = yield* newApiKey(user.id)
  const key = yield* accounts.createApiKey(input)
  return {
    id: key.id,
    hash: input.key_hash,
    revoke: Effect.flatMap(DateTime.now, (now) => accounts.revokeApiKey(key.id, now))
  }
})

/** Whether a lookup finds the key unrevoked (a revoked key is found, and refused by the caller). */
const usable = (lookup: Effect.Effect<Option.Option<{ readonly key: { readonly revoked_at: unknown } }>>) =>
  Effect.map(lookup, Option.exists(({ key }) => key.revoked_at === null))

describe("ApiKeyCache", () => {
  it.effect("caches only while revocations are heard: not before the first notification, not after the connection is lost", () =>
    Effect.gen(function*() {
      const { layer, lose, notify, settle } = yield* harness
      yield* Effect.gen(function*() {
        const cache = yield* ApiKeyCache
        const found = (hash: string) => usable(cache.lookup(hash))
        yield* settle

        // Not listening yet: a key revoked behind the cache's back is refused at once.
        const early = yield* newKey
        expect(yield* found(early.hash)).toBe(true)
        yield* early.revoke
        expect(yield* found(early.hash)).toBe(false)

        // Listening (a notification came back): keys are cached, a silent revocation goes unseen.
        yield* notify("probe")
        const cached = yield* newKey
        expect(yield* found(cached.hash)).toBe(true)
        yield* cached.revoke
        expect(yield* found(cached.hash)).toBe(true)

        // The connection is lost: the cache empties and caches nothing until it hears again.
        yield* lose
        expect(yield* found(cached.hash)).toBe(false)
        const deaf = yield* newKey
        expect(yield* found(deaf.hash)).toBe(true)
        yield* deaf.revoke
        expect(yield* found(deaf.hash)).toBe(false)

        // Listening again a second later, once a notification comes back through the new stream.
        yield* TestClock.adjust("1 second")
        yield* settle
        yield* notify("probe")
        const again = yield* newKey
        expect(yield* found(again.hash)).toBe(true)
        yield* again.revoke
        expect(yield* found(again.hash)).toBe(true)
      }).pipe(Effect.provide(layer))
    }))

  it.effect("does not cache a key looked up while a revocation was heard", () =>
    Effect.gen(function*() {
      const { during, layer, notify } = yield* harness
      yield* Effect.gen(function*() {
        const cache = yield* ApiKeyCache
        yield* notify("probe")
        const key = yield* newKey
        // The revocation commits and its notification arrives while the lookup is under way.
        yield* Ref.set(during, Effect.zipRight(key.revoke, notify(key.id)))
        expect(yield* usable(cache.lookup(key.hash))).toBe(true)
        yield* Ref.set(during, Effect.void)
        expect(yield* usable(cache.lookup(key.hash))).toBe(false)
      }).pipe(Effect.provide(layer))
    }))
})
