import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { EVENT_RETENTION, IntentEvent } from "../../src/domain/Event.js"
import { type Owner, WebhookEndpointId } from "../../src/domain/Ids.js"
import { allEventTypes } from "../../src/domain/Webhook.js"
import * as Services from "../../src/Services.js"
import { EventRepository } from "../../src/services/events/EventRepository.js"
import { IntentRepository } from "../../src/services/intents/IntentRepository.js"
import { WebhookRepository } from "../../src/services/webhooks/WebhookRepository.js"
import * as EventRetention from "../../src/workers/EventRetention.js"
import { eventId, newIntent, seedUser, uuid } from "../support/Fixtures.js"
import * as TestServer from "../support/TestServer.js"
import { databases } from "../support/Databases.js"

for (const [name, database] of databases) {
  const ports = Services.ports(TestServer.options).pipe(Layer.provideMerge(database))

  layer(ports, { timeout: 60_000, excludeTestServices: true })(`event retention on ${name}`, (it) => {
    describe("30 days", () => {
      it.effect("events older than 30 days are neither listed nor kept (their deliveries with them); newer ones stay", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const events = yield* EventRepository
          const webhooks = yield* WebhookRepository
          const sql = yield* SqlClient.SqlClient
          const { testBroker, user } = yield* seedUser
          const owner: Owner = { userId: user.id, mode: "test" }
          yield* webhooks.createEndpoint({
            id: WebhookEndpointId.make(uuid()),
            user_id: user.id,
            url: "https://example.com/hooks",
            mode: "test",
            events: allEventTypes,
            secret: "s".repeat(64),
            created_at: yield* DateTime.now
          })
          const old = newIntent(owner, testBroker.id)
          const recent = newIntent(owner, testBroker.id)
          for (const input of [old, recent]) {
            yield* intents.create(input, { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
          }
          yield* sql`UPDATE events SET created_at = now() - interval '31 days' WHERE intent_id = ${old.id}`.pipe(Effect.orDie)
          const now = yield* DateTime.now
          const since = DateTime.subtractDuration(now, EVENT_RETENTION)
          // A transaction in flight anywhere on the server (another test's) holds events back meanwhile.
          let listed = yield* events.page(owner, { after: { xid: "0", seq: "0" }, limit: 10, since })
          for (let i = 0; i < 1250 && listed.items.length === 0; i++) {
            yield* Effect.sleep("20 millis")
            listed = yield* events.page(owner, { after: { xid: "0", seq: "0" }, limit: 10, since })
          }
          expect(listed.items.map((item) => Schema.decodeUnknownSync(Schema.parseJson(IntentEvent))(item.json).data.id))
            .toEqual([recent.id])

          expect(yield* events.purge(since, 1000)).toBe(1)
          expect(yield* events.purge(since, 1000)).toBe(0)
          const left = yield* sql<{ readonly intent_id: string }>`
            SELECT e.intent_id FROM events e JOIN webhook_deliveries d ON d.event_id = e.id
            WHERE e.user_id = ${user.id}`.pipe(Effect.orDie)
          expect(left.map((row) => row.intent_id)).toEqual([recent.id])
          const deliveries = yield* sql<{ readonly n: number }>`
            SELECT count(*)::int AS n FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
            WHERE w.user_id = ${user.id}`.pipe(Effect.orDie)
          expect(deliveries[0]?.n).toBe(1)
        }))

      it.scoped("the sweep runs on its own at start", () =>
        Effect.gen(function*() {
          const intents = yield* IntentRepository
          const sql = yield* SqlClient.SqlClient
          const { testBroker, user } = yield* seedUser
          const input = newIntent({ userId: user.id, mode: "test" }, testBroker.id)
          yield* intents.create(input, { now: yield* DateTime.now, quota: undefined, eventId: eventId() })
          yield* sql`UPDATE events SET created_at = now() - interval '40 days' WHERE intent_id = ${input.id}`.pipe(Effect.orDie)
          yield* Layer.build(EventRetention.layer())
          const remaining = () =>
            Effect.map(
              sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM events WHERE intent_id = ${input.id}`,
              (rows) => rows[0]?.n
            ).pipe(Effect.orDie)
          let left = yield* remaining()
          for (let i = 0; i < 100 && left !== 0; i++) {
            yield* Effect.sleep("20 millis")
            left = yield* remaining()
          }
          expect(left).toBe(0)
        }))
    })
  })
}
