import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { AccountRepository } from "./services/accounts/AccountRepository.js"
import { ApiKeyCache } from "./services/accounts/ApiKeyCache.js"
import { Operators } from "./services/accounts/Operators.js"
import * as AlpacaConfig from "./services/brokers/alpaca/AlpacaConfig.js"
import type { AlpacaOptions } from "./services/brokers/alpaca/AlpacaConfig.js"
import { BrokerGateway } from "./services/brokers/BrokerGateway.js"
import { MockMarket } from "./services/brokers/mock/MockMarket.js"
import { CredentialsCipher } from "./services/CredentialsCipher.js"
import { Health } from "./services/Health.js"
import { IdGenerator } from "./services/IdGenerator.js"
import { EventRepository } from "./services/events/EventRepository.js"
import { Events } from "./services/events/Events.js"
import { EventStreams } from "./services/events/EventStreams.js"
import { LoginRepository } from "./services/logins/LoginRepository.js"
import { Logins } from "./services/logins/Logins.js"
import { QueueStats } from "./services/metrics/QueueStats.js"
import { IntentRepository } from "./services/intents/IntentRepository.js"
import { Intents } from "./services/intents/Intents.js"
import { RateLimiter } from "./services/RateLimiter.js"
import { RoutingHandoff } from "./services/routing/RoutingHandoff.js"
import { RoutingRepository } from "./services/routing/RoutingRepository.js"
import { WebhookRepository } from "./services/webhooks/WebhookRepository.js"
import { Webhooks } from "./services/webhooks/Webhooks.js"
import { WebhookSigner } from "./services/webhooks/WebhookSigner.js"
import * as BrokerStreams from "./workers/BrokerStreams.js"
import * as CountFolding from "./workers/CountFolding.js"
import * as EventRetention from "./workers/EventRetention.js"
import * as RoutingWorker from "./workers/RoutingWorker.js"
import * as WebhookWorker from "./workers/WebhookWorker.js"

/** Where per-key request counts live: the database (default), Redis, or nowhere (no limits, for benchmarks). */
export type RateLimitStore =
  | { readonly _tag: "Database" }
  | { readonly _tag: "Redis"; readonly url: Redacted.Redacted<string> }
  | { readonly _tag: "Off" }

export interface ServiceOptions {
  readonly credentialsKey: Option.Option<Redacted.Redacted<string>>
  /** Alpaca's endpoints (`ALPACA_*`); Alpaca's own unless set. */
  readonly alpaca?: AlpacaOptions | undefined
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
    IntentRepository.layerSql({ creationQueue: options.creationQueue }),
    EventRepository.layerSql,
    WebhookRepository.layerSql,
    LoginRepository.layerSql,
    WebhookSigner.layer,
    BrokerGateway.layer({ alpaca: options.alpaca ?? AlpacaConfig.defaults }).pipe(
      Layer.provide(NodeHttpClient.layerUndici)
    ),
    Health.layerSql,
    QueueStats.layerSql,
    // The test helper records price moves through routing's own repository.
    MockMarket.layerSql.pipe(Layer.provideMerge(RoutingRepository.layerSql))
  ).pipe(
    // The limiter counts API keys' requests and, shared by every instance, each Alpaca account's calls.
    Layer.provideMerge(
      Layer.mergeAll(AccountRepository.layerSql, CredentialsCipher.layer(options.credentialsKey), rateLimiter(options.rateLimits))
    ),
    // Shared by the intent repository and the routing worker built over these ports.
    Layer.provideMerge(Layer.merge(IdGenerator.layer, RoutingHandoff.layer))
  )

/**
 * The ports in memory, for fast tests of everything above them: no database at all. The broker
 * gateway reaches Alpaca as configured (creating an Alpaca connection verifies its credentials).
 */
export const portsInMemory = (options: ServiceOptions) =>
  Layer.mergeAll(
    IntentRepository.layerInMemory,
    EventRepository.layerInMemory,
    WebhookRepository.layerInMemory,
    LoginRepository.layerInMemory,
    WebhookSigner.layer,
    BrokerGateway.layerInMemory({ alpaca: options.alpaca ?? AlpacaConfig.defaults }).pipe(
      Layer.provide(NodeHttpClient.layerUndici)
    ),
    Health.layerInMemory,
    QueueStats.layerInMemory,
    MockMarket.layerInMemory
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(AccountRepository.layerInMemory, CredentialsCipher.layer(options.credentialsKey), RateLimiter.layerInMemory)
    ),
    Layer.provideMerge(IdGenerator.layer)
  )

/** What the background work reads: routing's and webhook delivery's options. */
export interface WorkerOptions {
  readonly routing: RoutingWorker.RoutingOptions
  readonly webhooks: WebhookWorker.WebhookOptions
  /** The brokers' update streams; their defaults unless set. */
  readonly streams?: BrokerStreams.StreamOptions | undefined
}

/** The use cases over the given ports: swap one port to test what sits above it. */
export const withPorts = <ROut, E, R>(ports: Layer.Layer<ROut, E, R>) =>
  Layer.mergeAll(Intents.Default, Events.Default, EventStreams.Default, Webhooks.Default, Logins.Default).pipe(
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
    : Layer.mergeAll(
      RoutingWorker.layer(workers.routing),
      WebhookWorker.layer(workers.webhooks),
      BrokerStreams.layer(workers.streams),
      EventRetention.layer(),
      CountFolding.layer()
    )).pipe(
      Layer.provideMerge(withPorts(ports(options)))
    )
