/**
 * The stack's floor: the smallest server on the service's own stack, an `@effect/platform`
 * `HttpApi` (HttpApiBuilder on NodeHttpServer) with an `@effect/sql-pg` pool of 10 connections,
 * doing what the bare reference (Reference.ts) does on a table of the same shape:
 *
 * - `POST /intents`: the payload decoded by a Schema, one `INSERT … RETURNING *`, the row decoded
 *   by a Schema, answered 201 with the intent as JSON;
 * - `GET /intents/:id`: one SELECT by primary key, the row decoded by a Schema, 200 (404 if none).
 *
 * No authentication, limiter, logging or spans (the tracer is off, as in the standalone service).
 * What the service does beyond this is its own cost; what this costs beyond the bare server is the
 * stack's. It prints `listening` once it takes requests. Run as a child process by scripts/bench.ts:
 * `node --import tsx scripts/bench/StackFloor.ts <database url> <port>`.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { createServer } from "node:http"
import { createTable, FLOOR_TABLE } from "./ReferenceTable.js"

const [databaseUrl, port] = process.argv.slice(2)
if (databaseUrl === undefined || port === undefined) throw new Error("usage: StackFloor.ts <database url> <port>")

const Side = Schema.Literal("buy", "sell")
const OrderType = Schema.Literal("market", "limit", "stop", "stop_limit")

/** What a creation sends: the reference's columns. */
const CreateIntent = Schema.Struct({
  intent_id: Schema.String,
  symbol: Schema.String,
  side: Side,
  quantity: Schema.Number,
  order_type: OrderType,
  broker_id: Schema.UUID
})

/** An intent as both endpoints answer it. */
const Intent = Schema.Struct({
  id: Schema.UUID,
  intent_id: Schema.String,
  symbol: Schema.String,
  side: Side,
  quantity: Schema.Number,
  order_type: OrderType,
  broker_id: Schema.UUID,
  status: Schema.String,
  created_at: Schema.DateTimeUtc
})

/** An intent as `pg` returns its row: `numeric` as a string, `timestamptz` as a Date. */
const IntentRow = Schema.Struct({
  ...Intent.fields,
  quantity: Schema.NumberFromString,
  created_at: Schema.DateTimeUtcFromDate
})

const Api = HttpApi.make("floor").add(
  HttpApiGroup.make("intents")
    .add(HttpApiEndpoint.post("create", "/intents").setPayload(CreateIntent).addSuccess(Intent, { status: 201 }))
    .add(
      HttpApiEndpoint.get("lookup", "/intents/:id")
        .setPath(Schema.Struct({ id: Schema.UUID }))
        .addSuccess(Intent)
        .addError(HttpApiError.NotFound)
    )
)

const IntentsLive = HttpApiBuilder.group(Api, "intents", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const insert = SqlSchema.single({
      Request: CreateIntent,
      Result: IntentRow,
      execute: (intent) => sql`INSERT INTO ${sql(FLOOR_TABLE)} ${sql.insert(intent)} RETURNING *`
    })
    const find = SqlSchema.findOne({
      Request: Schema.UUID,
      Result: IntentRow,
      execute: (id) => sql`SELECT * FROM ${sql(FLOOR_TABLE)} WHERE id = ${id}`
    })
    return handlers
      .handle("create", ({ payload }) => Effect.orDie(insert(payload)))
      .handle("lookup", ({ path }) =>
        Effect.orDie(find(path.id)).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(new HttpApiError.NotFound()),
            onSome: Effect.succeed
          }))
        ))
  }))

const Table = Layer.effectDiscard(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(createTable(FLOOR_TABLE))))

const Database = Layer.provideMerge(Table, PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 10 }))

const ServerLive = HttpApiBuilder.serve().pipe(
  HttpMiddleware.withTracerDisabledWhen(() => true),
  Layer.provide(HttpApiBuilder.api(Api).pipe(Layer.provide(IntentsLive))),
  Layer.provide(Database),
  Layer.provide(NodeHttpServer.layer(createServer, { port: Number(port), host: "127.0.0.1" }))
)

// Once the Layer is built, the server listens and its handler is in place: only then `listening`.
Effect.gen(function*() {
  yield* Layer.build(ServerLive)
  console.log("listening")
  return yield* Effect.never
}).pipe(
  Effect.scoped,
  Effect.provide(Layer.setTracerEnabled(false)),
  NodeRuntime.runMain
)
