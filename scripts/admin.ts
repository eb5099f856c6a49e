/**
 * The operator CLI: `npm run admin -- <command> [--flags]`, on the typed client derived from the
 * API definition. ROUTER_URL (default http://127.0.0.1:8080) and ADMIN_TOKEN say where and who.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { parseArgs } from "node:util"
import {
  AlpacaCredentials,
  CreateApiKeyPayload,
  CreateBrokerPayload,
  CreateLoginPayload,
  CreateUserPayload,
  CreateWebhookEndpointPayload
} from "../src/api/AdminApi.js"
import * as Client from "../src/Client.js"
import { WireErrors } from "../src/domain/Errors.js"
import { ApiKeyId, BrokerId, DeliveryId, UserId, WebhookEndpointId } from "../src/domain/Ids.js"

const usage = `Usage: npm run admin -- <command> [flags]

  create-user    --name NAME --tier free|pro|enterprise [--requests-per-minute N] [--intents-per-month N]
  get-user       --user USER_ID
  create-login   --user USER_ID --email EMAIL --password PASSWORD
  create-key     --user USER_ID --name NAME --mode test|live [--scopes intents:read,intents:write] [--expires-at ISO]
  list-keys      --user USER_ID
  revoke-key     --key KEY_ID
  create-broker  --user USER_ID --name NAME --kind mock|alpaca --mode test|live
                 [--api-key-id ID --api-secret-key SECRET [--environment paper|live]]
  replace-broker-credentials --broker BROKER_ID --api-key-id ID --api-secret-key SECRET
  create-webhook --user USER_ID --url URL --mode test|live [--events intent.created,intent.filled,...]
  list-webhooks  --user USER_ID
  delete-webhook --endpoint ENDPOINT_ID
  deliveries     --endpoint ENDPOINT_ID [--limit N]
  resend         --delivery DELIVERY_ID

Environment: ROUTER_URL (default http://127.0.0.1:8080), ADMIN_TOKEN (required).`

const parse = () => parseArgs({
  allowPositionals: true,
  options: {
    name: { type: "string" },
    tier: { type: "string" },
    "requests-per-minute": { type: "string" },
    "intents-per-month": { type: "string" },
    user: { type: "string" },
    key: { type: "string" },
    mode: { type: "string" },
    scopes: { type: "string" },
    "expires-at": { type: "string" },
    kind: { type: "string" },
    "api-key-id": { type: "string" },
    "api-secret-key": { type: "string" },
    environment: { type: "string" },
    url: { type: "string" },
    events: { type: "string" },
    endpoint: { type: "string" },
    broker: { type: "string" },
    delivery: { type: "string" },
    limit: { type: "string" },
    email: { type: "string" },
    password: { type: "string" },
    help: { type: "boolean", short: "h" }
  }
})

const parsed = Effect.try({ try: parse, catch: (error) => new Error(`${String(error)}\n\n${usage}`) })

const integer = (value: string | undefined) => (value === undefined ? undefined : Number(value))
type Flags = ReturnType<typeof parse>["values"]

/** An id flag, decoded as the API decodes the path: a malformed id names nothing, like an unknown one. */
const idFlag = <A>(
  flag: "user" | "key" | "broker" | "endpoint" | "delivery",
  id: Schema.Schema<A, string>,
  notFound: { readonly detail: string }
) =>
(values: Flags) =>
  Effect.fromNullable(values[flag]).pipe(
    Effect.orElseFail(() => new Error(`--${flag} is required\n\n${usage}`)),
    Effect.flatMap((value) => Effect.mapError(Schema.decode(id)(value), () => new Error(notFound.detail)))
  )
const userId = idFlag("user", UserId, WireErrors.UserNotFound)
const keyId = idFlag("key", ApiKeyId, WireErrors.ApiKeyNotFound)
const brokerId = idFlag("broker", BrokerId, WireErrors.BrokerNotFound)
const endpointId = idFlag("endpoint", WebhookEndpointId, WireErrors.WebhookEndpointNotFound)
const deliveryId = idFlag("delivery", DeliveryId, WireErrors.DeliveryNotFound)

/** Flags become the same payloads the API decodes, so the CLI refuses what the API would. */
const decode = <A, I>(schema: Schema.Schema<A, I>, input: unknown) =>
  Schema.decodeUnknown(schema)(JSON.parse(JSON.stringify(input))).pipe(
    Effect.mapError((error) => new Error(ParseResult.TreeFormatter.formatErrorSync(error).split("\n").slice(1).join("\n")))
  )

const main = Effect.gen(function*() {
  const { positionals, values } = yield* parsed
  const command = positionals[0]
  if (values.help || command === undefined) return yield* Console.log(usage)
  const baseUrl = yield* Config.string("ROUTER_URL").pipe(Config.withDefault("http://127.0.0.1:8080"))
  const token = yield* Config.redacted("ADMIN_TOKEN")
  const { admin } = yield* Client.make({ baseUrl, token })
  const result: unknown = yield* Effect.gen(function*() {
    switch (command) {
      case "create-user":
        return yield* admin.createUser({
          payload: yield* decode(CreateUserPayload, {
            name: values.name,
            tier: values.tier,
            requests_per_minute: integer(values["requests-per-minute"]),
            intents_per_month: integer(values["intents-per-month"])
          })
        })
      case "get-user":
        return yield* admin.getUser({ path: { user_id: yield* userId(values) } })
      case "create-login":
        return yield* admin.createLogin({
          path: { user_id: yield* userId(values) },
          payload: yield* decode(CreateLoginPayload, { email: values.email, password: values.password })
        })
      case "create-key":
        return yield* admin.createApiKey({
          path: { user_id: yield* userId(values) },
          payload: yield* decode(CreateApiKeyPayload, {
            name: values.name,
            mode: values.mode,
            scopes: values.scopes?.split(","),
            expires_at: values["expires-at"]
          })
        })
      case "list-keys":
        return yield* admin.listApiKeys({ path: { user_id: yield* userId(values) } })
      case "revoke-key":
        yield* admin.revokeApiKey({ path: { key_id: yield* keyId(values) } })
        return { revoked: values.key }
      case "create-broker":
        return yield* admin.createBroker({
          path: { user_id: yield* userId(values) },
          payload: yield* decode(CreateBrokerPayload, {
            name: values.name,
            kind: values.kind,
            mode: values.mode,
            environment: values.environment,
            credentials: values["api-key-id"] === undefined ? undefined : {
              api_key_id: values["api-key-id"],
              api_secret_key: values["api-secret-key"]
            }
          })
        })
      case "replace-broker-credentials":
        return yield* admin.replaceBrokerCredentials({
          path: { broker_id: yield* brokerId(values) },
          payload: yield* decode(AlpacaCredentials, {
            api_key_id: values["api-key-id"],
            api_secret_key: values["api-secret-key"]
          })
        })
      case "create-webhook":
        return yield* admin.createWebhookEndpoint({
          path: { user_id: yield* userId(values) },
          payload: yield* decode(CreateWebhookEndpointPayload, {
            url: values.url,
            mode: values.mode,
            events: values.events?.split(",")
          })
        })
      case "list-webhooks":
        return yield* admin.listWebhookEndpoints({ path: { user_id: yield* userId(values) } })
      case "delete-webhook":
        yield* admin.deleteWebhookEndpoint({ path: { endpoint_id: yield* endpointId(values) } })
        return { deleted: values.endpoint }
      case "deliveries":
        return yield* admin.listDeliveries({
          path: { endpoint_id: yield* endpointId(values) },
          urlParams: { limit: integer(values.limit) }
        })
      case "resend":
        return yield* admin.resendDelivery({ path: { delivery_id: yield* deliveryId(values) } })
      default:
        return yield* Effect.fail(new Error(`Unknown command: ${command}\n\n${usage}`))
    }
  })
  yield* Console.log(JSON.stringify(result, null, 2))
}).pipe(
  Effect.catchAll((error) =>
    Effect.zipRight(
      Console.error("detail" in error ? String(error.detail) : String(error.message)),
      Effect.sync(() => (process.exitCode = 1))
    )
  ),
  Effect.provide(FetchHttpClient.layer)
)

NodeRuntime.runMain(main, { disablePrettyLogger: true })
