import * as FileSystem from "@effect/platform/FileSystem"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { fileURLToPath } from "node:url"
import { AppConfig } from "./Config.js"
import type * as Server from "./http/Server.js"
import * as AlpacaConfig from "./services/brokers/alpaca/AlpacaConfig.js"
import { IdGenerator } from "./services/IdGenerator.js"
import * as Services from "./Services.js"
import { DatabaseInfo } from "./sql/Database.js"
import * as Telemetry from "./Telemetry.js"
import * as BrokerStreams from "./workers/BrokerStreams.js"
import * as RoutingWorker from "./workers/RoutingWorker.js"
import * as WebhookWorker from "./workers/WebhookWorker.js"

/** What the standalone service reads from its configuration (the environment variables). */
export interface Configuration {
  readonly http: Server.Options
  readonly services: Services.ServiceOptions
  readonly workers: Services.WorkerOptions
  /** The operator token kept in `DATA_DIR` (embedded database, no `ADMIN_TOKEN`), for the first run to print. */
  readonly localAdminToken: Option.Option<{ readonly token: Redacted.Redacted<string>; readonly path: string }>
}

/** The configuration of the HTTP side, the services and the workers. */
export const configuration: Effect.Effect<
  Configuration,
  ConfigError.ConfigError,
  FileSystem.FileSystem
> = Effect.gen(function*() {
  const configuredToken = yield* AppConfig.adminToken
  const embedded = Option.isNone(yield* AppConfig.databaseUrl)
  const dataDir = yield* AppConfig.dataDir
  // On the embedded database without ADMIN_TOKEN, the operator API is open with a token kept in DATA_DIR.
  const localAdminToken = Option.isNone(configuredToken) && embedded
    ? Option.some({ token: yield* localSecret(dataDir, TOKEN_FILE, (ids) => ids.base62(32)), path: `${dataDir}/${TOKEN_FILE}` })
    : Option.none()
  const adminToken = Option.orElse(configuredToken, () => Option.map(localAdminToken, ({ token }) => token))
  const credentialsKey = yield* AppConfig.credentialsKey
  const rateLimits = yield* AppConfig.rateLimits
  const authFailuresPerMinute = yield* AppConfig.authFailuresPerMinute
  const publicUrl = yield* AppConfig.publicUrl
  const signup = yield* AppConfig.signup
  if (rateLimits._tag === "Off") yield* Effect.logWarning("RATE_LIMITS=off: no per-key limits are enforced")
  const routing = yield* RoutingWorker.config
  const webhooks = yield* WebhookWorker.config
  const alpaca = yield* AlpacaConfig.config
  const streams = yield* BrokerStreams.config
  return {
    http: { adminToken, authFailuresPerMinute, publicUrl, signup, dashboardAssets: DASHBOARD_ASSETS },
    services: { credentialsKey, rateLimits, alpaca },
    workers: { routing, webhooks, streams },
    localAdminToken
  }
})

/** The built dashboard, beside the bundled service (`dist/main.js` serves `dist/dashboard/`). */
const DASHBOARD_ASSETS = fileURLToPath(new URL("./dashboard/", import.meta.url))

/**
 * One line at start that says how this instance is set up, never a secret: where its data lives,
 * whether the operator API is open, where per-key counts are kept, which Alpaca it reaches, where
 * its traces and metrics go.
 */
export const logSummary = (
  configuration: Configuration,
  listen: { readonly port: number; readonly host: string },
  telemetry: Option.Option<Telemetry.Options>
) =>
  Effect.gen(function*() {
    const databaseUrl = yield* AppConfig.databaseUrl
    const dataDir = yield* AppConfig.dataDir
    const { http, services } = configuration
    const alpaca = services.alpaca ?? AlpacaConfig.defaults
    yield* Effect.logInfo("starting").pipe(Effect.annotateLogs({
      listen: `${listen.host}:${listen.port}`,
      database: Option.isSome(databaseUrl) ? "postgresql" : `pglite (${dataDir})`,
      admin_api: Option.isSome(http.adminToken) ? "on" : "off",
      rate_limits: services.rateLimits?._tag.toLowerCase() ?? "database",
      brokers: `mock, alpaca (paper ${alpaca.endpoints.paper.api}, live ${alpaca.endpoints.live.api})`,
      signup: http.signup ?? "open",
      public_url: Option.match(http.publicUrl ?? Option.none(), { onNone: () => "unset", onSome: (url) => url.origin }),
      telemetry: Telemetry.summary(telemetry)
    }))
  })

const KEY_FILE = "credentials.key"

const TOKEN_FILE = "admin.token"

/** A secret kept in a file of `DATA_DIR`: made once by `make`, readable by the owner only. */
const localSecret = (dataDir: string, file: string, make: (ids: IdGenerator["Type"]) => Effect.Effect<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = `${dataDir}/${file}`
    if (!(yield* fs.exists(path))) {
      yield* fs.makeDirectory(dataDir, { recursive: true, mode: 0o700 })
      yield* fs.writeFileString(path, yield* make(yield* IdGenerator), { mode: 0o600 })
    }
    return Redacted.make((yield* fs.readFileString(path)).trim())
  }).pipe(Effect.provide(IdGenerator.layer), Effect.orDie)

/**
 * The service below HTTP with its workers, on the database in context. A configured
 * `CREDENTIALS_KEY` is used as it is; without one, on an embedded database with a data folder,
 * the key is read from that folder (written there on the first start).
 */
export const services = (configuration: Configuration) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const database = yield* DatabaseInfo
      const configured = configuration.services.credentialsKey
      const credentialsKey = Option.isNone(configured) && database.kind === "pglite" && database.dataDir !== undefined
        ? Option.some(yield* localSecret(database.dataDir, KEY_FILE, (ids) => ids.hex(32)))
        : configured
      return Services.layer({ ...configuration.services, credentialsKey }, configuration.workers)
    })
  )
