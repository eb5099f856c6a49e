import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { AppConfig } from "./Config.js"
import * as FirstRun from "./FirstRun.js"
import * as Logs from "./Logs.js"
import * as AccessLog from "./http/AccessLog.js"
import * as NodeServer from "./http/NodeServer.js"
import * as Server from "./http/Server.js"
import * as Database from "./sql/Database.js"
import * as Startup from "./Startup.js"
import * as Telemetry from "./Telemetry.js"

const Logging = Layer.unwrapEffect(
  Effect.gen(function*() {
    const format = yield* AppConfig.logFormat
    const level = yield* AppConfig.logLevel
    const logger = format === "json" ? Logs.json : format === "pretty" ? Logger.pretty : Logs.logfmt
    return Layer.merge(logger, Logger.minimumLogLevel(level))
  })
)

const Main = Layer.unwrapEffect(
  Effect.gen(function*() {
    const port = yield* AppConfig.port
    const host = yield* AppConfig.host
    const local = host === "0.0.0.0" || host === "::" ? "localhost" : host
    const configuration = yield* Startup.configuration
    const telemetry = yield* Telemetry.config
    const logFormat = yield* AppConfig.logFormat
    const logLevel = yield* AppConfig.logLevel
    yield* Startup.logSummary(configuration, { port, host }, telemetry)
    const services = Startup.services(configuration).pipe(Layer.provideMerge(Database.migrated(Database.layerConfig)))
    return Server.layer(configuration.http).pipe(
      // Without an OTLP endpoint the standalone service exports no traces, so it makes no spans: per
      // request, the HTTP span's attributes and each span's stack trace were a tenth of its CPU. With
      // one, every request but the probes and metric scrapes gets its span. Programs that embed the
      // Layers keep their spans, for the tracer they provide.
      HttpMiddleware.withTracerDisabledWhen(Telemetry.untracedRequests(telemetry)),
      Layer.provide(NodeHttpServer.layer(NodeServer.make, { port, host })),
      // The access log in the service's own format, written directly (pretty logs keep Effect's logger).
      Layer.provide(
        logFormat === "pretty"
          ? Layer.empty
          : AccessLog.layerWrite({ format: logFormat, minimumLevel: logLevel, write: Logs.writeStdout })
      ),
      Layer.provide(FirstRun.layer(`http://${local}:${port}`, configuration.localAdminToken)),
      Layer.provide(services),
      // Outermost, so its finalizer runs last: once requests, workers and the database are done.
      Layer.provide(Layer.scopedDiscard(Effect.addFinalizer(() => Effect.logInfo("stopped"))))
    )
  })
)

Layer.launch(Main).pipe(
  Effect.provide(NodeContext.layer),
  // Outside Main, so that the last spans and metrics are sent once everything else has stopped.
  Effect.provide(Telemetry.layer),
  Effect.provide(Logging),
  NodeRuntime.runMain({ disablePrettyLogger: true })
)
