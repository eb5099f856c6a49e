import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  AlpacaCredentials,
  CreateApiKeyPayload,
  CreateBrokerPayload,
  CreateLoginPayload,
  CreateUserPayload,
  CreateWebhookEndpointPayload
} from "../api/AdminApi.js"
import { ListIntentsParams } from "../api/IntentsApi.js"
import * as Client from "../Client.js"
import { WireErrors } from "../domain/Errors.js"
import { ApiKeyId, BrokerId, DeliveryId, UserId, WebhookEndpointId } from "../domain/Ids.js"
import { CliFailure, decodeFlags, failure, printJson, routerUrl, unreachable } from "./Failure.js"

/** How the usage line shows each flag's value. */
const values: Record<string, string> = {
  tier: "free|pro|enterprise",
  mode: "test|live",
  kind: "mock|alpaca",
  environment: "paper|live",
  scopes: "intents:read,intents:write",
  "expires-at": "ISO",
  "requests-per-minute": "N",
  "intents-per-month": "N",
  limit: "N",
  events: "TYPE,TYPE",
  user: "USER_ID",
  key: "KEY_ID",
  broker: "BROKER_ID",
  endpoint: "ENDPOINT_ID",
  delivery: "DELIVERY_ID",
  "api-key-id": "ID",
  "api-secret-key": "SECRET",
  status: "STATUS",
  symbol: "SYMBOL",
  page: "N",
  "page-size": "N"
}

const text = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName(values[name] ?? name.toUpperCase()),
    Options.withDescription(description)
  )
const optional = (name: string, description: string) =>
  text(name, description).pipe(Options.optional, Options.map(Option.getOrUndefined))
const integer = (value: string | undefined) => (value === undefined ? undefined : Number(value))
const list = (value: string | undefined) => value?.split(",")

/** An id flag, decoded as the API decodes the path: a malformed id names nothing, like an unknown one. */
const id = <A>(value: string, schema: Schema.Schema<A, string>, notFound: { readonly detail: string }) =>
  Effect.mapError(Schema.decode(schema)(value), () => failure(notFound.detail))

const userFlag = text("user", "the user's id")

/** The query of a user's intents, as the API decodes it (the page flags are text, as in a URL). */
const ListUserIntentsQuery = Schema.Struct({
  ...ListIntentsParams.fields,
  mode: Schema.Literal("test", "live").annotations({ message: () => ({ message: "must be one of: test, live", override: true }) })
})

/** The operator API's typed client at ROUTER_URL, with ADMIN_TOKEN. */
const operator = Effect.gen(function*() {
  const baseUrl = yield* routerUrl
  const token = yield* Config.redacted("ADMIN_TOKEN").pipe(
    Effect.mapError(() =>
      failure(
        "ADMIN_TOKEN is not set: the operator token (printed by the first start, kept in DATA_DIR/admin.token)"
      )
    )
  )
  const { admin } = yield* Client.make({ baseUrl, token })
  return { admin, baseUrl }
})

type Operator = Effect.Effect.Success<typeof operator>["admin"]

/** A command's call: its answer printed as JSON; a failure as one line (see `describe`). */
const call = <E>(run: (admin: Operator) => Effect.Effect<unknown, E>) =>
  Effect.gen(function*() {
    const { admin, baseUrl } = yield* operator
    const result = yield* run(admin).pipe(Effect.mapError((error) => describe(error, baseUrl)))
    yield* printJson(result)
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** The client's failures as one line, exit 1: the API's `detail`, or the network's cause. */
export const describe = (error: unknown, baseUrl: string): CliFailure => {
  if (error instanceof CliFailure) return error
  if (HttpClientError.isHttpClientError(error)) {
    return error._tag === "RequestError"
      ? unreachable(baseUrl, error.cause)
      : failure(`${error.request.url}: unexpected answer (HTTP ${error.response.status})`)
  }
  if (typeof error === "object" && error !== null && "_tag" in error) {
    // The flags have been decoded here already: a refusal by the API (even a 400, a rule across
    // fields) is its answer, not a usage error.
    if ("detail" in error && typeof error.detail === "string") return failure(error.detail)
    if (error._tag === "ParseError") return failure(`${baseUrl} answered with something this CLI does not understand`)
  }
  return failure(error instanceof Error ? error.message : String(error))
}

const createUser = Command.make("create-user", {
  name: text("name", "the user's name"),
  tier: text("tier", "free, pro or enterprise"),
  requestsPerMinute: optional("requests-per-minute", "the rate limit (else the tier's)"),
  intentsPerMonth: optional("intents-per-month", "the monthly quota (else the tier's)")
}, (flags) =>
  call((admin) =>
    Effect.flatMap(
      decodeFlags(CreateUserPayload, {
        name: flags.name,
        tier: flags.tier,
        requests_per_minute: integer(flags.requestsPerMinute),
        intents_per_month: integer(flags.intentsPerMonth)
      }),
      (payload) => admin.createUser({ payload })
    )
  )).pipe(Command.withDescription("Create a user"))

const getUser = Command.make("get-user", { user: userFlag }, (flags) =>
  call((admin) =>
    Effect.flatMap(id(flags.user, UserId, WireErrors.UserNotFound), (user_id) => admin.getUser({ path: { user_id } }))
  )).pipe(Command.withDescription("Show a user"))

const listUsers = Command.make("list-users", { limit: optional("limit", "at most this many (1 to 1000)") }, (flags) =>
  call((admin) => admin.listUsers({ urlParams: { limit: integer(flags.limit) } }))).pipe(
    Command.withDescription("List users, newest first")
  )

const listBrokers = Command.make("list-brokers", { user: userFlag }, (flags) =>
  call((admin) =>
    Effect.flatMap(
      id(flags.user, UserId, WireErrors.UserNotFound),
      (user_id) => admin.listUserBrokers({ path: { user_id } })
    )
  )).pipe(Command.withDescription("List a user's broker connections (never their credentials)"))

const listIntents = Command.make("list-intents", {
  user: userFlag,
  mode: text("mode", "test or live"),
  status: optional("status", "only intents in this status"),
  symbol: optional("symbol", "only intents of this symbol"),
  page: optional("page", "the page (from 1)"),
  pageSize: optional("page-size", "intents per page (1 to 100)")
}, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const user_id = yield* id(flags.user, UserId, WireErrors.UserNotFound)
      const query = yield* decodeFlags(ListUserIntentsQuery, {
        mode: flags.mode,
        status: flags.status,
        symbol: flags.symbol,
        page: flags.page,
        page_size: flags.pageSize
      })
      return yield* admin.listUserIntents({ path: { user_id }, urlParams: query })
    })
  )).pipe(Command.withDescription("List a user's intents in one mode, newest first"))

const createLogin = Command.make("create-login", {
  user: userFlag,
  email: text("email", "the login's email"),
  password: text("password", "the login's password")
}, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const user_id = yield* id(flags.user, UserId, WireErrors.UserNotFound)
      const payload = yield* decodeFlags(CreateLoginPayload, { email: flags.email, password: flags.password })
      return yield* admin.createLogin({ path: { user_id }, payload })
    })
  )).pipe(Command.withDescription("Give a user a dashboard login"))

const createKey = Command.make("create-key", {
  user: userFlag,
  name: text("name", "the key's name"),
  mode: text("mode", "test or live"),
  scopes: optional("scopes", "comma-separated: intents:read,intents:write"),
  expiresAt: optional("expires-at", "an ISO 8601 timestamp")
}, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const user_id = yield* id(flags.user, UserId, WireErrors.UserNotFound)
      const payload = yield* decodeFlags(CreateApiKeyPayload, {
        name: flags.name,
        mode: flags.mode,
        scopes: list(flags.scopes),
        expires_at: flags.expiresAt
      })
      return yield* admin.createApiKey({ path: { user_id }, payload })
    })
  )).pipe(Command.withDescription("Create an API key (printed only now)"))

const listKeys = Command.make("list-keys", { user: userFlag }, (flags) =>
  call((admin) =>
    Effect.flatMap(
      id(flags.user, UserId, WireErrors.UserNotFound),
      (user_id) => admin.listApiKeys({ path: { user_id } })
    )
  )).pipe(Command.withDescription("List a user's API keys"))

const revokeKey = Command.make("revoke-key", { key: text("key", "the key's id") }, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const key_id = yield* id(flags.key, ApiKeyId, WireErrors.ApiKeyNotFound)
      yield* admin.revokeApiKey({ path: { key_id } })
      return { revoked: flags.key }
    })
  )).pipe(Command.withDescription("Revoke an API key at once"))

const createBroker = Command.make("create-broker", {
  user: userFlag,
  name: text("name", "the connection's name"),
  kind: text("kind", "mock or alpaca"),
  mode: text("mode", "test or live"),
  apiKeyId: optional("api-key-id", "Alpaca's key id"),
  apiSecretKey: optional("api-secret-key", "Alpaca's secret key"),
  environment: optional("environment", "paper or live (Alpaca's; paper unless given)")
}, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const user_id = yield* id(flags.user, UserId, WireErrors.UserNotFound)
      const payload = yield* decodeFlags(CreateBrokerPayload, {
        name: flags.name,
        kind: flags.kind,
        mode: flags.mode,
        environment: flags.environment,
        credentials: flags.apiKeyId === undefined && flags.apiSecretKey === undefined
          ? undefined
          : { api_key_id: flags.apiKeyId, api_secret_key: flags.apiSecretKey }
      })
      return yield* admin.createBroker({ path: { user_id }, payload })
    })
  )).pipe(Command.withDescription("Create a broker connection"))

const replaceBrokerCredentials = Command.make("replace-broker-credentials", {
  broker: text("broker", "the connection's id"),
  apiKeyId: text("api-key-id", "Alpaca's key id"),
  apiSecretKey: text("api-secret-key", "Alpaca's secret key")
}, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const broker_id = yield* id(flags.broker, BrokerId, WireErrors.BrokerNotFound)
      const payload = yield* decodeFlags(AlpacaCredentials, {
        api_key_id: flags.apiKeyId,
        api_secret_key: flags.apiSecretKey
      })
      return yield* admin.replaceBrokerCredentials({ path: { broker_id }, payload })
    })
  )).pipe(Command.withDescription("Replace an Alpaca connection's credentials (checked with Alpaca first)"))

const createWebhook = Command.make("create-webhook", {
  user: userFlag,
  url: text("url", "where deliveries go (http or https)"),
  mode: text("mode", "test or live"),
  events: optional("events", "comma-separated event types (else all)")
}, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const user_id = yield* id(flags.user, UserId, WireErrors.UserNotFound)
      const payload = yield* decodeFlags(CreateWebhookEndpointPayload, {
        url: flags.url,
        mode: flags.mode,
        events: list(flags.events)
      })
      return yield* admin.createWebhookEndpoint({ path: { user_id }, payload })
    })
  )).pipe(Command.withDescription("Create a webhook endpoint (its secret printed only now)"))

const listWebhooks = Command.make("list-webhooks", { user: userFlag }, (flags) =>
  call((admin) =>
    Effect.flatMap(
      id(flags.user, UserId, WireErrors.UserNotFound),
      (user_id) => admin.listWebhookEndpoints({ path: { user_id } })
    )
  )).pipe(Command.withDescription("List a user's webhook endpoints"))

const endpointFlag = text("endpoint", "the endpoint's id")

const deleteWebhook = Command.make("delete-webhook", { endpoint: endpointFlag }, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const endpoint_id = yield* id(flags.endpoint, WebhookEndpointId, WireErrors.WebhookEndpointNotFound)
      yield* admin.deleteWebhookEndpoint({ path: { endpoint_id } })
      return { deleted: flags.endpoint }
    })
  )).pipe(Command.withDescription("Delete a webhook endpoint and its deliveries"))

const deliveries = Command.make("deliveries", {
  endpoint: endpointFlag,
  limit: optional("limit", "at most this many (1 to 1000)")
}, (flags) =>
  call((admin) =>
    Effect.gen(function*() {
      const endpoint_id = yield* id(flags.endpoint, WebhookEndpointId, WireErrors.WebhookEndpointNotFound)
      return yield* admin.listDeliveries({ path: { endpoint_id }, urlParams: { limit: integer(flags.limit) } })
    })
  )).pipe(Command.withDescription("An endpoint's deliveries, newest first"))

const resend = Command.make("resend", { delivery: text("delivery", "the delivery's id") }, (flags) =>
  call((admin) =>
    Effect.flatMap(
      id(flags.delivery, DeliveryId, WireErrors.DeliveryNotFound),
      (delivery_id) => admin.resendDelivery({ path: { delivery_id } })
    )
  )).pipe(Command.withDescription("Send a delivery again"))

export const subcommands = [
  createUser,
  getUser,
  listUsers,
  createLogin,
  createKey,
  listKeys,
  revokeKey,
  createBroker,
  listBrokers,
  replaceBrokerCredentials,
  createWebhook,
  listWebhooks,
  deleteWebhook,
  deliveries,
  resend,
  listIntents
] as const

/** `tir admin …`: the operator API, at ROUTER_URL with ADMIN_TOKEN. */
export const command = Command.make("admin", {}, (): Effect.Effect<never, ValidationError.ValidationError> =>
  // Without a command: the group's help.
  Effect.fail(ValidationError.helpRequested(command.descriptor))).pipe(
  Command.withDescription("The operator API (ROUTER_URL, default http://127.0.0.1:8080; ADMIN_TOKEN)"),
  Command.withSubcommands(subcommands)
)
