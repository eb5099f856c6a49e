import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { ApiKey, BrokerConnection, User } from "../../domain/Account.js"
import type { AccountRepository, NewApiKey } from "./AccountRepository.js"

interface State {
  readonly users: ReadonlyMap<string, User>
  readonly keys: ReadonlyMap<string, { readonly key: ApiKey; readonly hash: string }>
  readonly brokers: ReadonlyMap<string, BrokerConnection>
  /** Encrypted credentials, by connection id. */
  readonly credentials: ReadonlyMap<string, string | null>
  /** Disconnected connections, by id. */
  readonly disconnected: ReadonlySet<string>
}

const withEntry = <V>(map: ReadonlyMap<string, V>, key: string, value: V): ReadonlyMap<string, V> =>
  new Map(map).set(key, value)

/** For fast unit tests of the logic above the repository; the contract suite holds it to the SQL one. */
export const make = Effect.gen(function*() {
  const state = yield* Ref.make<State>({ users: new Map(), keys: new Map(), brokers: new Map(), credentials: new Map(), disconnected: new Set() })

  const updateKey = (id: string, f: (key: ApiKey) => ApiKey | undefined) =>
    Ref.modify(state, (s): [boolean, State] => {
      const entry = s.keys.get(id)
      const next = entry === undefined ? undefined : f(entry.key)
      return entry === undefined || next === undefined
        ? [false, s]
        : [true, { ...s, keys: withEntry(s.keys, id, { ...entry, key: next }) }]
    })

  const toKey = (key: NewApiKey) =>
    new ApiKey({
      id: key.id,
      user_id: key.user_id,
      name: key.name,
      mode: key.mode,
      scopes: key.scopes,
      key_hint: key.key_hint,
      created_at: key.created_at,
      expires_at: key.expires_at,
      last_used_at: null,
      revoked_at: null
    })

  return identity<Context.Tag.Service<typeof AccountRepository>>({
    createUser: (input) =>
      Ref.modify(state, (s) => {
        const user = new User(input)
        return [user, { ...s, users: withEntry(s.users, user.id, user) }]
      }),
    findUser: (id) => Effect.map(Ref.get(state), (s) => Option.fromNullable(s.users.get(id))),
    createApiKey: (input) =>
      Ref.modify(state, (s) => {
        const key = toKey(input)
        return [key, { ...s, keys: withEntry(s.keys, key.id, { key, hash: input.key_hash }) }]
      }),
    listApiKeys: (userId) =>
      Effect.map(Ref.get(state), (s) => [...s.keys.values()].map((e) => e.key).filter((k) => k.user_id === userId)),
    revokeApiKey: (id, at) =>
      updateKey(id, (key) => key.revoked_at === null ? new ApiKey({ ...key, revoked_at: at }) : undefined),
    findApiKeyByHash: (hash) =>
      Effect.map(Ref.get(state), (s) =>
        Option.fromNullable([...s.keys.values()].find((e) => e.hash === hash)).pipe(
          Option.flatMap(({ key }) =>
            Option.map(Option.fromNullable(s.users.get(key.user_id)), (user) => ({ key, user }))
          )
        )),
    listActiveApiKeys: () =>
      Effect.map(Ref.get(state), (s) =>
        [...s.keys.values()].filter((e) => e.key.revoked_at === null).map((e) => ({
          id: e.key.id,
          key_hash: e.hash,
          expires_at: e.key.expires_at
        }))),
    touchApiKey: (id, at) =>
      updateKey(id, (key) =>
        key.last_used_at === null || DateTime.lessThan(key.last_used_at, at)
          ? new ApiKey({ ...key, last_used_at: at })
          : undefined).pipe(Effect.asVoid),
    createBroker: ({ credentials, ...input }) =>
      Ref.modify(state, (s) => {
        const broker = new BrokerConnection({ ...input, status: "active" })
        return [broker, {
          ...s,
          brokers: withEntry(s.brokers, broker.id, broker),
          credentials: withEntry(s.credentials, broker.id, credentials)
        }]
      }),
    findBroker: (userId, id) =>
      Effect.map(Ref.get(state), (s) =>
        Option.fromNullable(s.brokers.get(id)).pipe(
          Option.filter((b) => b.user_id === userId && !s.disconnected.has(b.id))
        )),
    listBrokers: (owner) =>
      Effect.map(Ref.get(state), (s) =>
        [...s.brokers.values()].filter((b) =>
          b.user_id === owner.userId && b.mode === owner.mode && !s.disconnected.has(b.id)
        )),
    disconnectBroker: (userId, id) =>
      Ref.modify(state, (s): [boolean, State] => {
        const broker = s.brokers.get(id)
        return broker === undefined || broker.user_id !== userId || s.disconnected.has(id)
          ? [false, s]
          : [true, { ...s, disconnected: new Set(s.disconnected).add(id) }]
      }),
    findApiKey: (userId, id) =>
      Effect.map(Ref.get(state), (s) =>
        Option.fromNullable(s.keys.get(id)).pipe(
          Option.map((e) => e.key),
          Option.filter((key) => key.user_id === userId)
        )),
    listUsers: (limit) =>
      Effect.map(Ref.get(state), (s) =>
        [...s.users.values()]
          .sort((a, b) => DateTime.toEpochMillis(b.created_at) - DateTime.toEpochMillis(a.created_at) || (a.id < b.id ? 1 : -1))
          .slice(0, limit)),
    renameUser: (id, name) =>
      Ref.modify(state, (s): [Option.Option<User>, State] => {
        const user = s.users.get(id)
        if (user === undefined) return [Option.none(), s]
        const renamed = new User({ ...user, name })
        return [Option.some(renamed), { ...s, users: withEntry(s.users, id, renamed) }]
      }),
    findBrokerSecrets: (id) =>
      Effect.map(Ref.get(state), (s) =>
        Option.map(Option.fromNullable(s.brokers.get(id)), (broker) => ({
          id: broker.id,
          kind: broker.kind,
          environment: broker.environment,
          status: broker.status,
          credentials: s.credentials.get(id) ?? null
        }))),
    markBrokerInvalid: (id, refused) =>
      Ref.update(state, (s) => {
        const broker = s.brokers.get(id)
        return broker === undefined || s.credentials.get(id) !== refused
          ? s
          : { ...s, brokers: withEntry(s.brokers, id, new BrokerConnection({ ...broker, status: "invalid" })) }
      }),
    replaceBrokerCredentials: (id, credentials) =>
      Ref.modify(state, (s) => {
        const broker = s.brokers.get(id)
        if (broker === undefined || (s.credentials.get(id) ?? null) === null) return [Option.none(), s]
        const active = new BrokerConnection({ ...broker, status: "active" })
        return [Option.some(active), {
          ...s,
          brokers: withEntry(s.brokers, id, active),
          credentials: withEntry(s.credentials, id, credentials)
        }]
      }),
    // In memory there are no intents to follow: a disconnected connection is still listed.
    listActiveBrokers: (kind) =>
      Effect.map(Ref.get(state), (s) =>
        [...s.brokers.values()].filter((b) => b.kind === kind && b.status === "active").map((b) => b.id).sort())
  })
})
