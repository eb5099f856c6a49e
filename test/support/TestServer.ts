import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Client from "../../src/Client.js"
import * as Server from "../../src/http/Server.js"
import type { AlpacaOptions } from "../../src/services/brokers/alpaca/AlpacaConfig.js"
import * as FakeAlpaca from "../../src/services/brokers/alpaca/FakeAlpaca.js"
import * as Services from "../../src/Services.js"
import type * as Database from "../../src/sql/Database.js"
import { fakeStreamUrl } from "./Harness.js"

export const ADMIN_TOKEN = "test-admin-token"
export const CREDENTIALS_KEY = "0123456789abcdef".repeat(4)

export const options: Services.ServiceOptions & Server.Options = {
  adminToken: Option.some(Redacted.make(ADMIN_TOKEN)),
  credentialsKey: Option.some(Redacted.make(CREDENTIALS_KEY))
}

/** The HTTP server over the given services, on a test HTTP server; logs only warnings and errors. */
export const serve = <A, E, R>(services: Layer.Layer<A, E, R>, http: Server.Options = options) =>
  Server.layer(http).pipe(
    Layer.provideMerge(services),
    Layer.provideMerge(NodeHttpServer.layerTest),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )

/**
 * Workers in tests never poll: only a commit's notification or a job falling due wakes them, so a
 * lost notification fails the tests instead of hiding behind a poll.
 */
const pollInterval = Duration.hours(1)

/** Routing retries quickly in tests: an unreachable broker fails an intent in about 30 ms. */
export const routing = { retryDelays: [Duration.millis(10), Duration.millis(10), Duration.millis(10)], pollInterval }

/** Webhooks retry quickly in tests: three retries 50 ms apart, a receiver has 2 s to answer. */
export const webhooks = {
  retryDelays: [Duration.millis(50), Duration.millis(50), Duration.millis(50)],
  timeout: Duration.seconds(2),
  pollInterval
}

/** The fake Alpacas a test server reaches: one as the paper environment, another as the live one. */
export class FakeAlpacas extends Context.Tag("test/FakeAlpacas")<FakeAlpacas, {
  readonly paper: FakeAlpaca.FakeAlpaca
  readonly live: FakeAlpaca.FakeAlpaca
}>() {
  /** Two fakes, started with the Layer and stopped with it. */
  static readonly layer = Layer.scoped(
    this,
    Effect.all({ paper: FakeAlpaca.make(), live: FakeAlpaca.make() })
  )
}

/** Alpaca's endpoints at the fakes: each environment's REST API and stream at its own fake. */
export const alpacaAt = (fakes: FakeAlpacas["Type"]): AlpacaOptions => ({
  endpoints: {
    paper: { api: fakes.paper.url, stream: fakeStreamUrl(fakes.paper) },
    live: { api: fakes.live.url, stream: fakeStreamUrl(fakes.live) }
  }
})

/** A server built with Alpaca at two fresh fakes, which it provides as `FakeAlpacas` too. */
export const withFakeAlpacas = <A, E, R>(server: (alpaca: AlpacaOptions) => Layer.Layer<A, E, R>) =>
  Layer.unwrapEffect(Effect.map(FakeAlpacas, (fakes) => server(alpacaAt(fakes)))).pipe(
    Layer.provideMerge(FakeAlpacas.layer)
  )

/**
 * The whole service with its workers, as `main.ts` composes it, on the given (migrated) database,
 * with Alpaca at two fakes (`FakeAlpacas`, in context).
 */
export const layer = <E, R>(
  database: Layer.Layer<SqlClient.SqlClient | Database.Notifications, E, R>,
  overrides: Partial<Services.ServiceOptions> = {}
) =>
  withFakeAlpacas((alpaca) =>
    serve(Services.layer({ ...options, alpaca, ...overrides }, { routing, webhooks }).pipe(Layer.provideMerge(database)))
  )

/** {@link layer} with HTTP options of its own (sign-up closed, a public URL, …). */
export const layerWith = <E, R>(
  database: Layer.Layer<SqlClient.SqlClient | Database.Notifications, E, R>,
  http: Partial<Server.Options>
) =>
  withFakeAlpacas((alpaca) =>
    serve(
      Services.layer({ ...options, alpaca }, { routing, webhooks }).pipe(Layer.provideMerge(database)),
      { ...options, ...http }
    )
  )

/** The whole service on in-memory ports, with Alpaca at two fakes: for fast tests of everything above the repository. */
export const layerInMemory = withFakeAlpacas((alpaca) =>
  serve(Services.withPorts(Services.portsInMemory({ ...options, alpaca })))
)

/**
 * The typed client derived from the API definition, on the test server, authenticated with `token`
 * (an API key, or `ADMIN_TOKEN` for the operator API): typed bodies and typed errors.
 */
export const client = (token: string) => Client.make({ baseUrl: "", token })

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: unknown
  readonly text: string
}

/** A body's JSON, or undefined when it is empty or not JSON. */
export const jsonOf = (text: string): unknown => {
  try {
    return text === "" ? undefined : JSON.parse(text)
  } catch {
    return undefined
  }
}

/** A raw request through the real server: the exact status, headers and body a client sees. */
export const send = (
  method: "GET" | "POST" | "DELETE" | "PUT",
  path: string,
  options: {
    readonly key?: string | undefined
    readonly json?: unknown
    readonly body?: string | undefined
    readonly headers?: Record<string, string>
  } = {}
) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    let request = HttpClientRequest.make(method)(path).pipe(
      HttpClientRequest.setHeaders(options.headers ?? {})
    )
    if (options.key !== undefined) request = HttpClientRequest.bearerToken(request, options.key)
    if (options.json !== undefined) request = HttpClientRequest.bodyUnsafeJson(request, options.json)
    if (options.body !== undefined) {
      request = HttpClientRequest.bodyText(request, options.body, options.headers?.["content-type"] ?? "application/json")
    }
    const response = yield* client.execute(request)
    const text = yield* response.text
    return { status: response.status, headers: response.headers, body: jsonOf(text), text } satisfies Reply
  }).pipe(Effect.scoped, Effect.orDie)

/** A raw reply's body read with `schema` (decoded, not cast): for the fields a wire test goes on with. */
export const bodyOf = <A, I>(schema: Schema.Schema<A, I>, reply: { readonly body: unknown }): A => Schema.decodeUnknownSync(schema)(reply.body)

/** A body's `id`. */
export const WithId = Schema.Struct({ id: Schema.String })

/** The fields every error body has (more may follow). */
export const ErrorBody = Schema.Struct({ error_code: Schema.String, detail: Schema.String, request_id: Schema.String })

/** A 429's body. */
export const RetryBody = Schema.Struct({ ...ErrorBody.fields, retry_after: Schema.Number })

/** The keys of a JSON object body, sorted. */
export const keysOf = (reply: { readonly body: unknown }) =>
  Object.keys(bodyOf(Schema.Record({ key: Schema.String, value: Schema.Unknown }), reply)).sort()
