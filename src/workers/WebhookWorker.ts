import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { WEBHOOK_CHANNEL } from "../services/intents/SqlTransitions.js"
import { requirePublic } from "../services/webhooks/PublicAddress.js"
import { type AttemptResult, type DueDelivery, WebhookRepository } from "../services/webhooks/WebhookRepository.js"
import { WebhookSigner } from "../services/webhooks/WebhookSigner.js"
import * as JobLoop from "./JobLoop.js"
import { delayAfter, delays, retrySchedule } from "./RetryConfig.js"

export interface WebhookOptions {
  /** Delays between attempts; after the last one the delivery is failed (it can be re-sent). */
  readonly retryDelays: ReadonlyArray<Duration.Duration>
  /** How long a receiver has to answer; 10 seconds unless set. */
  readonly timeout?: Duration.DurationInput | undefined
  /** Deliveries in flight at once in this instance. */
  readonly concurrency?: number | undefined
  readonly pollInterval?: Duration.DurationInput | undefined
  /** How long a claim holds without renewal: a crashed worker's deliveries are claimed again after it. */
  readonly lease?: Duration.DurationInput | undefined
}

const USER_AGENT = "trade-intent-router-webhooks/1"

type Answer = Pick<AttemptResult, "statusCode" | "error">

export const make = (options: WebhookOptions) =>
  Effect.gen(function*() {
    const repository = yield* WebhookRepository
    const signer = yield* WebhookSigner
    // Redirects are never followed: a 3xx counts as a failed answer, like every other non-2xx.
    const client = yield* HttpClient.HttpClient
    const timeout = Duration.decode(options.timeout ?? "10 seconds")
    const schedule = retrySchedule(options.retryDelays)

    /** One signed POST; whatever happens becomes a status code or an error text, never a failure. */
    const post = (delivery: DueDelivery): Effect.Effect<Answer> =>
      Effect.gen(function*() {
        if (delivery.mode === "live") yield* requirePublic(new URL(delivery.url))
        const { signature, timestamp } = yield* signer.sign(delivery.secret, delivery.body)
        const request = HttpClientRequest.post(delivery.url).pipe(
          HttpClientRequest.setHeaders({
            "sr-signature": signature,
            "sr-timestamp": String(timestamp),
            "sr-event-id": delivery.eventId,
            "user-agent": USER_AGENT
          }),
          HttpClientRequest.bodyText(delivery.body, "application/json")
        )
        const response = yield* client.execute(request).pipe(Effect.mapError((error) => error.message))
        yield* Effect.ignore(response.arrayBuffer)
        return { statusCode: response.status, error: null }
      }).pipe(
        Effect.timeoutFail({ duration: timeout, onTimeout: () => `No answer within ${Duration.format(timeout)}` }),
        Effect.catchAll((error) => Effect.succeed({ statusCode: null, error }))
      )

    const next = (delivery: DueDelivery, answer: Answer, at: DateTime.Utc) =>
      Effect.gen(function*(): Effect.fn.Return<AttemptResult["next"]> {
        const code = answer.statusCode
        if (code !== null && code >= 200 && code < 300) return { _tag: "succeeded" }
        if (code === 410) return { _tag: "gone" }
        const delay = yield* delayAfter(schedule, delivery.failures + 1)
        return Option.match(delay, {
          onNone: () => ({ _tag: "failed" }),
          onSome: (delay) => ({ _tag: "retry", at: DateTime.addDuration(at, delay) })
        })
      })

    const process = (delivery: DueDelivery) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const answer = yield* post(delivery)
        const durationMs = (yield* Clock.currentTimeMillis) - started
        const at = yield* DateTime.now
        const result: AttemptResult = { at, durationMs, ...answer, next: yield* next(delivery, answer, at) }
        if (result.next._tag !== "succeeded") {
          yield* Effect.logInfo("webhook delivery attempt failed").pipe(
            Effect.annotateLogs({ status_code: answer.statusCode, error: answer.error, next: result.next._tag })
          )
        }
        yield* repository.complete(delivery, result)
      }).pipe(
        Effect.withSpan("WebhookWorker.deliver", { attributes: { delivery_id: delivery.id, event_id: delivery.eventId } }),
        Effect.annotateLogs({ delivery_id: delivery.id, event_id: delivery.eventId, endpoint_id: delivery.endpointId })
      )

    yield* JobLoop.run({
      name: "webhook",
      channel: WEBHOOK_CHANNEL,
      queue: repository,
      process,
      concurrency: options.concurrency ?? 32,
      pollInterval: Duration.decode(options.pollInterval ?? "1 second"),
      lease: Duration.decode(options.lease ?? "30 seconds")
    })
  }).pipe(Effect.annotateLogs({ service: "webhooks" }))

/** The delivery worker, running for as long as the Layer is in use, with its own HTTP client. */
export const layer = (options: WebhookOptions) =>
  Layer.scopedDiscard(make(options)).pipe(Layer.provide(NodeHttpClient.layerUndici))

/** `WEBHOOK_RETRY_SCHEDULE` (default `5s,5m,30m,2h,5h,10h,10h`) and `WEBHOOK_LEASE` (default `30s`). */
export const config = Config.all({
  retryDelays: delays("WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,10h"),
  lease: Config.map(delays("WEBHOOK_LEASE", "30s"), (lease) => lease[0] ?? Duration.seconds(30))
})
