import { describe, expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { ApiKeyId, IntentId, UserId } from "../../src/domain/Ids.js"
import { TradeIntent } from "../../src/domain/Intent.js"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import * as Database from "../../src/sql/Database.js"
import { eventId, liveCreator, newApiKey, newIntent, quota, seedUser, uuid } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"

const sqlRepositories = Layer.mergeAll(IntentRepository.layerSql(), AccountRepository.layerSql)

const backends = [
  ["in-memory", Layer.mergeAll(IntentRepository.layerInMemory, AccountRepository.layerInMemory)],
  ["PGlite", sqlRepositories.pipe(Layer.provide(Database.migrated(Database.pglite(undefined))))],
  ["PostgreSQL", sqlRepositories.pipe(Layer.provide(Postgres.layerFresh))]
] as const

/** A stop-limit intent whose quantity and prices use every decimal the API keeps. */
const preciseIntent = (owner: Parameters<typeof newIntent>[0], brokerId: Parameters<typeof newIntent>[1]) =>
  newIntent(owner, brokerId, {
    quantity: 0.000000001,
    order_type: "stop_limit",
    limit_price: 123456.5,
    stop_price: 99.123456789,
    time_in_force: "gtc",
    extended_hours: true
  })

/** Two users, the first with one test intent. */
const twoUsersOneIntent = Effect.gen(function*() {
  const intents = yield* IntentRepository
  const ada = yield* seedUser
  const bob = yield* seedUser
  const owner = { userId: ada.user.id, mode: "test" as const }
  const input = newIntent(owner, ada.testBroker.id)
  yield* intents.create(input, { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
  return { ada, bob, input, intents, owner }
})

for (const [name, backend] of backends) {
  layer(backend, { timeout: 60_000 })(`repository contract: ${name}`, (it) => {
    describe("accounts", () => {
      it.effect("creates and finds users", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const { user } = yield* seedUser
          const found = yield* accounts.findUser(user.id)
          expect(Option.getOrThrow(found)).toEqual(user)
          expect(Option.isNone(yield* accounts.findUser(UserId.make(uuid())))).toBe(true)
        }))

      it.effect("a connection refused becomes invalid only if its credentials are still the refused ones; replaced, active", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const { liveBroker, testBroker } = yield* seedUser
          const statusOf = (id: typeof liveBroker.id) =>
            Effect.map(accounts.findBrokerSecrets(id), Option.map((s) => [s.status, s.credentials]))
          const listed = () => Effect.map(accounts.listActiveBrokers("alpaca"), (ids) => ids.includes(liveBroker.id))

          // A refusal of credentials replaced meanwhile changes nothing.
          yield* accounts.markBrokerInvalid(liveBroker.id, "v0:older-ciphertext")
          expect(yield* statusOf(liveBroker.id)).toStrictEqual(Option.some(["active", "v1:ciphertext"]))
          yield* accounts.markBrokerInvalid(liveBroker.id, "v1:ciphertext")
          expect(yield* statusOf(liveBroker.id)).toStrictEqual(Option.some(["invalid", "v1:ciphertext"]))
          expect(yield* listed()).toBe(false)

          const replaced = yield* accounts.replaceBrokerCredentials(liveBroker.id, "v1:new-ciphertext")
          expect(Option.map(replaced, (b) => [b.id, b.status])).toStrictEqual(Option.some([liveBroker.id, "active"]))
          expect(yield* statusOf(liveBroker.id)).toStrictEqual(Option.some(["active", "v1:new-ciphertext"]))
          expect(yield* listed()).toBe(true)
          // A connection without credentials (the mock's) has none to replace.
          expect(Option.isNone(yield* accounts.replaceBrokerCredentials(testBroker.id, "v1:x"))).toBe(true)
        }))

      it.effect("finds API keys by hash with their user, lists them, revokes once", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const { user } = yield* seedUser
          const input = yield* newApiKey(user.id)
          const key = yield* accounts.createApiKey(input)
          expect(key.scopes).toEqual(["intents:read", "intents:write"])
          expect(key.revoked_at).toBeNull()

          const found = Option.getOrThrow(yield* accounts.findApiKeyByHash(input.key_hash))
          expect(found.key).toEqual(key)
          expect(found.user).toEqual(user)
          expect(Option.isNone(yield* accounts.findApiKeyByHash("0".repeat(64)))).toBe(true)
          expect((yield* accounts.listApiKeys(user.id)).map((k) => k.id)).toEqual([key.id])

          const now = yield* DateTime.now
          expect(yield* accounts.revokeApiKey(key.id, now)).toBe(true)
          expect(yield* accounts.revokeApiKey(key.id, now)).toBe(false)
          expect(yield* accounts.revokeApiKey(ApiKeyId.make(uuid()), now)).toBe(false)
          const revoked = Option.getOrThrow(yield* accounts.findApiKeyByHash(input.key_hash))
          expect(revoked.key.revoked_at).toEqual(now)
        }))

      it.effect("lists the keys not revoked, expired ones included, with their hashes", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const { user } = yield* seedUser
          const kept = yield* newApiKey(user.id)
          const expiresAt = DateTime.unsafeMake("1969-12-31T00:00:00.000Z")
          const expired = { ...(yield* newApiKey(user.id)), expires_at: expiresAt }
          const revoked = yield* newApiKey(user.id)
          for (const key of [kept, expired, revoked]) yield* accounts.createApiKey(key)
          yield* accounts.revokeApiKey(revoked.id, yield* DateTime.now)
          const active = (yield* accounts.listActiveApiKeys()).filter((key) =>
            [kept.id, expired.id, revoked.id].includes(key.id)
          )
          expect([...active].sort((a, b) => a.key_hash.localeCompare(b.key_hash))).toEqual(
            [
              { id: kept.id, key_hash: kept.key_hash, expires_at: null },
              { id: expired.id, key_hash: expired.key_hash, expires_at: expiresAt }
            ].sort((a, b) => a.key_hash.localeCompare(b.key_hash))
          )
        }))

      it.effect("records when a key was last used, never moving it back", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const { user } = yield* seedUser
          const input = yield* newApiKey(user.id)
          yield* accounts.createApiKey(input)
          const later = DateTime.unsafeMake("2026-01-02T03:04:05.000Z")
          yield* accounts.touchApiKey(input.id, later)
          yield* accounts.touchApiKey(input.id, DateTime.unsafeMake("2026-01-01T00:00:00.000Z"))
          const found = Option.getOrThrow(yield* accounts.findApiKeyByHash(input.key_hash))
          expect(found.key.last_used_at).toEqual(later)
        }))

      it.effect("finds a broker connection only for its own user, and any string is a safe id", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const ada = yield* seedUser
          const bob = yield* seedUser
          expect(Option.getOrThrow(yield* accounts.findBroker(ada.user.id, ada.testBroker.id))).toEqual(ada.testBroker)
          expect(Option.isNone(yield* accounts.findBroker(bob.user.id, ada.testBroker.id))).toBe(true)
          expect(Option.isNone(yield* accounts.findBroker(ada.user.id, "not-a-uuid'; --"))).toBe(true)
        }))

      it.effect("lists a user's connections of one mode; a disconnected one is neither listed nor found, once", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const ada = yield* seedUser
          const bob = yield* seedUser
          const test = { userId: ada.user.id, mode: "test" as const }
          expect((yield* accounts.listBrokers(test)).map((b) => b.id)).toEqual([ada.testBroker.id])
          expect((yield* accounts.listBrokers({ ...test, mode: "live" })).map((b) => b.id)).toEqual([ada.liveBroker.id])
          const now = yield* DateTime.now
          expect(yield* accounts.disconnectBroker(bob.user.id, ada.testBroker.id, now)).toBe(false)
          expect(yield* accounts.disconnectBroker(ada.user.id, ada.testBroker.id, now)).toBe(true)
          expect(yield* accounts.disconnectBroker(ada.user.id, ada.testBroker.id, now)).toBe(false)
          expect(yield* accounts.listBrokers(test)).toEqual([])
          expect(Option.isNone(yield* accounts.findBroker(ada.user.id, ada.testBroker.id))).toBe(true)
          expect(Option.isSome(yield* accounts.findBrokerSecrets(ada.testBroker.id))).toBe(true)
        }))

      it.effect("finds a key only for its own user, and renames users", () =>
        Effect.gen(function*() {
          const accounts = yield* AccountRepository
          const ada = yield* seedUser
          const bob = yield* seedUser
          const key = yield* accounts.createApiKey(yield* newApiKey(ada.user.id))
          expect(Option.map(yield* accounts.findApiKey(ada.user.id, key.id), (k) => k.id)).toEqual(Option.some(key.id))
          expect(Option.isNone(yield* accounts.findApiKey(bob.user.id, key.id))).toBe(true)
          const renamed = yield* accounts.renameUser(ada.user.id, "Grace")
          expect(Option.map(renamed, (u) => u.name)).toEqual(Option.some("Grace"))
          expect(Option.map(yield* accounts.findUser(ada.user.id), (u) => u.name)).toEqual(Option.some("Grace"))
          expect(Option.isNone(yield* accounts.renameUser(UserId.make(uuid()), "x"))).toBe(true)
        }))
    })

    describe("intents", () => {
      it.effect("creates a pending intent with no orders and finds it by id and by intent_id", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { testBroker, user } = yield* seedUser
          const owner = { userId: user.id, mode: "test" as const }
          const input = preciseIntent(owner, testBroker.id)
          const now = yield* DateTime.now
          const created = yield* intents.create(input, { now, quota: undefined, eventId: eventId() })
          expect(created).toMatchObject({
            id: input.id,
            intent_id: input.intent_id,
            status: "pending",
            status_reason: null,
            orders: [],
            quantity: 0.000000001,
            limit_price: 123456.5,
            stop_price: 99.123456789,
            time_in_force: "gtc",
            extended_hours: true
          })
          expect(Option.getOrThrow(yield* intents.findById(owner, input.id))).toEqual(created)
          expect(Option.getOrThrow(yield* intents.findByExternalId(owner, input.intent_id))).toEqual(created)
        }))

      it.effect("answers a creation with its JSON as the API writes it: what create decodes, and the lookup's", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { testBroker, user } = yield* seedUser
          const owner = { userId: user.id, mode: "test" as const }
          const input = preciseIntent(owner, testBroker.id)
          const options = { now: yield* DateTime.now, quota: undefined, eventId: eventId() }
          const json = yield* intents.createJson(input, options)
          const created = yield* Schema.decode(Schema.parseJson(TradeIntent))(json)
          expect(created).toMatchObject({
            id: input.id,
            status: "pending",
            orders: [],
            quantity: 0.000000001,
            limit_price: 123456.5,
            stop_price: 99.123456789
          })
          expect(DateTime.toEpochMillis(created.created_at)).toBe(DateTime.toEpochMillis(options.now))
          expect(JSON.parse(json)).toEqual(JSON.parse(Option.getOrThrow(yield* intents.findJson(owner, { id: input.id }))))
          // The same creation again (its first answer lost): the intent as created, not a duplicate.
          expect(JSON.parse(yield* intents.createJson(input, options))).toEqual(JSON.parse(json))
        }))

      it.effect("never shows an intent to another user, to the other mode, or for a malformed id", () =>
        Effect.gen(function*() {
          const { bob, input, intents, owner } = yield* twoUsersOneIntent
          for (const other of [{ userId: bob.user.id, mode: "test" as const }, { ...owner, mode: "live" as const }]) {
            expect(Option.isNone(yield* intents.findById(other, input.id))).toBe(true)
            expect(Option.isNone(yield* intents.findByExternalId(other, input.intent_id))).toBe(true)
            expect((yield* intents.list(other, { page: 1, pageSize: 100 })).total).toBe(0)
          }
        }))

      it.effect("refuses a second intent with the same intent_id per user and mode, naming the first", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { liveBroker, testBroker, user } = yield* seedUser
          const now = yield* DateTime.now
          const test = { userId: user.id, mode: "test" as const }
          const first = yield* intents.create(newIntent(test, testBroker.id, { intent_id: "same" }), {
            now,
            quota: undefined, eventId: eventId()
          })
          const again = yield* Effect.flip(
            intents.create(newIntent(test, testBroker.id, { intent_id: "same" }), { now, quota: undefined, eventId: eventId() })
          )
          expect(again).toMatchObject({ _tag: "DuplicateIntent", existing: first.id })
          const live = { userId: user.id, mode: "live" as const }
          const inLive = yield* intents.create(newIntent(live, liveBroker.id, { intent_id: "same" }), {
            now,
            quota: undefined, eventId: eventId()
          })
          expect(inLive.intent_id).toBe("same")
        }))

      it.effect("item 4: a creation retried after its commit's acknowledgement was lost answers as the original, not 409", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { liveBroker, testBroker, user } = yield* seedUser
          const now = yield* DateTime.now
          // The same creation (same id) tried again, as the one-by-one retry of a batch whose
          // commit went through but whose answer was lost does; batched and quota paths alike.
          const batched = newIntent({ userId: user.id, mode: "test" }, testBroker.id)
          const first = yield* intents.create(batched, { now, quota: undefined, eventId: eventId() })
          const retried = yield* intents.create(batched, { now, quota: undefined, eventId: eventId() })
          expect(retried).toMatchObject({ id: first.id, intent_id: batched.intent_id, status: "pending" })
          const counted = newIntent({ userId: user.id, mode: "live" }, liveBroker.id)
          const withQuota = yield* intents.create(counted, { now, quota: quota(1), eventId: eventId() })
          expect((yield* intents.create(counted, { now, quota: quota(1), eventId: eventId() })).id).toBe(withQuota.id)
          // Another creation of the same intent_id is still a duplicate, naming the first.
          const other = yield* Effect.flip(
            intents.create({ ...batched, id: newIntent({ userId: user.id, mode: "test" }, testBroker.id).id }, {
              now,
              quota: undefined,
              eventId: eventId()
            })
          )
          expect(other).toMatchObject({ _tag: "DuplicateIntent", existing: first.id })
          const listed = yield* intents.list({ userId: user.id, mode: "test" }, { page: 1, pageSize: 10 })
          expect(listed.total).toBe(1)
        }))

      it.effect("twenty concurrent creations with one intent_id yield one intent", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { testBroker, user } = yield* seedUser
          const owner = { userId: user.id, mode: "test" as const }
          const now = yield* DateTime.now
          const results = yield* Effect.all(
            Array.from({ length: 20 }, () =>
              Effect.either(intents.create(newIntent(owner, testBroker.id, { intent_id: "race" }), {
                now,
                quota: undefined, eventId: eventId()
              }))),
            { concurrency: "unbounded" }
          )
          expect(results.filter(Either.isRight)).toHaveLength(1)
          expect(results.filter(Either.isLeft).map((e) => e.left._tag)).toEqual(Array(19).fill("DuplicateIntent"))
          expect((yield* intents.list(owner, { page: 1, pageSize: 100 })).total).toBe(1)
        }))

      it.effect("holds live creations to the quota, after the duplicate check, and counts only successes", () =>
        Effect.gen(function*() {
          const { create, written } = yield* liveCreator(2)
          yield* create("a")
          expect((yield* Effect.flip(create("a")))._tag).toBe("DuplicateIntent")
          yield* create("b")
          expect(yield* Effect.flip(create("c"))).toMatchObject({ _tag: "QuotaExceeded", retry_after: 60 })
          expect((yield* Effect.flip(create("a")))._tag).toBe("DuplicateIntent")
          expect(yield* written).toBe(2)
        }))

      it.effect("concurrent creations at the quota boundary never exceed it", () =>
        Effect.gen(function*() {
          const { create, written } = yield* liveCreator(5)
          const results = yield* Effect.all(
            Array.from({ length: 12 }, (_, i) => Effect.either(create(`q-${i}`))),
            { concurrency: "unbounded" }
          )
          expect(results.filter(Either.isRight)).toHaveLength(5)
          expect(yield* written).toBe(5)
        }))

      it.effect("creations arriving together: a user past their quota gets what still fits, in order; others are not held back", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const spent = yield* liveCreator(3)
          const roomy = yield* liveCreator(3)
          const kept = yield* spent.create("kept")
          const results = yield* Effect.all([
            ...["s1", "s2", "s3", "s4", "kept"].map((intentId) => Effect.either(spent.create(intentId))),
            ...["r1", "r2", "r3"].map((intentId) => Effect.either(roomy.create(intentId)))
          ], { concurrency: "unbounded" })
          const outcome = results.map(Either.match({ onLeft: (error) => error._tag, onRight: () => "created" }))
          expect(outcome.slice(0, 4).filter((o) => o === "created")).toHaveLength(2)
          expect(outcome.slice(0, 4).filter((o) => o === "QuotaExceeded")).toHaveLength(2)
          // A duplicate is answered as one before the quota is looked at.
          expect(results[4]).toMatchObject({ left: { _tag: "DuplicateIntent", existing: kept.id } })
          expect(outcome.slice(5)).toEqual(["created", "created", "created"])
          expect(yield* spent.written).toBe(3)
          expect(yield* intents.monthlyUsage(spent.user.id, "1970-01-01")).toBe(3)
          expect(yield* intents.monthlyUsage(roomy.user.id, "1970-01-01")).toBe(3)
        }))

      it.effect("a client's cancel before submission cancels at once; a final intent is not cancelable", () =>
        Effect.gen(function*() {
          const { bob, input, intents, owner } = yield* twoUsersOneIntent
          const other = { userId: bob.user.id, mode: "test" as const }
          const notFound = yield* Effect.flip(intents.requestCancel(other, input.id, { now: yield* DateTime.now, eventId: eventId() }))
          expect(notFound._tag).toBe("IntentNotFound")

          yield* TestClock.adjust("1 second")
          const now = yield* DateTime.now
          expect(yield* intents.requestCancel(owner, input.id, { now, eventId: eventId() })).toBe("canceled")
          expect(Option.getOrThrow(yield* intents.findById(owner, input.id))).toMatchObject({
            status: "canceled",
            status_reason: "Canceled by the client before submission",
            updated_at: now
          })
          expect(yield* Effect.flip(intents.requestCancel(owner, input.id, { now, eventId: eventId() }))).toMatchObject({
            _tag: "IntentNotCancelable"
          })
        }))

      it.effect("lists newest first, paginates with true totals, and filters", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { testBroker, user } = yield* seedUser
          const owner = { userId: user.id, mode: "test" as const }
          const created = []
          for (let i = 0; i < 5; i++) {
            yield* TestClock.adjust("1 second")
            created.push(
              yield* intents.create(
                newIntent(owner, testBroker.id, { symbol: i % 2 === 0 ? "AAPL" : "MSFT" }),
                { now: yield* DateTime.now, quota: undefined, eventId: eventId() }
              )
            )
          }
          const newest = created.map((i) => i.id).reverse()
          const page1 = yield* intents.list(owner, { page: 1, pageSize: 2 })
          expect(page1.items.map((i) => i.id)).toEqual(newest.slice(0, 2))
          expect(page1.total).toBe(5)
          const page3 = yield* intents.list(owner, { page: 3, pageSize: 2 })
          expect(page3.items.map((i) => i.id)).toEqual(newest.slice(4))
          const past = yield* intents.list(owner, { page: 9, pageSize: 2 })
          expect(past).toEqual({ items: [], total: 5 })

          const msft = yield* intents.list(owner, { page: 1, pageSize: 10, symbol: "msft" })
          expect(msft.items.map((i) => i.symbol)).toEqual(["MSFT", "MSFT"])
          expect((yield* intents.list(owner, { page: 1, pageSize: 10, status: "pending" })).total).toBe(5)
          expect((yield* intents.list(owner, { page: 1, pageSize: 10, status: "filled" })).total).toBe(0)
          expect((yield* intents.list(owner, { page: 1, pageSize: 10, brokerId: testBroker.id })).total).toBe(5)
          expect((yield* intents.list(owner, { page: 1, pageSize: 10, brokerId: "nope" })).total).toBe(0)
        }))

      it.effect("the JSON of a lookup and of a page is exactly the intents' API encoding", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const { testBroker, user } = yield* seedUser
          const owner = { userId: user.id, mode: "test" as const }
          const encode = Schema.encodeSync(TradeIntent)
          for (let i = 0; i < 3; i++) {
            yield* TestClock.adjust("1 second")
            yield* intents.create(
              newIntent(owner, testBroker.id, { order_type: "limit", limit_price: 99.125, quantity: 0.5 + i }),
              { now: yield* DateTime.now, quota: undefined, eventId: eventId() }
            )
          }
          for (const query of [{ page: 1, pageSize: 2 }, { page: 2, pageSize: 2 }, { page: 5, pageSize: 2 }, { page: 1, pageSize: 10, status: "filled" as const }]) {
            const objects = yield* intents.list(owner, query)
            const json = yield* intents.listJson(owner, query)
            expect(json.total).toBe(objects.total)
            expect(JSON.parse(json.items)).toEqual(objects.items.map((intent) => encode(intent)))
          }
          const [first] = (yield* intents.list(owner, { page: 1, pageSize: 1 })).items
          if (first === undefined) return expect.unreachable("an intent was created")
          for (const ref of [{ id: first.id }, { intentId: first.intent_id }]) {
            const json = Option.getOrThrow(yield* intents.findJson(owner, ref))
            expect(JSON.parse(json)).toEqual(encode(first))
          }
          const other = { userId: (yield* seedUser).user.id, mode: "test" as const }
          expect(yield* intents.findJson(other, { id: first.id })).toEqual(Option.none())
          expect(yield* intents.findJson({ ...owner, mode: "live" }, { intentId: first.intent_id })).toEqual(Option.none())
          expect(yield* intents.listJson(other, { page: 1, pageSize: 10 })).toEqual({ items: "[]", total: 0 })
        }))

      it.effect("pages asked for at once, by different owners and filters, are each answered with their own items and total", () =>
        Effect.gen(function*() {
          const { ada, bob, intents, owner } = yield* twoUsersOneIntent
          const bobs = { userId: bob.user.id, mode: "test" as const }
          for (let i = 0; i < 3; i++) {
            yield* TestClock.adjust("1 second")
            yield* intents.create(newIntent(bobs, bob.testBroker.id), { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
          }
          const asked = [
            [owner, { page: 1, pageSize: 10 }],
            [bobs, { page: 1, pageSize: 2 }],
            [bobs, { page: 2, pageSize: 2 }],
            [bobs, { page: 1, pageSize: 10, status: "pending" as const }],
            [bobs, { page: 1, pageSize: 10, status: "filled" as const }],
            [{ ...bobs, mode: "live" as const }, { page: 1, pageSize: 10 }],
            [bobs, { page: 1, pageSize: 10, symbol: "msft" }],
            [owner, { page: 3, pageSize: 10 }]
          ] as const
          const together = yield* Effect.all(asked.map(([who, query]) => intents.listJson(who, query)), { concurrency: "unbounded" })
          const alone = yield* Effect.forEach(asked, ([who, query]) => intents.listJson(who, query))
          expect(together).toEqual(alone)
          const summary = together.map(({ items, total }) => [total, (JSON.parse(items) as Array<{ broker_id: string }>).map((intent) => intent.broker_id)])
          expect(summary).toEqual([
            [1, [ada.testBroker.id]],
            [3, [bob.testBroker.id, bob.testBroker.id]],
            [3, [bob.testBroker.id]],
            [3, [bob.testBroker.id, bob.testBroker.id, bob.testBroker.id]],
            [0, []],
            [0, []],
            [0, []],
            [1, []]
          ])
          // Newest first, as a page alone: the second page goes on where the first ended.
          const ids = (json: string) => (JSON.parse(json) as Array<{ id: string }>).map((intent) => intent.id)
          const [, first, second, all] = together
          expect([...ids(first?.items ?? "[]"), ...ids(second?.items ?? "[]")]).toEqual(ids(all?.items ?? "[]"))
        }))

      it.effect("lookups by id made at once, by different owners, are each answered with their owner's intent only", () =>
        Effect.gen(function*() {
          const { bob, intents, owner } = yield* twoUsersOneIntent
          const bobs = { userId: bob.user.id, mode: "test" as const }
          const [adas] = (yield* intents.list(owner, { page: 1, pageSize: 1 })).items
          const created = yield* intents.create(newIntent(bobs, bob.testBroker.id), { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
          if (adas === undefined) return expect.unreachable("an intent was created")
          const lookups = [
            [owner, adas.id],
            [bobs, created.id],
            [bobs, adas.id],
            [{ ...owner, mode: "live" as const }, adas.id],
            [owner, created.id],
            [owner, IntentId.make("00000000-0000-4000-8000-000000000000")],
            [owner, adas.id],
            // PostgreSQL reads a uuid in either case; the in-memory store compares ids as given.
            ...(name === "in-memory" ? [] : [[owner, IntentId.make(adas.id.toUpperCase())] as const])
          ] as const
          const answers = yield* Effect.all(lookups.map(([who, id]) => intents.findJson(who, { id })), { concurrency: "unbounded" })
          const ids = answers.map(Option.map((json) => JSON.parse(json).id))
          expect(ids).toEqual([
            Option.some(adas.id),
            Option.some(created.id),
            Option.none(),
            Option.none(),
            Option.none(),
            Option.none(),
            Option.some(adas.id),
            ...(name === "in-memory" ? [] : [Option.some(adas.id)])
          ])
        }))
    })
  })
}
