import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

/**
 * Where and how the standalone service exports traces and metrics over OTLP/HTTP, from the standard
 * `OTEL_*` variables. Without `OTEL_EXPORTER_OTLP_ENDPOINT` nothing is exported and no span is made.
 */
export interface Options {
  /** The collector's base URL: traces go to `/v1/traces` under it, metrics to `/v1/metrics`. */
  readonly endpoint: URL
  readonly protocol: "http/protobuf" | "http/json"
  /** Headers sent with each export (a hosted collector's API key, for instance). */
  readonly headers: Redacted.Redacted<Readonly<Record<string, string>>>
  /** The resource's `service.name`. */
  readonly serviceName: string
  /** How often finished spans are sent. */
  readonly traceExportInterval: Duration.Duration
  /** How often every metric's current value is sent. */
  readonly metricExportInterval: Duration.Duration
}

export const DEFAULT_SERVICE_NAME = "trade-intent-router"

/** An optional variable, an empty value counting as unset (as the OpenTelemetry specification asks). */
const optional = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim() !== "")))

const endpoint = optional("OTEL_EXPORTER_OTLP_ENDPOINT").pipe(
  Config.mapOrFail(Option.match({
    onNone: () => Either.right(Option.none<URL>()),
    onSome: (text) => {
      const invalid = ConfigError.InvalidData(["OTEL_EXPORTER_OTLP_ENDPOINT"], "must be an http or https URL")
      try {
        const url = new URL(text.trim())
        return url.protocol === "http:" || url.protocol === "https:" ? Either.right(Option.some(url)) : Either.left(invalid)
      } catch {
        return Either.left(invalid)
      }
    }
  }))
)

/** `name1=value1,name2=value2`, each value percent-decoded. */
const parseHeaders = (text: string): Either.Either<Readonly<Record<string, string>>, ConfigError.ConfigError> => {
  const invalid = ConfigError.InvalidData(["OTEL_EXPORTER_OTLP_HEADERS"], "must be name=value pairs separated by commas")
  const headers: Record<string, string> = {}
  for (const pair of text.split(",")) {
    if (pair.trim() === "") continue
    const equals = pair.indexOf("=")
    const name = equals === -1 ? "" : pair.slice(0, equals).trim().toLowerCase()
    if (name === "") return Either.left(invalid)
    try {
      headers[name] = decodeURIComponent(pair.slice(equals + 1).trim())
    } catch {
      return Either.left(invalid)
    }
  }
  return Either.right(headers)
}

const headers = Config.redacted("OTEL_EXPORTER_OTLP_HEADERS").pipe(
  Config.withDefault(Redacted.make("")),
  Config.mapOrFail((text) => Either.map(parseHeaders(Redacted.value(text)), Redacted.make))
)

/** A positive number of milliseconds, as the specification's interval variables are given. */
const millis = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive number of milliseconds`, validation: (n) => n > 0 }),
    Config.map(Duration.millis)
  )

/** The rest of the configuration, read only when an endpoint is set. */
const exportConfig = Config.all({
  protocol: Config.literal("http/protobuf", "http/json")("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(
    Config.withDefault("http/protobuf")
  ),
  headers,
  serviceName: optional("OTEL_SERVICE_NAME").pipe(Config.map(Option.getOrElse(() => DEFAULT_SERVICE_NAME))),
  traceExportInterval: millis("OTEL_BSP_SCHEDULE_DELAY", 5_000),
  metricExportInterval: millis("OTEL_METRIC_EXPORT_INTERVAL", 60_000)
})

/** The export's configuration when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; none otherwise. */
export const config: Effect.Effect<Option.Option<Options>, ConfigError.ConfigError> = Effect.flatMap(
  endpoint,
  Option.match({
    onNone: () => Effect.succeedNone,
    onSome: (url) => Effect.map(exportConfig, (rest) => Option.some({ endpoint: url, ...rest }))
  })
)

/** The OTLP/HTTP exporters: a tracer that sends every finished span, and the metrics sent at each interval. */
export const exporters = (options: Options): Layer.Layer<never> => {
  const base = options.endpoint.href.replace(/\/+$/, "")
  const resource = { serviceName: options.serviceName }
  const headers = Redacted.value(options.headers)
  return Layer.mergeAll(
    OtlpTracer.layer({ url: `${base}/v1/traces`, resource, headers, exportInterval: options.traceExportInterval }),
    OtlpMetrics.layer({ url: `${base}/v1/metrics`, resource, headers, exportInterval: options.metricExportInterval })
  ).pipe(
    Layer.provide(options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
    Layer.provide(NodeHttpClient.layerUndici)
  )
}

/**
 * Telemetry as configured: the exporters, or, without an endpoint, the tracer disabled, so that
 * the spans of `Tracing.span` are not made (their cost per request is then next to nothing).
 */
export const layer: Layer.Layer<never, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.map(config, Option.match({ onNone: () => Layer.setTracerEnabled(false), onSome: exporters }))
)

/** Probes and metric scrapes: frequent, and of no interest as traces. */
const UNTRACED_PATHS: ReadonlySet<string> = new Set(["/healthz", "/readyz", "/livez", "/metrics"])

/**
 * The requests that get no HTTP server span: all of them when telemetry is off (the span's
 * attributes cost CPU even unexported), the probes and metric scrapes when it is on.
 */
export const untracedRequests = (
  options: Option.Option<Options>
): (request: HttpServerRequest.HttpServerRequest) => boolean =>
  Option.isNone(options)
    ? () => true
    : (request) => UNTRACED_PATHS.has(request.url.split("?", 1)[0] ?? request.url)

/** How the start-up summary shows the export: `off`, or `otlp` with the protocol and the collector's address. */
export const summary = (options: Option.Option<Options>): string =>
  Option.match(options, {
    onNone: () => "off",
    onSome: ({ endpoint, protocol }) =>
      `otlp ${protocol} (${endpoint.origin}${endpoint.pathname === "/" ? "" : endpoint.pathname})`
  })
