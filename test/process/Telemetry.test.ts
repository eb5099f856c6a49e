import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Harness from "../support/Harness.js"
import { createIntent, eventually, signUpOver, start, stop } from "../support/Process.js"

// What the assertions read of OTLP/JSON: attributes as strings, spans with their ids, metric names.
const KeyValue = Schema.Struct({
  key: Schema.String,
  value: Schema.Struct({ stringValue: Schema.optional(Schema.NullOr(Schema.String)) })
})
const Resource = Schema.Struct({ attributes: Schema.Array(KeyValue) })
const Span = Schema.Struct({
  name: Schema.String,
  traceId: Schema.String,
  spanId: Schema.String,
  parentSpanId: Schema.optional(Schema.String),
  attributes: Schema.Array(KeyValue)
})
const TracesData = Schema.parseJson(Schema.Struct({
  resourceSpans: Schema.Array(Schema.Struct({
    resource: Resource,
    scopeSpans: Schema.Array(Schema.Struct({ spans: Schema.Array(Span) }))
  }))
}))
const MetricsData = Schema.parseJson(Schema.Struct({
  resourceMetrics: Schema.Array(Schema.Struct({
    resource: Resource,
    scopeMetrics: Schema.Array(Schema.Struct({ metrics: Schema.Array(Schema.Struct({ name: Schema.String })) }))
  }))
}))

const attribute = (attributes: ReadonlyArray<typeof KeyValue.Type>, key: string) =>
  attributes.find((attribute) => attribute.key === key)?.value.stringValue ?? undefined

/** Every span received at `/v1/traces`, with its resource's `service.name`. */
const spansOf = (receiver: Harness.Receiver) =>
  receiver.received.filter((request) => request.path === "/v1/traces").flatMap((request) =>
    Schema.decodeUnknownSync(TracesData)(request.body).resourceSpans.flatMap(({ resource, scopeSpans }) =>
      scopeSpans.flatMap(({ spans }) => spans.map((span) => ({ ...span, service: attribute(resource.attributes, "service.name") })))
    )
  )

/** Every metric name received at `/v1/metrics`, with its resource's `service.name`. */
const metricsOf = (receiver: Harness.Receiver) =>
  receiver.received.filter((request) => request.path === "/v1/metrics").flatMap((request) =>
    Schema.decodeUnknownSync(MetricsData)(request.body).resourceMetrics.flatMap(({ resource, scopeMetrics }) =>
      scopeMetrics.flatMap(({ metrics }) =>
        metrics.map(({ name }) => ({ name, service: attribute(resource.attributes, "service.name") }))
      )
    )
  )

/** A fresh DATA_DIR (the embedded database) for `run`, removed afterwards. */
const withDataDir = async (run: (dataDir: string) => Promise<void>) => {
  const dataDir = mkdtempSync(join(tmpdir(), "tir-telemetry-"))
  try {
    await run(dataDir)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** A loopback collector for `run`, with a fresh DATA_DIR; both gone afterwards. */
const withCollector = (run: (collector: Harness.Receiver, dataDir: string) => Promise<void>) =>
  withDataDir(async (dataDir) => {
    const collector = await Harness.listen()
    try {
      await run(collector, dataDir)
    } finally {
      await collector.close()
    }
  })

const order = { symbol: "AAPL", side: "buy", quantity: 1, order_type: "market" }

describe("OpenTelemetry export", () => {
  it("with OTEL_EXPORTER_OTLP_ENDPOINT, spans of the route, use case and repository and the service's metrics arrive over OTLP/JSON", () =>
    withCollector(async (collector, dataDir) => {
      const service = await start({
        DATA_DIR: dataDir,
        ADMIN_TOKEN: "adm",
        LOG_LEVEL: "info",
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.port}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "tir-under-test",
        OTEL_BSP_SCHEDULE_DELAY: "200",
        OTEL_METRIC_EXPORT_INTERVAL: "300"
      })
      expect(service.output()).toContain(`telemetry="otlp http/json (http://127.0.0.1:${collector.port})"`)
      const { brokerId, key } = await signUpOver(service.baseUrl, "adm")
      const id = await createIntent(service.baseUrl, key, { ...order, intent_id: "otel-1", broker_id: brokerId })
      const found = await fetch(`${service.baseUrl}/api/v1/intents/${id}`, { headers: { authorization: `Bearer ${key}` } })
      expect(found.status).toBe(200)
      await found.body?.cancel()

      const named = (name: string) => spansOf(collector).filter((span) => span.name === name)
      await eventually(() => named("Intents.create").length > 0 && named("IntentRepository.findJson").length > 0, 10)
      const spans = spansOf(collector)
      expect(new Set(spans.map((span) => span.service))).toEqual(new Set(["tir-under-test"]))

      // The HTTP server span names the route template; the use case and repository spans are in its trace.
      const post = spans.find((span) =>
        span.name === "http.server POST" && attribute(span.attributes, "http.route") === "/api/v1/intents"
      )
      const get = spans.find((span) =>
        span.name === "http.server GET" && attribute(span.attributes, "http.route") === "/api/v1/intents/:id"
      )
      expect(post).toBeDefined()
      expect(get).toBeDefined()
      const create = named("Intents.create").find((span) => span.traceId === post?.traceId)
      expect(create).toBeDefined()
      expect(named("IntentRepository.create").some((span) => span.parentSpanId === create?.spanId)).toBe(true)
      expect(named("IntentRepository.findJson").some((span) => span.traceId === get?.traceId)).toBe(true)
      expect(spans.some((span) => span.name === "sql.execute")).toBe(true)
      // Probes are not traced: the harness polled /healthz before it returned.
      expect(spans.some((span) => attribute(span.attributes, "url.path") === "/healthz")).toBe(false)

      await eventually(() => metricsOf(collector).some(({ name }) => name === "tir_http_requests_total"), 10)
      expect(metricsOf(collector).find(({ name }) => name === "tir_http_requests_total")?.service).toBe("tir-under-test")
      expect(await stop(service.child)).toBe(0)
    }), 90_000)

  it("by default as protobuf, with OTEL_EXPORTER_OTLP_HEADERS, and what is left is sent at shutdown", () =>
    withCollector(async (collector, dataDir) => {
      // Both intervals (metrics' default, 60 s) are longer than the test runs: what arrives was sent at shutdown.
      const service = await start({
        DATA_DIR: dataDir,
        ADMIN_TOKEN: "adm",
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.port}/`,
        OTEL_EXPORTER_OTLP_HEADERS: "x-collector-key=s3cret%21, x-tenant = ops",
        OTEL_BSP_SCHEDULE_DELAY: "60000"
      })
      const { brokerId, key } = await signUpOver(service.baseUrl, "adm")
      await createIntent(service.baseUrl, key, { ...order, intent_id: "otel-2", broker_id: brokerId })
      expect(collector.received).toEqual([])
      expect(await stop(service.child)).toBe(0)

      const traces = collector.received.filter((request) => request.path === "/v1/traces")
      const metrics = collector.received.filter((request) => request.path === "/v1/metrics")
      expect(traces.length).toBeGreaterThan(0)
      expect(metrics.length).toBeGreaterThan(0)
      for (const request of [...traces, ...metrics]) {
        expect(request.headers["content-type"]).toBe("application/x-protobuf")
        expect(request.headers["x-collector-key"]).toBe("s3cret!")
        expect(request.headers["x-tenant"]).toBe("ops")
      }
      // Protobuf keeps strings as they are: the names can be found in the bytes.
      expect(traces.some((request) => request.body.includes("Intents.create"))).toBe(true)
      expect(traces.some((request) => request.body.includes("trade-intent-router"))).toBe(true)
      expect(metrics.some((request) => request.body.includes("tir_http_requests_total"))).toBe(true)
    }), 90_000)
})
