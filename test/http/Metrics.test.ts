import { describe, expect, it as plainIt, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricKey from "effect/MetricKey"
import * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"
import type { IntentId } from "../../src/domain/Ids.js"
import { makeMatcher } from "../../src/http/HttpMetrics.js"
import * as Prometheus from "../../src/http/Prometheus.js"
import { marketOrder, signUp } from "../support/Scenario.js"
import { bodyOf, send, WithId } from "../support/TestServer.js"
import { waitFor } from "../support/Waiting.js"
import { servers } from "./Backends.js"

interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/** The samples of an exposition, label values unescaped. */
const parse = (text: string): ReadonlyArray<Sample> =>
  text.split("\n").filter((line) => line !== "" && !line.startsWith("#")).map((line) => {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[key!] = value!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c))
    }
    const raw = match[3]!
    return { name: match[1]!, labels, value: raw === "+Inf" ? Infinity : Number(raw) }
  })

const find = (samples: ReadonlyArray<Sample>, name: string, labels: Readonly<Record<string, string>> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))

const valueOf = (samples: ReadonlyArray<Sample>, name: string, labels: Readonly<Record<string, string>> = {}) =>
  find(samples, name, labels).reduce((sum, s) => sum + s.value, 0)

/** Every series of a histogram: its buckets rise to `le="+Inf"`, which equals its `_count`. */
const expectHistograms = (samples: ReadonlyArray<Sample>, name: string) => {
  const series = new Map<string, Array<Sample>>()
  for (const s of find(samples, `${name}_bucket`)) {
    const { le: _, ...rest } = s.labels
    const key = JSON.stringify(rest)
    series.set(key, [...(series.get(key) ?? []), s])
  }
  expect(series.size).toBeGreaterThan(0)
  for (const [key, buckets] of series) {
    const counts = buckets.map((b) => b.value)
    expect(counts).toEqual([...counts].sort((a, b) => a - b))
    expect(buckets.at(-1)?.labels.le).toBe("+Inf")
    const labels = JSON.parse(key) as Record<string, string>
    expect(buckets.at(-1)?.value).toBe(valueOf(samples, `${name}_count`, labels))
  }
}

for (const [name, server] of servers) {
  layer(server, { timeout: 60_000, excludeTestServices: true })(`GET /metrics on ${name}`, (it) => {
    it.effect("counts requests by route template, times them, and reads intents and queues from the database", () =>
      Effect.gen(function*() {
        const user = yield* signUp({ requests_per_minute: 10_000 })
        const ids: Array<string> = []
        for (let i = 0; i < 3; i++) {
          const reply = yield* send("POST", "/api/v1/intents", { key: user.testKey, json: marketOrder(user.mockId) })
          expect(reply.status).toBe(201)
          ids.push(bodyOf(WithId, reply).id)
        }
        for (const id of ids) {
          yield* waitFor(user.testKey, id as IntentId, (intent) => intent.status === "filled")
          expect((yield* send("GET", `/api/v1/intents/${id}`, { key: user.testKey })).status).toBe(200)
        }
        expect((yield* send("GET", "/no/such/route/42")).status).toBe(404)

        const reply = yield* send("GET", "/metrics")
        expect(reply.status).toBe(200)
        expect(reply.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8")
        expect(reply.text).toContain("# TYPE tir_http_requests_total counter")
        expect(reply.text).toContain("# HELP tir_http_requests_total ")
        expect(reply.text).toContain("# TYPE tir_http_request_duration_seconds histogram")
        expect(reply.text).toContain("# TYPE tir_intents gauge")
        const samples = parse(reply.text)

        const created = { method: "POST", route: "/api/v1/intents", status: "201" }
        expect(valueOf(samples, "tir_http_requests_total", created)).toBeGreaterThanOrEqual(3)
        expect(valueOf(samples, "tir_http_requests_total", { method: "GET", route: "/api/v1/intents/:id", status: "200" }))
          .toBeGreaterThanOrEqual(3)
        expect(valueOf(samples, "tir_http_requests_total", { route: "unmatched", status: "404" })).toBeGreaterThanOrEqual(1)
        const routes = new Set(samples.flatMap((s) => (s.labels.route === undefined ? [] : [s.labels.route])))
        for (const route of routes) {
          expect(route === "unmatched" || route.startsWith("/")).toBe(true)
          for (const id of ids) expect(route).not.toContain(id)
          expect(route).not.toContain("/no/such/route")
        }
        expectHistograms(samples, "tir_http_request_duration_seconds")
        expect(valueOf(samples, "tir_http_request_duration_seconds_count", { method: "POST", route: "/api/v1/intents" }))
          .toBeGreaterThanOrEqual(3)

        expect(valueOf(samples, "tir_intents", { status: "filled", mode: "test" })).toBeGreaterThanOrEqual(3)
        expect(find(samples, "tir_intents")).toHaveLength(12)
        expect(find(samples, "tir_routing_jobs").map((s) => s.labels.state).sort()).toEqual(["due", "running", "scheduled"])
        expect(find(samples, "tir_routing_oldest_job_age_seconds")).toHaveLength(1)
        expect(find(samples, "tir_webhook_deliveries_pending")).toHaveLength(1)
        expect(find(samples, "tir_webhook_oldest_pending_age_seconds")).toHaveLength(1)

        expectHistograms(samples, "tir_broker_request_duration_seconds")
        expect(
          valueOf(samples, "tir_broker_request_duration_seconds_count", { broker: "mock", operation: "submit", outcome: "ok" })
        ).toBeGreaterThanOrEqual(3)
      }))
  })
}

describe("the Prometheus text format", () => {
  plainIt("escapes label values and help text, and writes one HELP and TYPE line per name", () => {
    const text = Prometheus.render([
      Prometheus.gauge("tir_b", "Second.", { path: "a\\b\"c\nd" }, 1.5),
      Prometheus.gauge("tir_b", "Second.", { path: "plain" }, 2),
      Prometheus.gauge("tir_a", "First, on\ntwo lines \\ with a backslash.", {}, 0)
    ])
    expect(text).toBe(
      [
        "# HELP tir_a First, on\\ntwo lines \\\\ with a backslash.",
        "# TYPE tir_a gauge",
        "tir_a 0",
        "# HELP tir_b Second.",
        "# TYPE tir_b gauge",
        "tir_b{path=\"a\\\\b\\\"c\\nd\"} 1.5",
        "tir_b{path=\"plain\"} 2",
        ""
      ].join("\n")
    )
    expect(parse(text).find((s) => s.name === "tir_b")?.labels.path).toBe("a\\b\"c\nd")
  })

  plainIt("writes counters, and histograms with cumulative buckets ending at +Inf, _sum and _count", () => {
    const counter = MetricKey.counter("tir_things_total", { description: "Things." }).pipe(MetricKey.tagged("kind", "x"))
    const histogram = MetricKey.histogram("tir_wait_seconds", MetricBoundaries.fromIterable([0.1, 1]), "Waits.")
    const text = Prometheus.render([
      MetricPair.unsafeMake(counter, MetricState.counter(7)),
      MetricPair.unsafeMake(
        histogram,
        MetricState.histogram({ buckets: [[0.1, 1], [1, 3], [Infinity, 4]], count: 4, min: 0.05, max: 3, sum: 4.25 })
      )
    ])
    expect(text).toBe(
      [
        "# HELP tir_things_total Things.",
        "# TYPE tir_things_total counter",
        "tir_things_total{kind=\"x\"} 7",
        "# HELP tir_wait_seconds Waits.",
        "# TYPE tir_wait_seconds histogram",
        "tir_wait_seconds_bucket{le=\"0.1\"} 1",
        "tir_wait_seconds_bucket{le=\"1\"} 3",
        "tir_wait_seconds_bucket{le=\"+Inf\"} 4",
        "tir_wait_seconds_sum 4.25",
        "tir_wait_seconds_count 4",
        ""
      ].join("\n")
    )
  })

  plainIt("names a series' labels and metric names only with the characters the format allows", () => {
    const text = Prometheus.render([Prometheus.gauge("tir.odd-name", "Odd.", { "bad-label": "v" }, 1)])
    expect(text).toContain("tir_odd_name{bad_label=\"v\"} 1")
  })
})

describe("route templates", () => {
  const match = makeMatcher([
    { method: "GET", path: "/api/v1/events/:event_id" },
    { method: "GET", path: "/api/v1/events/stream" },
    { method: "GET", path: "/api/v1/intents/by-external-id/:intent_id" },
    { method: "POST", path: "/api/v1/intents/:id/cancel" },
    { method: "GET", path: "/a/b" },
    { method: "POST", path: "/a/:x" },
    { method: "GET", path: "/dashboard" },
    { method: "GET", path: "/dashboard/*" }
  ])

  plainIt("names the template, never the path, as the router matches it", () => {
    expect(match("GET", "/api/v1/events/stream")).toBe("/api/v1/events/stream")
    expect(match("GET", "/api/v1/events/evt_123?x=1")).toBe("/api/v1/events/:event_id")
    expect(match("GET", "/API/V1/Events/Stream/")).toBe("/api/v1/events/stream")
    expect(match("POST", "/api/v1/intents/by-external-id/cancel")).toBe("/api/v1/intents/:id/cancel")
    expect(match("POST", "/a/b")).toBe("/a/:x")
    expect(match("HEAD", "/a/b")).toBe("/a/b")
    expect(match("GET", "/dashboard")).toBe("/dashboard")
    expect(match("GET", "/dashboard/intents/42")).toBe("/dashboard/*")
  })

  plainIt("answers unmatched for a path or a method no route takes", () => {
    expect(match("GET", "/")).toBe("unmatched")
    expect(match("GET", "/api/v1/events")).toBe("unmatched")
    expect(match("GET", "/api/v1/events/a/b")).toBe("unmatched")
    expect(match("DELETE", "/a/b")).toBe("unmatched")
  })
})
