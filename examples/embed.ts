import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { createServer } from "node:http"
import { Client, Database, Server, Services } from "trade-intent-router"

// The whole service inside your own program: embedded PGlite in memory, any free port.
export const TradeIntentRouter = Server.layer({ adminToken: Option.some(Redacted.make("admin-secret")) }).pipe(
  Layer.provideMerge(Services.layer({ credentialsKey: Option.none() })),
  Layer.provideMerge(Database.migrated(Database.pglite(undefined))),
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0 }))
)

// Driven through the typed client derived from the same API definition.
export const program = Effect.gen(function*() {
  const baseUrl = yield* HttpServer.addressFormattedWith(Effect.succeed)
  const operator = yield* Client.make({ baseUrl, token: "admin-secret" })
  const user = yield* operator.admin.createUser({ payload: { name: "Ada", tier: "free" } })
  const { key } = yield* operator.admin.createApiKey({
    path: { user_id: user.id },
    payload: { name: "embedded", mode: "test" }
  })
  const broker = yield* operator.admin.createBroker({
    path: { user_id: user.id },
    payload: { name: "Mock", kind: "mock", mode: "test" }
  })

  const client = yield* Client.make({ baseUrl, token: key })
  const order = {
    intent_id: "embedded-1",
    symbol: "AAPL",
    side: "buy",
    quantity: 5,
    order_type: "market",
    broker_id: broker.id
  } as const
  const intent = yield* client.intents.createIntent({ payload: order })
  // Errors are typed: a second intent with the same intent_id fails with DuplicateIntent.
  const duplicate = yield* Effect.flip(client.intents.createIntent({ payload: order }))
  return { intent, duplicate }
}).pipe(Effect.provide(TradeIntentRouter), Effect.provide(FetchHttpClient.layer))
