import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import { ApiKeyId, BrokerId, IntentId, type Mode, UserId } from "../../src/domain/Ids.js"
import type { NewIntent, OrderSpec } from "../../src/domain/Intent.js"
import { AccountRepository } from "../../src/services/accounts/AccountRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"

export const uuid = () => Crypto.randomUUID()

export const eventId = () => `evt_${uuid().replaceAll("-", "")}`

/** A new user with a test and a live broker connection, through the repository under test. */
export const seedUser = Effect.gen(function*() {
  const accounts = yield* AccountRepository
  const now = yield* DateTime.now
  const user = yield* accounts.createUser({
    id: UserId.make(uuid()),
    name: "Ada",
    tier: "free",
    requests_per_minute: 60,
    intents_per_month: 100,
    created_at: now
  })
  const broker = (mode: Mode) =>
    accounts.createBroker({
      id: BrokerId.make(uuid()),
      user_id: user.id,
      name: `${mode} broker`,
      kind: mode === "test" ? "mock" : "alpaca",
      mode,
      environment: mode === "live" ? "paper" : null,
      credentials: mode === "live" ? "v1:ciphertext" : null,
      created_at: now
    })
  return { user, testBroker: yield* broker("test"), liveBroker: yield* broker("live") }
})

export const newApiKey = (userId: UserId, mode: Mode = "test") =>
  Effect.map(DateTime.now, (now) => ({
    id: ApiKeyId.make(uuid()),
    user_id: userId,
    name: "key",
    mode,
    scopes: ["intents:read", "intents:write"] as const,
    key_hash: Crypto.randomBytes(32).toString("hex"),
    key_hint: "sk_test_…abcd",
    created_at: now,
    expires_at: null
  }))

/** A market buy of 10 AAPL, for the day. */
export const marketSpec: OrderSpec = {
  symbol: "AAPL",
  side: "buy",
  quantity: 10,
  order_type: "market",
  limit_price: null,
  stop_price: null,
  time_in_force: "day",
  extended_hours: false
}

export const newIntent = (
  owner: { readonly userId: UserId; readonly mode: Mode },
  brokerId: BrokerId,
  overrides: Partial<NewIntent> = {}
): NewIntent => ({
  id: IntentId.make(uuid()),
  user_id: owner.userId,
  mode: owner.mode,
  intent_id: `ext-${uuid()}`,
  broker_id: brokerId,
  ...marketSpec,
  ...overrides
})

/** A monthly quota of `limit` live intents, for the period starting 1970-01-01, a minute from its end. */
export const quota = (limit: number) => ({ limit, period: "1970-01-01", retryAfter: 60 })

/**
 * A new user creating live intents against a quota of `limit`, through the repository under test:
 * `create` by intent_id, and `written`, how many of their live intents exist.
 */
export const liveCreator = (limit: number) =>
  Effect.gen(function*() {
    const intents = yield* IntentRepository
    const seeded = yield* seedUser
    const owner = { userId: seeded.user.id, mode: "live" as const }
    const now = yield* DateTime.now
    const create = (intentId: string) =>
      intents.create(newIntent(owner, seeded.liveBroker.id, { intent_id: intentId }), { now, quota: quota(limit), eventId: eventId() })
    const written = Effect.map(intents.list(owner, { page: 1, pageSize: 100 }), (page) => page.total)
    return { ...seeded, owner, create, written }
  })
