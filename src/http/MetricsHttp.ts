import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type * as MetricPair from "effect/MetricPair"
import { Mode } from "../domain/Ids.js"
import type { IntentStatus } from "../domain/Intent.js"
import { QueueStats, type Stats } from "../services/metrics/QueueStats.js"
import * as HttpMetrics from "./HttpMetrics.js"
import * as Prometheus from "./Prometheus.js"

// Every status, checked by the compiler: a status added to the domain must be added here.
const statuses = Object.keys(
  { pending: 0, partially_filled: 0, filled: 0, canceled: 0, rejected: 0, failed: 0 } satisfies Record<IntentStatus, 0>
) as ReadonlyArray<IntentStatus>

/** The database's figures as gauges, made at each scrape: every mode and status, 0 for none. */
export const statsGauges = (stats: Stats): ReadonlyArray<MetricPair.MetricPair.Untyped> => {
  const intents = new Map(stats.intents.map((row) => [`${row.mode} ${row.status}`, row.count]))
  return [
    ...Mode.literals.flatMap((mode) =>
      statuses.map((status) =>
        Prometheus.gauge("tir_intents", "Intents by status and mode.", { status, mode }, intents.get(`${mode} ${status}`) ?? 0)
      )
    ),
    ...(["due", "running", "scheduled"] as const).map((state) =>
      Prometheus.gauge(
        "tir_routing_jobs",
        "Routing jobs by state: due (waiting for a worker), running (leased), scheduled (for later).",
        { state },
        stats.routingJobs[state]
      )
    ),
    Prometheus.gauge(
      "tir_routing_oldest_job_age_seconds",
      "How long the due routing job that has waited longest has waited; 0 when none waits.",
      {},
      stats.routingOldestDueSeconds
    ),
    Prometheus.gauge("tir_webhook_deliveries_pending", "Webhook deliveries still to be made (first attempts and retries).", {}, stats.webhookPending),
    Prometheus.gauge(
      "tir_webhook_oldest_pending_age_seconds",
      "The age of the oldest pending webhook delivery; 0 when there is none.",
      {},
      stats.webhookOldestPendingSeconds
    )
  ]
}

/**
 * `GET /metrics`: the service's metrics (`tir_*` in `Metric.snapshot`) and the database's figures, in
 * Prometheus' text format, without authentication: keep it off the public network. When the
 * database does not answer within 5 s, the scrape still answers, without the database's figures.
 * Provides the route templates the edge middleware labels the HTTP metrics with.
 */
export const layer = Layer.merge(
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const stats = yield* QueueStats
      const gauges = stats.read.pipe(
        Effect.timeout("5 seconds"),
        Effect.map(statsGauges),
        Effect.catchAllCause((cause) =>
          Effect.as(Effect.logWarning("metrics: the database's figures could not be read", cause), [])
        )
      )
      yield* router.get(
        "/metrics",
        Effect.gen(function*() {
          const database = yield* gauges
          // Only the service's own: Effect's runtime may register metrics of its own (`effect_fiber_*`).
          const own = (yield* Metric.snapshot).filter((pair) => pair.metricKey.name.startsWith("tir_"))
          return HttpServerResponse.text(Prometheus.render([...own, ...database]), {
            contentType: Prometheus.CONTENT_TYPE,
            headers: { "cache-control": "no-store" }
          })
        })
      )
    })
  ),
  HttpMetrics.RouteTemplates.layer
)
