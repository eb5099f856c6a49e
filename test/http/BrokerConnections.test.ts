import { describe, expect, layer } from "@effect/vitest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Http from "node:http"
import type { UserId } from "../../src/domain/Ids.js"
import * as Server from "../../src/http/Server.js"
import type { AlpacaOptions } from "../../src/services/brokers/alpaca/AlpacaConfig.js"
import { CredentialsCipher } from "../../src/services/CredentialsCipher.js"
import * as Services from "../../src/Services.js"
import * as Database from "../../src/sql/Database.js"
import { fakeAlpacaCredentials, signUp as signUpWith } from "../support/Harness.js"
import * as Postgres from "../support/Postgres.js"
import { admin, operator } from "../support/Scenario.js"
import * as TestServer from "../support/TestServer.js"
import { bodyOf, ErrorBody, FakeAlpacas, keysOf, type Reply, WithId } from "../support/TestServer.js"
import { servers } from "./Backends.js"

/** Every log line the logging servers write, at every level, as logfmt. */
const logLines: Array<string> = []

/** The whole service, Alpaca at two fakes, every log line it writes kept in `logLines`. */
const logging = <E, R>(database: Layer.Layer<SqlClient.SqlClient | Database.Notifications, E, R>) =>
  TestServer.withFakeAlpacas((alpaca) =>
    Server.layer(TestServer.options).pipe(
      Layer.provideMerge(
        Services.layer({ ...TestServer.options, alpaca }, { routing: TestServer.routing, webhooks: TestServer.webhooks }).pipe(
          Layer.provideMerge(database)
        )
      ),
      Layer.provideMerge(NodeHttpServer.layerTest),
      Layer.provide(Logger.replace(Logger.defaultLogger, Logger.map(Logger.logfmtLogger, (line) => void logLines.push(line)))),
      Layer.provide(Logger.minimumLogLevel(LogLevel.All))
    )
  )

const loggingServers = [
  ["PGlite", logging(Database.migrated(Database.pglite(undefined)))],
  ["PostgreSQL", logging(Postgres.layerFresh)]
] as const

/** A user with a mock connection only (no Alpaca connection yet). */
const newUser = Effect.flatMap(operator, (client) => signUpWith(client)).pipe(Effect.orDie)

const connect = (userId: UserId, body: Record<string, unknown>) => admin("POST", `/users/${userId}/brokers`, body)

const alpaca = (extra: Record<string, unknown> = {}) => ({
  name: "Alpaca",
  kind: "alpaca",
  mode: "live",
  credentials: fakeAlpacaCredentials,
  ...extra
})

/** The user's stored connections, counted in the database itself. */
const storedConnections = (userId: UserId) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM broker_connections WHERE user_id = ${userId}`).pipe(
      Effect.map(([row]) => row?.n),
      Effect.orDie
    )

const expectError = (reply: Reply, status: number, error_code: string, detail: string) => {
  expect(reply.status).toBe(status)
  expect(bodyOf(ErrorBody, reply)).toMatchObject({ error_code, detail })
}

/** The REST calls a fake received (its stream, if any, aside). */
const restCalls = (fake: FakeAlpacas["Type"]["paper"]) => fake.requests().filter((r) => r.path.startsWith("/v2/"))

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`broker connections on ${name}`, (it) => {
    describe("POST /admin/v1/users/{user_id}/brokers", () => {
      it.effect("alpaca: verified with GET /v2/account in paper by default, then 201 without credentials", () =>
        Effect.gen(function*() {
          const { live, paper } = yield* FakeAlpacas
          paper.reset()
          live.reset()
          const { userId } = yield* newUser
          const reply = yield* connect(userId, alpaca())
          expect(reply.status).toBe(201)
          expect(keysOf(reply)).toEqual(["created_at", "environment", "id", "kind", "mode", "name", "status"])
          expect(reply.body).toMatchObject({
            name: "Alpaca",
            kind: "alpaca",
            mode: "live",
            environment: "paper",
            status: "active"
          })
          expect(reply.text).not.toContain(fakeAlpacaCredentials.api_secret_key)
          const calls = restCalls(paper)
          expect(calls.map((r) => `${r.method} ${r.path}`)).toEqual(["GET /v2/account"])
          expect(calls[0]?.headers).toMatchObject({
            "apca-api-key-id": fakeAlpacaCredentials.api_key_id,
            "apca-api-secret-key": fakeAlpacaCredentials.api_secret_key
          })
          expect(restCalls(live)).toEqual([])
        }))

      it.effect("environment live: verified at the live endpoint, never the paper one", () =>
        Effect.gen(function*() {
          const { live, paper } = yield* FakeAlpacas
          paper.reset()
          live.reset()
          const { userId } = yield* newUser
          const reply = yield* connect(userId, alpaca({ environment: "live" }))
          expect(reply.status).toBe(201)
          expect(reply.body).toMatchObject({ kind: "alpaca", environment: "live", status: "active" })
          expect(restCalls(live).map((r) => `${r.method} ${r.path}`)).toEqual(["GET /v2/account"])
          expect(restCalls(paper)).toEqual([])
        }))

      it.effect("mock: 201 with environment null, and no broker is called", () =>
        Effect.gen(function*() {
          const { live, paper } = yield* FakeAlpacas
          paper.reset()
          live.reset()
          const { userId } = yield* newUser
          const reply = yield* connect(userId, { name: "Mock", kind: "mock", mode: "test" })
          expect(reply.status).toBe(201)
          expect(reply.body).toMatchObject({ kind: "mock", mode: "test", environment: null, status: "active" })
          expect(paper.requests()).toEqual([])
          expect(live.requests()).toEqual([])
        }))

      it.effect("credentials refused with 401 or 403: 422 broker_credentials_invalid, nothing stored", () =>
        Effect.gen(function*() {
          const { paper } = yield* FakeAlpacas
          for (const status of [401, 403] as const) {
            paper.reset()
            paper.setRefusalStatus(status)
            const { userId } = yield* newUser
            const reply = yield* connect(
              userId,
              alpaca({ credentials: { api_key_id: "AKWRONG", api_secret_key: "wrong-secret-value" } })
            )
            expectError(reply, 422, "broker_credentials_invalid", "Alpaca refused the credentials")
            expect(reply.text).not.toContain("wrong-secret-value")
            expect(restCalls(paper).map((r) => `${r.method} ${r.path}`)).toEqual(["GET /v2/account"])
            // The mock connection of the sign-up only.
            expect(yield* storedConnections(userId)).toBe(1)
          }
          paper.reset()
        }))

      it.effect("the typed client reads the refusal as its typed error", () =>
        Effect.gen(function*() {
          const { userId } = yield* newUser
          const { admin: typed } = yield* operator
          const result = yield* typed.createBroker({
            path: { user_id: userId },
            payload: { name: "A", kind: "alpaca", mode: "live", credentials: { api_key_id: "x", api_secret_key: "y" } }
          }).pipe(Effect.either)
          expect(Either.isLeft(result) ? result.left._tag : "created").toBe("BrokerCredentialsInvalid")
        }))

      it.effect("400: base_url, any other credentials field, environment for mock, an unknown environment", () =>
        Effect.gen(function*() {
          const { paper } = yield* FakeAlpacas
          paper.reset()
          const { userId } = yield* newUser
          const withUrl = yield* connect(userId, alpaca({
            credentials: { ...fakeAlpacaCredentials, base_url: "https://attacker.example" }
          }))
          expectError(withUrl, 400, "validation_error", "credentials.base_url is not a known field")
          const notObject = yield* connect(userId, alpaca({ credentials: "AK:secret" }))
          expectError(notObject, 400, "validation_error", "credentials must be {api_key_id, api_secret_key}")
          const empty = yield* connect(userId, alpaca({ credentials: { ...fakeAlpacaCredentials, api_secret_key: "" } }))
          expectError(empty, 400, "validation_error", "credentials.api_secret_key must be a non-empty string")
          const mockEnvironment = yield* connect(userId, { name: "M", kind: "mock", mode: "test", environment: "paper" })
          expectError(mockEnvironment, 400, "validation_error", "environment is not accepted for kind mock")
          const unknownEnvironment = yield* connect(userId, alpaca({ environment: "sandbox" }))
          expectError(unknownEnvironment, 400, "validation_error", "environment must be one of: paper, live")
          expect(paper.requests()).toEqual([])
          expect(yield* storedConnections(userId)).toBe(1)
        }))

      it.effect("the secret is stored encrypted: the row holds ciphertext of exactly {api_key_id, api_secret_key}", () =>
        Effect.gen(function*() {
          const { userId } = yield* newUser
          const created = bodyOf(WithId, yield* connect(userId, alpaca()))
          const sql = yield* SqlClient.SqlClient
          const [row] = yield* sql<{ readonly credentials: string | null }>`
            SELECT credentials FROM broker_connections WHERE id = ${created.id}`.pipe(Effect.orDie)
          const stored = row?.credentials ?? ""
          expect(stored).not.toBe("")
          expect(stored).not.toContain(fakeAlpacaCredentials.api_secret_key)
          expect(stored).not.toContain(fakeAlpacaCredentials.api_key_id)
          const cipher = yield* CredentialsCipher
          const plain = yield* Effect.orDie(cipher.decrypt(stored))
          expect(Schema.decodeUnknownSync(Schema.parseJson(Schema.Unknown))(plain)).toEqual(fakeAlpacaCredentials)
        }))
    })

    describe("PUT /admin/v1/brokers/{broker_id}/credentials", () => {
      const replace = (brokerId: string, body: unknown) => admin("PUT", `/brokers/${brokerId}/credentials`, body)
      const statusOf = (brokerId: string) =>
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ readonly status: string; readonly credentials: string | null }>`
            SELECT status, credentials FROM broker_connections WHERE id = ${brokerId}`).pipe(
            Effect.map(([row]) => row),
            Effect.orDie
          )

      it.effect("an invalid connection with new credentials Alpaca accepts: verified in its environment, 200 and active", () =>
        Effect.gen(function*() {
          const { live, paper } = yield* FakeAlpacas
          paper.reset()
          live.reset()
          const { userId } = yield* newUser
          const created = bodyOf(WithId, yield* connect(userId, alpaca({ environment: "live" })))
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE broker_connections SET status = 'invalid' WHERE id = ${created.id}`.pipe(Effect.orDie)
          const before = yield* statusOf(created.id)
          live.addCredentials("PKROTATED", "rotated-secret-value")
          const reply = yield* replace(created.id, { api_key_id: "PKROTATED", api_secret_key: "rotated-secret-value" })
          expect(reply.status).toBe(200)
          expect(reply.body).toMatchObject({ id: created.id, environment: "live", status: "active" })
          expect(reply.text).not.toContain("rotated-secret-value")
          expect(restCalls(live).at(-1)?.headers).toMatchObject({ "apca-api-key-id": "PKROTATED" })
          expect(restCalls(paper)).toEqual([])
          const after = yield* statusOf(created.id)
          expect(after?.status).toBe("active")
          expect(after?.credentials).not.toBe(before?.credentials)
        }))

      it.effect("credentials Alpaca refuses: 422 and nothing changes; unknown or mock connection: 404; a bad body: 400", () =>
        Effect.gen(function*() {
          const { paper } = yield* FakeAlpacas
          paper.reset()
          const { brokerId: mockId, userId } = yield* newUser
          const created = bodyOf(WithId, yield* connect(userId, alpaca()))
          const before = yield* statusOf(created.id)
          const refusedReply = yield* replace(created.id, { api_key_id: "AKWRONG", api_secret_key: "wrong-secret-value" })
          expectError(refusedReply, 422, "broker_credentials_invalid", "Alpaca refused the credentials")
          expect(yield* statusOf(created.id)).toEqual(before)
          const body = { api_key_id: "AK", api_secret_key: "secret" }
          expectError(yield* replace(crypto.randomUUID(), body), 404, "broker_not_found", "Broker connection not found")
          expectError(yield* replace("not-a-uuid", body), 404, "broker_not_found", "Broker connection not found")
          expectError(yield* replace(mockId, body), 404, "broker_not_found", "Broker connection not found")
          expectError(
            yield* replace(created.id, { api_key_id: "AK" }),
            400,
            "validation_error",
            "api_secret_key is required"
          )
          expect(yield* statusOf(created.id)).toEqual(before)
        }))
    })
  })

}

// Servers of their own, their logs kept: their fake Alpacas stop answering for good.
for (const [name, server] of loggingServers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`broker connections with Alpaca gone on ${name}`, (it) => {
    const secret = "distinctive-secret-7f3a9c"

    it.effect("a secret Alpaca refuses is in no log line", () =>
      Effect.gen(function*() {
        const { userId } = yield* newUser
        const reply = yield* connect(userId, alpaca({ credentials: { api_key_id: "AKREFUSED", api_secret_key: secret } }))
        expect(reply.status).toBe(422)
        expect(logLines.length).toBeGreaterThan(0)
        expect(logLines.filter((line) => line.includes(secret))).toEqual([])
      }))

    it.effect("Alpaca unreachable: 503 broker_unavailable, nothing stored, the secret in no log line", () =>
      Effect.gen(function*() {
        const { live, paper } = yield* FakeAlpacas
        const { userId } = yield* newUser
        yield* Effect.promise(() => Promise.all([paper.stop(), live.stop()]))
        const logged = logLines.length
        for (const environment of ["paper", "live"]) {
          const reply = yield* connect(userId, alpaca({ environment, credentials: { api_key_id: "AKGONE", api_secret_key: secret } }))
          expectError(reply, 503, "broker_unavailable", "Alpaca is unavailable; try again later")
          expect(reply.text).not.toContain(secret)
        }
        expect(yield* storedConnections(userId)).toBe(1)
        const lines = logLines.slice(logged)
        expect(lines.some((line) => line.includes("Alpaca could not verify new credentials"))).toBe(true)
        expect(lines.filter((line) => line.includes(secret))).toEqual([])
      }))
  })
}

/** A stand-in for Alpaca answering every request with `answer` (`hang`: never), closed with the scope. */
const standIn = (answer: number | "hang") =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Http.Server; readonly url: string }>((resume) => {
      const server = Http.createServer((request, response) => {
        request.resume()
        if (answer !== "hang") response.writeHead(answer, { "content-type": "application/json" }).end(`{"message":"down"}`)
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = address !== null && typeof address === "object" ? address.port : 0
        resume(Effect.succeed({ server, url: `http://127.0.0.1:${port}` }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/** The service with Alpaca's paper environment answering 500 and its live one never answering (300 ms allowed). */
const failingAlpaca = <E, R>(database: Layer.Layer<SqlClient.SqlClient | Database.Notifications, E, R>) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const failing = yield* standIn(500)
      const hanging = yield* standIn("hang")
      const alpaca: AlpacaOptions = {
        endpoints: {
          paper: { api: failing.url, stream: failing.url.replace(/^http/, "ws") },
          live: { api: hanging.url, stream: hanging.url.replace(/^http/, "ws") }
        },
        timeout: "300 millis"
      }
      return TestServer.serve(
        Services.layer({ ...TestServer.options, alpaca }, { routing: TestServer.routing, webhooks: TestServer.webhooks })
          .pipe(Layer.provideMerge(database))
      )
    })
  )

const failingServers = [
  ["PGlite", failingAlpaca(Database.migrated(Database.pglite(undefined)))],
  ["PostgreSQL", failingAlpaca(Postgres.layerFresh)]
] as const

for (const [name, server] of failingServers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`broker connections with Alpaca failing on ${name}`, (it) => {
    it.effect("Alpaca answering 5xx, or not within the timeout: 503 broker_unavailable, nothing stored", () =>
      Effect.gen(function*() {
        const { userId } = yield* newUser
        for (const environment of ["paper", "live"]) {
          const reply = yield* connect(userId, alpaca({ environment }))
          expectError(reply, 503, "broker_unavailable", "Alpaca is unavailable; try again later")
        }
        expect(yield* storedConnections(userId)).toBe(1)
      }))
  })
}
