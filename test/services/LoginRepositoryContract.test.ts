import { describe, expect, layer } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { UserId } from "../../src/domain/Ids.js"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { LoginRepository } from "../../src/services/logins/LoginRepository.js"
import * as Database from "../../src/sql/Database.js"
import { seedUser, uuid } from "../support/Fixtures.js"
import * as Postgres from "../support/Postgres.js"

const sqlRepositories = LoginRepository.layerSql.pipe(Layer.provideMerge(AccountRepository.layerSql))

const backends = [
  ["in-memory", LoginRepository.layerInMemory.pipe(Layer.provideMerge(AccountRepository.layerInMemory))],
  ["PGlite", sqlRepositories.pipe(Layer.provide(Database.migrated(Database.pglite(undefined))))],
  ["PostgreSQL", sqlRepositories.pipe(Layer.provide(Postgres.layerFresh))]
] as const

const newUser = (now: DateTime.Utc) => ({
  id: UserId.make(uuid()),
  name: "Ada",
  tier: "free" as const,
  requests_per_minute: 60,
  intents_per_month: 100,
  created_at: now
})

for (const [name, backend] of backends) {
  layer(backend, { timeout: 60_000 })(`login repository contract: ${name}`, (it) => {
    describe("logins", () => {
      it.effect("signs up a user with a login at once; a taken email creates neither", () =>
        Effect.gen(function*() {
          const logins = yield* LoginRepository
          const accounts = yield* AccountRepository
          const now = yield* DateTime.now
          const email = `${uuid()}@example.com`
          const user = yield* logins.signup(newUser(now), { email, password_hash: "scrypt$a", created_at: now })
          expect(Option.isSome(yield* accounts.findUser(user.id))).toBe(true)
          expect(yield* logins.findLoginByEmail(email)).toEqual(Option.some({ user_id: user.id, password_hash: "scrypt$a" }))

          const second = newUser(now)
          const taken = yield* Effect.flip(logins.signup(second, { email, password_hash: "scrypt$b", created_at: now }))
          expect(taken._tag).toBe("EmailTaken")
          expect(Option.isNone(yield* accounts.findUser(second.id))).toBe(true)
        }))

      it.effect("gives an existing user one login, and an email to one user", () =>
        Effect.gen(function*() {
          const logins = yield* LoginRepository
          const now = yield* DateTime.now
          const { user } = yield* seedUser
          const { user: other } = yield* seedUser
          const email = `${uuid()}@example.com`
          yield* logins.createLogin({ user_id: user.id, email, password_hash: "scrypt$a", created_at: now })
          const again = yield* Effect.flip(
            logins.createLogin({ user_id: user.id, email: `${uuid()}@example.com`, password_hash: "h", created_at: now })
          )
          expect(again._tag).toBe("LoginExists")
          const taken = yield* Effect.flip(logins.createLogin({ user_id: other.id, email, password_hash: "h", created_at: now }))
          expect(taken._tag).toBe("EmailTaken")
          expect(yield* logins.findPasswordHash(user.id)).toEqual(Option.some("scrypt$a"))
          expect(yield* logins.findPasswordHash(other.id)).toEqual(Option.none())
        }))
    })

    describe("sessions", () => {
      it.effect("finds a live session with its user; not once revoked, idle, or after a password change", () =>
        Effect.gen(function*() {
          const logins = yield* LoginRepository
          const now = yield* DateTime.now
          const email = `${uuid()}@example.com`
          const user = yield* logins.signup(newUser(now), { email, password_hash: "scrypt$a", created_at: now })
          const open = (hash: string) => logins.createSession({ id: uuid(), token_hash: hash, user_id: user.id, created_at: now })
          const find = (hash: string, idleSince = DateTime.subtract(now, { days: 14 })) =>
            Effect.map(logins.findSession(hash, idleSince), Option.map((s) => [s.user.id, s.email]))

          yield* open("h1")
          yield* open("h2")
          yield* open("h3")
          expect(yield* find("h1")).toEqual(Option.some([user.id, email]))
          expect(yield* find("unknown")).toEqual(Option.none())
          // Idle since before `idleSince`: expired.
          expect(yield* find("h1", DateTime.add(now, { seconds: 1 }))).toEqual(Option.none())
          yield* logins.touchSession(
            Option.getOrThrow(yield* logins.findSession("h1", DateTime.subtract(now, { days: 1 }))).id,
            DateTime.add(now, { minutes: 5 })
          )
          expect(yield* find("h1", DateTime.add(now, { minutes: 1 }))).toEqual(Option.some([user.id, email]))

          const h2 = Option.getOrThrow(yield* logins.findSession("h2", DateTime.subtract(now, { days: 1 })))
          yield* logins.revokeSession(h2.id, now)
          expect(yield* find("h2")).toEqual(Option.none())
          expect(yield* find("h3")).toEqual(Option.some([user.id, email]))

          yield* logins.setPassword(user.id, "scrypt$new", now)
          expect(yield* find("h1")).toEqual(Option.none())
          expect(yield* find("h3")).toEqual(Option.none())
          expect(yield* logins.findPasswordHash(user.id)).toEqual(Option.some("scrypt$new"))
          yield* open("h4")
          yield* logins.revokeAllSessions(user.id, now)
          expect(yield* find("h4")).toEqual(Option.none())
        }))

      it.effect("trusts a device for its own user only", () =>
        Effect.gen(function*() {
          const logins = yield* LoginRepository
          const now = yield* DateTime.now
          const { user } = yield* seedUser
          const { user: other } = yield* seedUser
          yield* logins.trustDevice("d1", user.id, now)
          yield* logins.trustDevice("d1", user.id, now)
          expect(yield* logins.isTrustedDevice("d1", user.id)).toBe(true)
          expect(yield* logins.isTrustedDevice("d1", other.id)).toBe(false)
          expect(yield* logins.isTrustedDevice("d2", user.id)).toBe(false)
        }))

      it.effect("counts failures per bucket and window; a new window starts at zero", () =>
        Effect.gen(function*() {
          const logins = yield* LoginRepository
          const window = DateTime.unsafeMake(1_800_000_000_000)
          const next = DateTime.add(window, { minutes: 15 })
          const a = `a-${uuid()}`
          const b = `b-${uuid()}`
          yield* logins.recordFailure([a, b], window)
          yield* logins.recordFailure([a], window)
          expect(yield* logins.failures([a, b, "none"], window)).toEqual([2, 1, 0])
          yield* logins.recordFailure([a], next)
          expect(yield* logins.failures([a, b], next)).toEqual([1, 0])
        }))
    })
  })
}
