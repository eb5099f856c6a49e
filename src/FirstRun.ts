import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { Operators } from "./services/accounts/Operators.js"
import { IdGenerator } from "./services/IdGenerator.js"
import { Logins } from "./services/logins/Logins.js"
import { DatabaseInfo } from "./sql/Database.js"

const DEMO_EMAIL = "demo@example.com"

/**
 * The first start on an empty embedded database creates a demo user with a test key, a mock
 * broker connection and a dashboard login, and prints what a newcomer needs to send a first
 * intent and sign in (and the operator token kept in `DATA_DIR`, when there is one). Never on
 * PostgreSQL, never once a user exists. This is the one moment the key and the password are shown.
 */
export const layer = (
  baseUrl: string,
  adminToken: Option.Option<{ readonly token: Redacted.Redacted<string>; readonly path: string }> = Option.none()
) =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const database = yield* DatabaseInfo
      if (database.kind !== "pglite") return
      const sql = yield* SqlClient.SqlClient
      const seeded = SqlSchema.single({
        Request: Schema.Void,
        Result: Schema.Struct({ seeded: Schema.Boolean }),
        execute: () => sql`SELECT EXISTS (SELECT 1 FROM users) AS seeded`
      })
      if ((yield* seeded()).seeded) return
      const operators = yield* Operators
      const user = yield* operators.createUser({ name: "Demo user", tier: "free" })
      const { key } = yield* operators.createApiKey(user.id, { name: "Demo test key", mode: "test" })
      const broker = yield* operators.createBroker(user.id, { name: "Mock broker", kind: "mock", mode: "test" })
      const password = yield* Effect.flatMap(IdGenerator, (ids) => ids.base62(16))
      const login = yield* (yield* Logins).createLogin(user.id, { email: DEMO_EMAIL, password })
      const body = JSON.stringify({
        intent_id: "demo-1",
        symbol: "AAPL",
        side: "buy",
        quantity: 10,
        order_type: "market",
        broker_id: broker.id
      })
      yield* Console.log([
        "",
        "First run: created a demo user with a test API key and a mock broker connection.",
        `  API key (shown only now): ${key}`,
        `  broker_id:                ${broker.id}`,
        `  user id:                  ${user.id}`,
        "",
        `Dashboard: ${baseUrl}/dashboard/`,
        `  email:                    ${login.email}`,
        `  password (shown only now): ${password}`,
        "",
        "Create a Trade Intent:",
        `  curl -s -X POST ${baseUrl}/api/v1/intents \\`,
        `    -H 'Authorization: Bearer ${key}' \\`,
        "    -H 'Content-Type: application/json' \\",
        `    -d '${body}'`,
        "",
        ...Option.match(adminToken, {
          onNone: () => [],
          onSome: ({ path, token }) => [
            `Operator API token (kept in ${path}): ${Redacted.value(token)}`,
            `  export ADMIN_TOKEN=${Redacted.value(token)}   # then: npm run admin -- list-keys --user ${user.id}`,
            ""
          ]
        }),
        `API reference: ${baseUrl}/docs`,
        ""
      ].join("\n"))
    }).pipe(Effect.orDie)
  )
