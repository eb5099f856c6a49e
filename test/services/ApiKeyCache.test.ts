import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as Crypto from "node:crypto"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { ApiKeyCache } from "../../src/services/accounts/ApiKeyCache.js"
import * as InMemoryAccountRepository from "../../src/services/accounts/InMemoryAccountRepository.js"
import * as SqlAccountRepository from "../../src/services/accounts/SqlAccountRepository.js"
import * as Database from "../../src/sql/Database.js"
import { Notifications } from "../../src/sql/Database.js"
import { newApiKey, seedUser } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"

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
  /** Lets the cache's listening fiber take what was fed. */
  const settle = Effect.repeatN(Effect.yieldNow(), 20)
  // Whether the LISTEN connection is up: notifications sent while it is down are lost.
  const connected = yield* Ref.make(false)
  const notify = (payload: string) =>
    Effect.zipRight(Ref.set(connected, true), Effect.zipRight(Queue.offer(feed, Option.some(payload)), settle))
  // While a lookup reads the repository, `during` runs: a revocation heard in that moment.
  const during = yield* Ref.make<Effect.Effect<void>>(Effect.void)
  const repository = Layer.effect(
    AccountRepository,
    Effect.map(InMemoryAccountRepository.make, (accounts) =>
      AccountRepository.of({
        ...accounts,
        findApiKeyByHash: (hash) => Effect.tap(accounts.findApiKeyByHash(hash), () => Effect.flatten(Ref.get(during))),
        // A creation notifies at its commit, as the SQL repository's does.
        createApiKey: (input) =>
          Effect.tap(accounts.createApiKey(input), () =>
            Effect.whenEffect(
              notify(JSON.stringify({ created: input.id, key_hash: input.key_hash, expires_at: null })),
              Ref.get(connected)
            ))
      }))
  )
  const layer = ApiKeyCache.Default.pipe(
    Layer.provideMerge(repository),
    Layer.provide(Layer.succeed(Notifications, notifications))
  )
  const lose = Effect.zipRight(Ref.set(connected, false), Effect.zipRight(Queue.offer(feed, Option.none()), settle))
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

/** One instance's cache on the database in context, and the key lookups it made in the database. */
const instance = Effect.gen(function*() {
  const lookups = yield* Ref.make(0)
  const repository = Layer.effect(
    AccountRepository,
    Effect.map(SqlAccountRepository.make, (accounts) =>
      AccountRepository.of({
        ...accounts,
        findApiKeyByHash: (hash) => Effect.zipRight(Ref.update(lookups, (n) => n + 1), accounts.findApiKeyByHash(hash))
      }))
  )
  const context = yield* Layer.build(ApiKeyCache.Default.pipe(Layer.provideMerge(repository)))
  return { cache: Context.get(context, ApiKeyCache), accounts: Context.get(context, AccountRepository), lookups: Ref.get(lookups) }
})

/** Waits (real time) until `check` holds, for at most `within` milliseconds. */
const eventually = (check: Effect.Effect<boolean>, within = 2_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + within
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`not within ${within} ms`))
      yield* Effect.sleep("10 millis")
    }
  })

const unknownHash = () => Crypto.randomBytes(32).toString("hex")

const databases = [
  ["PGlite", Database.migrated(Database.pglite(undefined))],
  ["PostgreSQL", Postgres.layerFresh]
] as const

for (const [name, database] of databases) {
  layer(database, { timeout: 60_000, excludeTestServices: true })(`ApiKeyCache on ${name}`, (it) => {
    it.scoped("item 7: bad keys cost no query; a key created on one instance works on another, a revoked one is refused there at once", () =>
      Effect.gen(function*() {
        const a = yield* instance
        const b = yield* instance
        yield* eventually(a.cache.answersFromMemory, 10_000)
        yield* eventually(b.cache.answersFromMemory, 10_000)

        // A flood of unknown keys: refused from memory, not one query.
        for (let i = 0; i < 200; i++) expect(Option.isNone(yield* b.cache.lookup(unknownHash()))).toBe(true)
        expect(yield* b.lookups).toBe(0)

        // A key created through instance A: B learns it from the creation's notification.
        const key = yield* newKey.pipe(Effect.provideService(AccountRepository, a.accounts))
        yield* eventually(usable(b.cache.lookup(key.hash)))
        expect(yield* a.cache.answersFromMemory).toBe(true)
        expect(yield* usable(a.cache.lookup(key.hash))).toBe(true)

        // Revoked through A: refused on B within moments, and its attempts cost B no query after.
        yield* key.revoke
        yield* a.cache.invalidate(key.id)
        expect(yield* usable(a.cache.lookup(key.hash))).toBe(false)
        yield* eventually(Effect.map(usable(b.cache.lookup(key.hash)), (ok) => !ok))
        const before = yield* b.lookups
        for (let i = 0; i < 50; i++) expect(Option.isNone(yield* b.cache.lookup(key.hash))).toBe(true)
        expect(yield* b.lookups).toBe(before)

        // A key that expires: found until then, refused from memory after.
        const expiring = yield* Effect.gen(function*() {
          const { user } = yield* seedUser
          const input = { ...(yield* newApiKey(user.id)), expires_at: DateTime.unsafeMake(Date.now() + 300) }
          yield* a.accounts.createApiKey(input)
          return input
        }).pipe(Effect.provideService(AccountRepository, a.accounts))
        yield* eventually(usable(b.cache.lookup(expiring.key_hash)))
        yield* Effect.sleep("300 millis")
        const beforeExpired = yield* b.lookups
        expect(Option.isNone(yield* b.cache.lookup(expiring.key_hash))).toBe(true)
        expect(yield* b.lookups).toBe(beforeExpired)

        // An instance started after the key was created loads it with the others.
        const late = yield* newKey.pipe(Effect.provideService(AccountRepository, a.accounts))
        const c = yield* instance
        yield* eventually(c.cache.answersFromMemory, 10_000)
        expect(yield* usable(c.cache.lookup(late.hash))).toBe(true)
        expect(Option.isNone(yield* c.cache.lookup(key.hash))).toBe(true)
      }))
  })
}
