import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { AppConfig } from "./Config.js"
import { AdminAuthLive, ApiKeyAuthLive } from "./http/Auth.js"
import { ApiKeyCache } from "./services/accounts/ApiKeyCache.js"
import { Operators } from "./services/accounts/Operators.js"
import * as SqlAccountRepository from "./services/accounts/SqlAccountRepository.js"
import { CredentialsCipher } from "./services/CredentialsCipher.js"
import * as InMemoryAccountRepository from "./services/accounts/InMemoryAccountRepository.js"
import { Health } from "./services/Health.js"
import { IdGenerator } from "./services/IdGenerator.js"
import * as InMemoryIntentRepository from "./services/intents/InMemoryIntentRepository.js"
import { Intents } from "./services/intents/Intents.js"
import * as SqlIntentRepository from "./services/intents/SqlIntentRepository.js"
import { RateLimiter } from "./services/RateLimiter.js"
import * as Brokers from "./services/brokers/Brokers.js"
import * as SqlRoutingRepository from "./services/routing/SqlRoutingRepository.js"
import { DatabaseInfo } from "./sql/Database.js"
import * as InMemoryWebhookRepository from "./services/webhooks/InMemoryWebhookRepository.js"
import * as SqlWebhookRepository from "./services/webhooks/SqlWebhookRepository.js"
import { Webhooks } from "./services/webhooks/Webhooks.js"
import { WebhookSigner } from "./services/webhooks/WebhookSigner.js"
import * as RoutingWorker from "./workers/RoutingWorker.js"
import * as WebhookWorker from "./workers/WebhookWorker.js"

/** Where per-key request counts live: the database (default), Redis, or nowhere (no limits, for benchmarks). */
export type RateLimitStore =
  | { readonly _tag: "Database" }
  | { readonly _tag: "Redis"; readonly url: Redacted.Redacted<string> }
  | { readonly _tag: "Off" }

export interface ServiceOptions {
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  readonly credentialsKey: Option.Option<Redacted.Redacted<string>>
  /** Database unless set. */
  readonly rateLimits?: RateLimitStore | undefined
  /** Failed authentications (API keys, admin tokens) per client address and minute before 429s; 20 unless set. */
  readonly authFailuresPerMinute?: number | undefined
  /** Creations that may wait for the database before 503s; 1,000 unless set. */
  readonly creationQueue?: number | undefined
}

const rateLimiter = (store: RateLimitStore | undefined) => {
  switch (store?._tag) {
    case undefined:
    case "Database":
      return RateLimiter.layerSql
    case "Redis":
      return RateLimiter.layerRedis(store.url)
    case "Off":
      return RateLimiter.layerUnlimited
  }
}

/** The ports' real implementations, on the `SqlClient` in context. */
export const ports = (options: ServiceOptions) =>
  Layer.mergeAll(
    SqlIntentRepository.layerWith({ creationQueue: options.creationQueue }),
    SqlAccountRepository.layer,
    SqlRoutingRepository.layer,
    SqlWebhookRepository.layer,
    WebhookSigner.layer,
    Brokers.layer,
    rateLimiter(options.rateLimits),
    Health.layer,
    CredentialsCipher.layer(options.credentialsKey)
  ).pipe(Layer.provideMerge(IdGenerator.layer))

/** The ports in memory, for fast tests of everything above them: no database at all. */
export const portsInMemory = (options: ServiceOptions) =>
  Layer.mergeAll(
    InMemoryIntentRepository.layer,
    InMemoryAccountRepository.layer,
    InMemoryWebhookRepository.layer,
    WebhookSigner.layer,
    RateLimiter.layerInMemory,
    Health.layerInMemory,
    IdGenerator.layer,
    CredentialsCipher.layer(options.credentialsKey)
  )

/** Everything the HTTP server needs above the ports: use cases and the security middleware. */
export const application = (options: ServiceOptions) =>
  Layer.mergeAll(
    Intents.Default,
    Webhooks.Default,
    ApiKeyAuthLive({ authFailuresPerMinute: options.authFailuresPerMinute ?? 20 }),
    AdminAuthLive(options.adminToken, { failuresPerMinute: options.authFailuresPerMinute ?? 20 })
  ).pipe(Layer.provideMerge(Operators.Default), Layer.provideMerge(ApiKeyCache.Default))

export interface WorkerOptions {
  readonly routing: RoutingWorker.RoutingOptions
  readonly webhooks: WebhookWorker.WebhookOptions
}

/** The whole service on the database, with its background work: routing and webhook delivery. */
export const layerWithWorkers = (options: ServiceOptions, workers: WorkerOptions) =>
  Layer.mergeAll(
    application(options),
    RoutingWorker.layer(workers.routing),
    WebhookWorker.layer(workers.webhooks)
  ).pipe(Layer.provideMerge(ports(options)))

/** The whole service below HTTP over the given ports: swap one port to test what sits above it. */
export const withPorts = <E, R>(options: ServiceOptions, ports: Layer.Layer<Layer.Layer.Success<ReturnType<typeof portsInMemory>>, E, R>) =>
  application(options).pipe(Layer.provideMerge(ports))

/** The whole service below HTTP, on the `SqlClient` in context. */
export const layer = (options: ServiceOptions) => withPorts(options, ports(options))

/** The whole service below HTTP with in-memory ports: no database at all. */
export const layerInMemory = (options: ServiceOptions) => withPorts(options, portsInMemory(options))

const KEY_FILE = "credentials.key"

/** On PGlite with no `CREDENTIALS_KEY`, a key kept in `DATA_DIR` (created once, readable by the owner only). */
const localCredentialsKey = (dataDir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = `${dataDir}/${KEY_FILE}`
    if (!(yield* fs.exists(path))) {
      const ids = yield* IdGenerator
      yield* fs.writeFileString(path, yield* ids.hex(32), { mode: 0o600 })
    }
    return Redacted.make((yield* fs.readFileString(path)).trim())
  }).pipe(Effect.provide(IdGenerator.layer), Effect.orDie)

/** `layer` from the configuration (the environment variables), on the database in context. */
export const layerConfig = Layer.unwrapEffect(
  Effect.gen(function*() {
    const database = yield* DatabaseInfo
    const adminToken = yield* AppConfig.adminToken
    const configured = yield* AppConfig.credentialsKey
    const credentialsKey = Option.isNone(configured) && database.kind === "pglite" && database.dataDir !== undefined
      ? Option.some(yield* localCredentialsKey(database.dataDir))
      : configured
    const rateLimits = yield* AppConfig.rateLimits
    const authFailuresPerMinute = yield* AppConfig.authFailuresPerMinute
    if (rateLimits._tag === "Off") yield* Effect.logWarning("RATE_LIMITS=off: no per-key limits are enforced")
    const routing = yield* RoutingWorker.config
    const webhooks = yield* WebhookWorker.config
    return layerWithWorkers({ adminToken, credentialsKey, rateLimits, authFailuresPerMinute }, { routing, webhooks })
  })
)
