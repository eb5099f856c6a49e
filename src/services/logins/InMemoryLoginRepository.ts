import type * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type { UserId } from "../../domain/Ids.js"
import { EmailTaken, LoginExists } from "../../domain/Login.js"
import { AccountRepository } from "../accounts/AccountRepository.js"
import type { LoginRepository } from "./LoginRepository.js"

interface StoredSession {
  readonly id: string
  readonly userId: UserId
  readonly lastSeen: DateTime.Utc
  readonly revoked: boolean
}

interface State {
  /** By email. */
  readonly logins: ReadonlyMap<string, { readonly userId: UserId; readonly hash: string }>
  /** By token hash. */
  readonly sessions: ReadonlyMap<string, StoredSession>
  /** Token hash to user. */
  readonly devices: ReadonlyMap<string, UserId>
  /** `bucket` to its current window. */
  readonly failures: ReadonlyMap<string, { readonly start: number; readonly count: number }>
}

/** For fast unit tests of the logic above the repository; users live in the `AccountRepository` in context. */
export const make = Effect.gen(function*() {
  const accounts = yield* AccountRepository
  const state = yield* Ref.make<State>({ logins: new Map(), sessions: new Map(), devices: new Map(), failures: new Map() })

  const loginOf = (s: State, userId: UserId) => [...s.logins].find(([, login]) => login.userId === userId)

  const updateSessions = (f: (session: StoredSession) => StoredSession) =>
    Ref.update(state, (s) => ({ ...s, sessions: new Map([...s.sessions].map(([hash, session]) => [hash, f(session)])) }))

  return identity<Context.Tag.Service<typeof LoginRepository>>({
    signup: (user, login) =>
      Effect.gen(function*() {
        const claimed = yield* Ref.modify(state, (s): [boolean, State] =>
          s.logins.has(login.email)
            ? [false, s]
            : [true, { ...s, logins: new Map(s.logins).set(login.email, { userId: user.id, hash: login.password_hash }) }])
        if (!claimed) return yield* new EmailTaken()
        return yield* accounts.createUser(user)
      }),
    createLogin: (login) =>
      Ref.modify(state, (s): [Effect.Effect<void, EmailTaken | LoginExists>, State] => {
        if (loginOf(s, login.user_id) !== undefined) return [new LoginExists(), s]
        if (s.logins.has(login.email)) return [new EmailTaken(), s]
        return [
          Effect.void,
          { ...s, logins: new Map(s.logins).set(login.email, { userId: login.user_id, hash: login.password_hash }) }
        ]
      }).pipe(Effect.flatten),
    findLoginByEmail: (email) =>
      Effect.map(Ref.get(state), (s) =>
        Option.map(Option.fromNullable(s.logins.get(email)), (login) => ({ user_id: login.userId, password_hash: login.hash }))),
    findPasswordHash: (userId) =>
      Effect.map(Ref.get(state), (s) => Option.map(Option.fromNullable(loginOf(s, userId)), ([, login]) => login.hash)),
    setPassword: (userId, hash) =>
      Ref.update(state, (s) => {
        const found = loginOf(s, userId)
        if (found === undefined) return s
        return {
          ...s,
          logins: new Map(s.logins).set(found[0], { userId, hash }),
          sessions: new Map([...s.sessions].map(([h, session]) => [h, session.userId === userId ? { ...session, revoked: true } : session]))
        }
      }),
    createSession: (session) =>
      Ref.update(state, (s) => ({
        ...s,
        sessions: new Map(s.sessions).set(session.token_hash, {
          id: session.id,
          userId: session.user_id,
          lastSeen: session.created_at,
          revoked: false
        })
      })),
    findSession: (tokenHash, idleSince) =>
      Effect.gen(function*() {
        const s = yield* Ref.get(state)
        const session = s.sessions.get(tokenHash)
        if (session === undefined || session.revoked || !DateTime.greaterThan(session.lastSeen, idleSince)) {
          return Option.none()
        }
        const login = loginOf(s, session.userId)
        const user = yield* accounts.findUser(session.userId)
        if (login === undefined || Option.isNone(user)) return Option.none()
        return Option.some({ id: session.id, user: user.value, email: login[0], last_seen_at: session.lastSeen })
      }),
    touchSession: (id, at) =>
      updateSessions((session) => session.id === id && !session.revoked ? { ...session, lastSeen: at } : session),
    revokeSession: (id) => updateSessions((session) => session.id === id ? { ...session, revoked: true } : session),
    revokeAllSessions: (userId) =>
      updateSessions((session) => session.userId === userId ? { ...session, revoked: true } : session),
    trustDevice: (tokenHash, userId) =>
      Ref.update(state, (s) => ({ ...s, devices: new Map(s.devices).set(tokenHash, userId) })),
    isTrustedDevice: (tokenHash, userId) => Effect.map(Ref.get(state), (s) => s.devices.get(tokenHash) === userId),
    failures: (buckets, windowStart) =>
      Effect.map(Ref.get(state), (s) => {
        const start = DateTime.toEpochMillis(windowStart)
        return buckets.map((bucket) => {
          const window = s.failures.get(bucket)
          return window !== undefined && window.start === start ? window.count : 0
        })
      }),
    recordFailure: (buckets, windowStart) =>
      Ref.update(state, (s) => {
        const start = DateTime.toEpochMillis(windowStart)
        const failures = new Map(s.failures)
        for (const bucket of buckets) {
          const window = failures.get(bucket)
          failures.set(bucket, { start, count: window !== undefined && window.start === start ? window.count + 1 : 1 })
        }
        return { ...s, failures }
      })
  })
})
