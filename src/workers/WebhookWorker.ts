import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Undici from "@effect/platform-node/Undici"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as Net from "node:net"
import { isPublicAddress } from "../domain/Webhook.js"
import { WEBHOOK_CHANNEL } from "../sql/Channels.js"
import * as PublicAddress from "../services/webhooks/PublicAddress.js"
import { type AttemptResult, type DueDelivery, WebhookRepository } from "../services/webhooks/WebhookRepository.js"
import { WebhookSigner } from "../services/webhooks/WebhookSigner.js"
import * as JobLoop from "./JobLoop.js"
import { delayAfter, delays, retrySchedule } from "./RetryConfig.js"
import * as Tracing from "../Tracing.js"

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
  /** Resolves the hosts of live endpoints; the system resolver unless set. */
  readonly resolve?: PublicAddress.Resolve | undefined
  /** The addresses live deliveries may connect to; public addresses unless set. */
  readonly allowAddress?: PublicAddress.AddressPolicy | undefined
}

const USER_AGENT = "trade-intent-router-webhooks/1"

/** The most of a receiver's answer that is read: the rest is never downloaded, the connection dropped. */
export const MAX_ANSWER_BYTES = 4096
/** The longest excerpt of an unsuccessful answer kept in the delivery history. */
export const EXCERPT_CHARS = 256

/** The start of a body as one line of at most `EXCERPT_CHARS` characters. */
const oneLine = (bytes: Uint8Array) =>
  new TextDecoder().decode(bytes.subarray(0, MAX_ANSWER_BYTES)).replace(/\s+/g, " ").trim().slice(0, EXCERPT_CHARS)

// The steps of `excerpt` below, made once (see "Hot paths" in docs/development.md).
interface Read {
  readonly chunks: Chunk.Chunk<Uint8Array>
  readonly size: number
}
const NOTHING_READ: Read = { chunks: Chunk.empty(), size: 0 }
const underBound = (read: Read) => read.size < MAX_ANSWER_BYTES
const readOn = (read: Read, bytes: Uint8Array): Read => {
  const kept = bytes.slice(0, MAX_ANSWER_BYTES - read.size)
  return { chunks: Chunk.append(read.chunks, kept), size: read.size + kept.length }
}
const readLine = (read: Read) => oneLine(Buffer.concat(Chunk.toReadonlyArray(read.chunks)))
const wholeLine = (buffer: ArrayBuffer) => oneLine(new Uint8Array(buffer))
const noExcerpt = () => ""

/**
 * The start of an answer's body as one line, reading at most `MAX_ANSWER_BYTES`: the response's
 * stream aborts the request when it is left early. An answer known to be no longer (a `204`, or a
 * `content-length` within the bound, which the HTTP client holds the body to) is read whole
 * instead: no stream to run and no request to abort, for the answer most receivers give.
 */
const excerpt = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<string> => {
  const length = response.status === 204 ? 0 : Number(response.headers["content-length"] ?? Number.NaN)
  const read = Number.isInteger(length) && length >= 0 && length <= MAX_ANSWER_BYTES
    ? Effect.map(response.arrayBuffer, wholeLine)
    : Effect.map(Stream.runFoldWhile(response.stream, NOTHING_READ, underBound, readOn), readLine)
  return Effect.orElseSucceed(read, noExcerpt)
}

interface ErrorDetails {
  readonly code?: unknown
  readonly message?: unknown
  readonly cause?: unknown
  readonly errors?: unknown
}

const details = (value: unknown): ErrorDetails => (typeof value === "object" && value !== null ? value : {})

/**
 * Why a request got no answer, as the transport said it (`ECONNREFUSED`, a TLS or timeout code, …),
 * naming the URL's origin only: a URL's path and query may hold a secret, and `HttpClientError`'s
 * own message carries the whole URL.
 */
export const transportFailure = (url: URL, error: HttpClientError.HttpClientError): string => {
  const causes: Array<ErrorDetails> = []
  for (let cause: unknown = error.cause; cause !== undefined && causes.length < 4;) {
    const current = details(cause)
    causes.push(current)
    cause = current.cause ?? (Array.isArray(current.errors) ? current.errors[0] : undefined)
  }
  const code = causes.map((cause) => cause.code).find((code) => typeof code === "string")
  const secrets = [url.href, `${url.pathname}${url.search}`, url.search, url.pathname === "/" ? "" : url.pathname]
    .filter((part) => part !== "")
  const message = causes.map((cause) => cause.message).find((text): text is string => typeof text === "string" && text !== "")
  const safe = message !== undefined && !secrets.some((secret) => message.includes(secret))
    ? message.slice(0, EXCERPT_CHARS)
    : undefined
  const reason = [code, safe].filter((part) => part !== undefined).join(": ")
  return `POST to ${url.origin} failed: ${reason === "" ? error.reason : reason}`
}

type Answer = Pick<AttemptResult, "statusCode" | "error">

export const make = (options: WebhookOptions) =>
  Effect.gen(function*() {
    const repository = yield* WebhookRepository
    const signer = yield* WebhookSigner
    // Redirects are never followed: a 3xx counts as a failed answer, like every other non-2xx. No
    // client span: its attributes hold the full URL, whose path or query may be a secret (and no
    // trace context goes out to receivers).
    const untraced = (client: HttpClient.HttpClient) => HttpClient.withTracerDisabledWhen(client, () => true)
    const client = untraced(yield* HttpClient.HttpClient)
    // Live deliveries connect only to the addresses checked in the same lookup (no second resolution).
    const allowAddress = options.allowAddress ?? isPublicAddress
    const live = untraced(NodeHttpClient.makeUndici(
      yield* Effect.acquireRelease(
        Effect.sync(() =>
          new Undici.Agent({ connect: { lookup: PublicAddress.checkedLookup({ resolve: options.resolve, allow: allowAddress }) } })
        ),
        (agent) => Effect.promise(() => agent.destroy())
      )
    ))
    const timeout = Duration.decode(options.timeout ?? "10 seconds")
    const schedule = retrySchedule(options.retryDelays)

    /**
     * One signed POST; whatever happens becomes a status code or an error text, never a failure. Of
     * the answer, only its status and an excerpt are read.
     */
    const post = (delivery: DueDelivery): Effect.Effect<Answer> => {
      const url = new URL(delivery.url)
      return Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const host = url.hostname.replace(/^\[|\]$/g, "")
        if (delivery.mode === "live" && Net.isIP(host) !== 0 && !allowAddress(host)) {
          return { statusCode: null, error: `POST to ${url.origin} refused: ${host} is not a public address` }
        }
        const { signature, timestamp } = yield* signer.sign(delivery.secret, delivery.body)
        const request = HttpClientRequest.post(url).pipe(
          HttpClientRequest.setHeaders({
            "sr-signature": signature,
            "sr-timestamp": String(timestamp),
            "sr-event-id": delivery.eventId,
            "user-agent": USER_AGENT
          }),
          HttpClientRequest.bodyText(delivery.body, "application/json")
        )
        const noAnswer = `No answer within ${Duration.format(timeout)} from ${url.origin}`
        const response = yield* (delivery.mode === "live" ? live : client).execute(request).pipe(
          Effect.mapError((error) => transportFailure(url, error)),
          Effect.timeoutFail({ duration: timeout, onTimeout: () => noAnswer })
        )
        const left = Duration.millis(Math.max(0, Duration.toMillis(timeout) - ((yield* Clock.currentTimeMillis) - started)))
        const body = yield* excerpt(response).pipe(Effect.timeoutTo({
          duration: left,
          onSuccess: (text) => text,
          onTimeout: () => ""
        }))
        const succeeded = response.status >= 200 && response.status < 300
        return { statusCode: response.status, error: succeeded || body === "" ? null : `answered: ${body}` }
      }).pipe(Effect.catchAll((error) => Effect.succeed({ statusCode: null, error })))
    }

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

    /** One line per attempt, once recorded: delivered, retried (and when), given up, or its endpoint gone. */
    const logOutcome = (result: AttemptResult) => {
      const fields = { status_code: result.statusCode, duration_ms: result.durationMs }
      switch (result.next._tag) {
        // The `info` lines are built only when `info` is logged.
        case "succeeded":
          return Effect.whenLogLevel(Effect.logInfo("webhook delivered").pipe(Effect.annotateLogs(fields)), "Info")
        case "retry":
          return Effect.whenLogLevel(
            Effect.logInfo("webhook delivery failed; will retry").pipe(
              Effect.annotateLogs({ ...fields, error: result.error, retry_at: DateTime.formatIso(result.next.at) })
            ),
            "Info"
          )
        case "failed":
          return Effect.logWarning("webhook delivery failed; no retries left").pipe(
            Effect.annotateLogs({ ...fields, error: result.error })
          )
        case "gone":
          return Effect.logWarning("webhook endpoint answered 410 Gone; it is disabled").pipe(Effect.annotateLogs(fields))
      }
    }

    // Endpoints that just answered 410 while the disabling is being recorded: a delivery to one of
    // them claimed meanwhile is not sent, but handed back (the disabling fails it).
    const disabling = yield* Ref.make(HashSet.empty<DueDelivery["endpointId"]>())

    const process = (delivery: DueDelivery) =>
      Effect.gen(function*() {
        if (HashSet.has(yield* Ref.get(disabling), delivery.endpointId)) {
          return yield* repository.release(delivery, DateTime.addDuration(yield* DateTime.now, Duration.seconds(1)))
        }
        const started = yield* Clock.currentTimeMillis
        const answer = yield* post(delivery)
        const gone = answer.statusCode === 410
        if (gone) yield* Ref.update(disabling, HashSet.add(delivery.endpointId))
        const durationMs = (yield* Clock.currentTimeMillis) - started
        const at = yield* DateTime.now
        const result: AttemptResult = { at, durationMs, ...answer, next: yield* next(delivery, answer, at) }
        yield* repository.complete(delivery, result).pipe(
          Effect.ensuring(gone ? Ref.update(disabling, HashSet.remove(delivery.endpointId)) : Effect.void)
        )
        yield* logOutcome(result)
      }).pipe(
        Tracing.span("WebhookWorker.deliver", { attributes: { delivery_id: delivery.id, event_id: delivery.eventId } }),
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
