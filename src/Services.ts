import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
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
  readonly credentialsKey: Option.Option<Redacted.Redacted<string>>
  /** Database unless set. */
  readonly rateLimits?: RateLimitStore | undefined
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

/** What the background work reads: routing's and webhook delivery's options. */
export interface WorkerOptions {
  readonly routing: RoutingWorker.RoutingOptions
  readonly webhooks: WebhookWorker.WebhookOptions
}

/** The use cases over the given ports: swap one port to test what sits above it. */
export const withPorts = <ROut, E, R>(ports: Layer.Layer<ROut, E, R>) =>
  Layer.merge(Intents.Default, Webhooks.Default).pipe(
    Layer.provideMerge(Operators.Default),
    Layer.provideMerge(ApiKeyCache.Default),
    Layer.provideMerge(ports)
  )

/**
 * The whole service below HTTP, on the `SqlClient` in context; with its background work (routing
 * and webhook delivery) when `workers` is given.
 */
export const layer = (options: ServiceOptions, workers?: WorkerOptions) =>
  (workers === undefined
    ? Layer.empty
    : Layer.merge(RoutingWorker.layer(workers.routing), WebhookWorker.layer(workers.webhooks))).pipe(
      Layer.provideMerge(withPorts(ports(options)))
    )
