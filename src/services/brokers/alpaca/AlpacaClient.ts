import * as Headers from "@effect/platform/Headers"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as RateLimiter from "effect/RateLimiter"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { createHash } from "node:crypto"
import { BrokerTimeout, BrokerUnavailable } from "../../../domain/Broker.js"
import type { OrderSpec } from "../../../domain/Intent.js"
import type { RateLimiter as SharedLimiter } from "../../RateLimiter.js"
import type { BrokerOrder } from "../BrokerGateway.js"
import * as AlpacaSchemas from "./AlpacaSchemas.js"
import * as Tracing from "../../../Tracing.js"

/** Where an Alpaca account is reached and how it signs in. The URL is the deployment's, never a user's. */
export interface Credentials {
  readonly baseUrl: string
  readonly apiKeyId: string
  readonly apiSecretKey: Redacted.Redacted<string>
}

/** Alpaca refused the credentials (401; 401 or 403 when verifying them). */
export class AlpacaCredentialsRefused
  extends Schema.TaggedError<AlpacaCredentialsRefused>()("AlpacaCredentialsRefused", { detail: Schema.String })
{}

/** Alpaca refused the order (403 or 422 on submission): `reason` is its own message. */
export class AlpacaRejected extends Schema.TaggedError<AlpacaRejected>()("AlpacaRejected", {
  status: Schema.Number,
  reason: Schema.String
}) {}

/** Alpaca holds no such order. */
export class AlpacaOrderNotFound
  extends Schema.TaggedError<AlpacaOrderNotFound>()("AlpacaOrderNotFound", { detail: Schema.String })
{}

/** The order can no longer be canceled (422): it is final, or about to be. */
export class AlpacaNotCancelable
  extends Schema.TaggedError<AlpacaNotCancelable>()("AlpacaNotCancelable", { detail: Schema.String })
{}

/**
 * What every call can fail with: the credentials refused; the outcome unknown (a timeout, a 429, a
 * 5xx, a broken connection, an answer that is not Alpaca's); or Alpaca certainly not reached.
 */
export type CallError = AlpacaCredentialsRefused | BrokerTimeout | BrokerUnavailable

export interface Options {
  /** How long a call may take, answer included; 10 seconds unless set. */
  readonly timeout?: Duration.DurationInput | undefined
  /** The pace of calls per account; `PACE` unless set (tests that place many orders raise it). */
  readonly pace?: { readonly limit: number; readonly interval: Duration.DurationInput } | undefined
  /**
   * The counts every instance shares: with it, each account's calls across all instances also stay
   * within `SHARED_PER_MINUTE` per fixed minute. Without it, only this instance's pace holds.
   */
  readonly shared?: SharedLimiter["Type"] | undefined
}

/**
 * Calls per account and fixed minute across all instances: two adjacent minutes' worth is 200, so
 * no 60 seconds ever see more than Alpaca's 200, however many instances call.
 */
export const SHARED_PER_MINUTE = 100

/** The shared count's bucket of an account: its key id, hashed (the count's store never holds it). */
const sharedBucket = (apiKeyId: string) => `alpaca:${createHash("sha256").update(apiKeyId).digest("hex").slice(0, 32)}`

/**
 * The pace of calls per Alpaca account (Alpaca allows 200 a minute): a bucket of 45 calls refilled
 * at 135 a minute, so that no minute ever sees more than 180 calls from this process.
 */
export const PACE = { limit: 45, interval: "20 seconds" } as const

/** How long to hold an account's calls after a 429 without a readable `Retry-After`. */
const DEFAULT_RETRY_AFTER = Duration.seconds(1)

/** The prefix of the client order ids the router gives Alpaca, followed by the intent's id. */
export const CLIENT_ORDER_ID_PREFIX = "tir-"

/** A decimal as Alpaca wants it: a string, never in exponent notation. */
export const decimal = (n: number): string => {
  const plain = String(n)
  return plain.includes("e") ? n.toFixed(9).replace(/\.?0+$/, "") : plain
}

/** The body of `POST /v2/orders` for an order. */
export const orderBody = (clientOrderId: string, spec: OrderSpec) => ({
  symbol: spec.symbol,
  qty: decimal(spec.quantity),
  side: spec.side,
  type: spec.order_type,
  time_in_force: spec.time_in_force,
  ...(spec.limit_price !== null ? { limit_price: decimal(spec.limit_price) } : {}),
  ...(spec.stop_price !== null ? { stop_price: decimal(spec.stop_price) } : {}),
  extended_hours: spec.extended_hours,
  client_order_id: clientOrderId
})

/**
 * The execution id of a `FILL` activity: Alpaca's activity ids are `<timestamp>::<execution id>`,
 * and the stream names the same execution by the part after `::`, so both record it once.
 */
export const executionId = (activityId: string): string => {
  const at = activityId.lastIndexOf("::")
  return at === -1 ? activityId : activityId.slice(at + 2)
}

/** Alpaca's order and its executions as the broker port's order. */
export const toBrokerOrder = (
  order: AlpacaSchemas.Order,
  fills: ReadonlyArray<AlpacaSchemas.FillActivity>
): BrokerOrder => ({
  brokerOrderId: order.id,
  clientOrderId: order.client_order_id,
  status: AlpacaSchemas.orderStatus(order),
  reason: order.status === "rejected" ? "Rejected by Alpaca" : undefined,
  fills: fills
    .filter((fill) => fill.order_id === order.id)
    .map((fill) => ({
      id: executionId(fill.id),
      quantity: fill.qty,
      price: fill.price,
      filledAt: fill.transaction_time
    })),
  filledQuantity: order.filled_qty
})

const ACTIVITY_PAGE_SIZE = 100
/** A bound on the pages read for one order's fills: 10,000 executions account-wide since it was placed. */
const MAX_ACTIVITY_PAGES = 100

const DUPLICATE_CLIENT_ORDER_ID = /client[_ ]order[_ ]id must be unique/i

/** Codes of a connection that was never made: the request certainly did not reach Alpaca. */
const NOT_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"])

const codesOf = (error: unknown): ReadonlyArray<string> => {
  const codes: Array<string> = []
  for (let cause: unknown = error, depth = 0; typeof cause === "object" && cause !== null && depth < 6; depth++) {
    if ("code" in cause && typeof cause.code === "string") codes.push(cause.code)
    cause = "errors" in cause && Array.isArray(cause.errors) && cause.errors.length > 0
      ? cause.errors[0]
      : "cause" in cause
      ? cause.cause
      : undefined
  }
  return codes
}

const transportError = (what: string, error: HttpClientError.RequestError): BrokerTimeout | BrokerUnavailable => {
  const codes = codesOf(error.cause)
  return error.reason !== "Transport" || codes.some((code) => NOT_CONNECTED.has(code))
    ? new BrokerUnavailable({ detail: `${what}: Alpaca unreachable (${codes[0] ?? error.reason})` })
    : new BrokerTimeout({ detail: `${what}: the connection to Alpaca broke (${codes[0] ?? error.reason})` })
}

/** Alpaca's `message` from an error answer, or the status alone. */
const messageOf = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<string> =>
  HttpClientResponse.schemaBodyJson(AlpacaSchemas.ErrorBody)(response).pipe(
    Effect.map((body) => body.message),
    Effect.orElseSucceed(() => `HTTP ${response.status}`)
  )

/** An answer none of the call's cases expected: rate limited, a server error or anything else. */
const unexpected = (what: string, response: HttpClientResponse.HttpClientResponse): Effect.Effect<never, BrokerTimeout> =>
  Effect.flatMap(messageOf(response), (message) =>
    new BrokerTimeout({
      detail: response.status === 429
        ? `${what}: Alpaca is limiting the rate (429): ${message}`
        : `${what}: Alpaca answered ${response.status}: ${message}`
    }))

const decode = <A, I>(what: string, schema: Schema.Schema<A, I>) =>
(response: HttpClientResponse.HttpClientResponse): Effect.Effect<A, BrokerTimeout> =>
  HttpClientResponse.schemaBodyJson(schema)(response).pipe(
    Effect.mapError(() => new BrokerTimeout({ detail: `${what}: Alpaca's answer could not be read` }))
  )

/** The seconds of a `Retry-After` header, when it holds a number of them. */
const retryAfter = (response: HttpClientResponse.HttpClientResponse): Duration.Duration => {
  const seconds = Number(response.headers["retry-after"])
  return Number.isFinite(seconds) && seconds > 0 ? Duration.seconds(Math.min(seconds, 60)) : DEFAULT_RETRY_AFTER
}

/**
 * Alpaca's Trading API v2 over `HttpClient`: each call is one request, never retried here (whether
 * to ask again is the caller's decision). Failures are typed: see `CallError`. Calls are paced per
 * account, and a 429 holds that account's calls for its `Retry-After`.
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    // No trace context goes to Alpaca; the secret header never reaches a span.
    const client = HttpClient.withTracerPropagation(yield* HttpClient.HttpClient, false)
    const timeout = Duration.decode(options.timeout ?? "10 seconds")
    const scope = yield* Effect.scope
    const accounts = new Map<string, { readonly pace: RateLimiter.RateLimiter; heldUntil: number }>()

    /** Waits for the account's turn: its pace, and the end of a hold a 429 asked for. */
    const turn = (apiKeyId: string) =>
      Effect.gen(function*() {
        let account = accounts.get(apiKeyId)
        if (account === undefined) {
          account = { pace: yield* Scope.extend(RateLimiter.make(options.pace ?? PACE), scope), heldUntil: 0 }
          accounts.set(apiKeyId, account)
        }
        const held = account.heldUntil - (yield* Clock.currentTimeMillis)
        if (held > 0) yield* Effect.sleep(Duration.millis(held))
        yield* account.pace(Effect.void)
        const shared = options.shared
        if (shared === undefined) return
        // Past the account's share of this minute, wait for the next one.
        for (;;) {
          const decision = yield* shared.consume(sharedBucket(apiKeyId), SHARED_PER_MINUTE)
          if (decision.allowed) return
          yield* Effect.sleep(Duration.seconds(decision.retryAfter))
        }
      })

    const hold = (apiKeyId: string, response: HttpClientResponse.HttpClientResponse) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const account = accounts.get(apiKeyId)
        if (account !== undefined) account.heldUntil = now + Duration.toMillis(retryAfter(response))
      })

    const call = <A, E>(
      what: string,
      credentials: Credentials,
      request: HttpClientRequest.HttpClientRequest,
      answer: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<A, E>
    ): Effect.Effect<A, E | CallError> =>
      Effect.zipRight(turn(credentials.apiKeyId), client.execute(
        request.pipe(
          HttpClientRequest.prependUrl(credentials.baseUrl.replace(/\/+$/, "")),
          HttpClientRequest.setHeaders({
            "APCA-API-KEY-ID": credentials.apiKeyId,
            "APCA-API-SECRET-KEY": Redacted.value(credentials.apiSecretKey)
          }),
          HttpClientRequest.acceptJson
        )
      ).pipe(
        Effect.catchTags({
          RequestError: (error) => Effect.fail(transportError(what, error)),
          ResponseError: (error) =>
            Effect.fail(new BrokerTimeout({ detail: `${what}: Alpaca's answer broke off (${error.reason})` }))
        }),
        Effect.tap((response) => response.status === 429 ? hold(credentials.apiKeyId, response) : Effect.void),
        Effect.flatMap((response): Effect.Effect<A, E | CallError> =>
          response.status === 401
            ? Effect.flatMap(messageOf(response), (message) =>
              new AlpacaCredentialsRefused({ detail: `Alpaca refused the credentials: ${message}` }))
            : answer(response)
        ),
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => new BrokerTimeout({ detail: `${what}: Alpaca did not answer within ${Duration.format(timeout)}` })
        }),
        Effect.locallyWith(Headers.currentRedactedNames, (names) => [...names, "apca-api-secret-key"])
      ))

    /** Verifies the credentials: 401 or 403 means they are refused. */
    const account = Effect.fnUntraced(function*(credentials: Credentials) {
      return yield* call(
        "GET /v2/account",
        credentials,
        HttpClientRequest.get("/v2/account"),
        (response): Effect.Effect<AlpacaSchemas.Account, AlpacaCredentialsRefused | BrokerTimeout> =>
          response.status === 200
          ? decode("GET /v2/account", AlpacaSchemas.Account)(response)
          : response.status === 403
          ? Effect.flatMap(messageOf(response), (message) =>
            new AlpacaCredentialsRefused({ detail: `Alpaca refused the credentials: ${message}` }))
          : unexpected("GET /v2/account", response)
      )
    }, Tracing.span("AlpacaClient.account"))

    /** Looks an order up by the client order id it was submitted with. */
    const byClientOrderId = Effect.fnUntraced(
      function*(credentials: Credentials, clientOrderId: string) {
        const what = "GET /v2/orders:by_client_order_id"
        return yield* call(
          what,
          credentials,
          HttpClientRequest.get("/v2/orders:by_client_order_id", { urlParams: { client_order_id: clientOrderId } }),
          (response): Effect.Effect<Option.Option<AlpacaSchemas.Order>, BrokerTimeout> =>
            response.status === 200
              ? Effect.map(decode(what, AlpacaSchemas.Order)(response), Option.some)
              : response.status === 404
              ? Effect.succeed(Option.none())
              : unexpected(what, response)
        )
      }, Tracing.span("AlpacaClient.byClientOrderId")
    )

    /**
     * Places an order. Alpaca's refusal (403, 422) is `AlpacaRejected` with its message; a 422 saying
     * the client order id is taken means the order exists, and that order is answered.
     */
    const submit = Effect.fnUntraced(
      function*(credentials: Credentials, order: { readonly clientOrderId: string; readonly spec: OrderSpec }) {
        const what = "POST /v2/orders"
        const request = HttpClientRequest.post("/v2/orders").pipe(
          HttpClientRequest.bodyUnsafeJson(orderBody(order.clientOrderId, order.spec))
        )
        const outcome = yield* call(
          what,
          credentials,
          request,
          (response): Effect.Effect<AlpacaSchemas.Order | "exists", AlpacaRejected | BrokerTimeout> =>
            response.status === 200
              ? decode(what, AlpacaSchemas.Order)(response)
              : response.status === 403 || response.status === 422
              ? Effect.flatMap(messageOf(response), (message) =>
                response.status === 422 && DUPLICATE_CLIENT_ORDER_ID.test(message)
                  ? Effect.succeed("exists" as const)
                  : new AlpacaRejected({ status: response.status, reason: message }))
              : unexpected(what, response)
        )
        if (outcome !== "exists") return outcome
        const existing = yield* byClientOrderId(credentials, order.clientOrderId)
        if (Option.isSome(existing)) return existing.value
        return yield* new BrokerTimeout({
          detail: `${what}: Alpaca says client order id ${order.clientOrderId} is taken but does not find it`
        })
      }, Tracing.span("AlpacaClient.submit")
    )

    const getOrder = Effect.fnUntraced(function*(credentials: Credentials, orderId: string) {
      const what = "GET /v2/orders/{id}"
      return yield* call(
        what,
        credentials,
        HttpClientRequest.get(`/v2/orders/${encodeURIComponent(orderId)}`),
        (response): Effect.Effect<AlpacaSchemas.Order, AlpacaOrderNotFound | BrokerTimeout> =>
          response.status === 200
            ? decode(what, AlpacaSchemas.Order)(response)
            : response.status === 404
            ? new AlpacaOrderNotFound({ detail: `Alpaca holds no order ${orderId}` })
            : unexpected(what, response)
      )
    }, Tracing.span("AlpacaClient.getOrder"))

    /** Requests a cancel (204). The outcome is the order's later status: it may fill first. */
    const cancel = Effect.fnUntraced(function*(credentials: Credentials, orderId: string) {
      const what = "DELETE /v2/orders/{id}"
      return yield* call(
        what,
        credentials,
        HttpClientRequest.del(`/v2/orders/${encodeURIComponent(orderId)}`),
        (response): Effect.Effect<void, AlpacaNotCancelable | AlpacaOrderNotFound | BrokerTimeout> =>
          response.status === 204 || response.status === 200
            ? Effect.void
            : response.status === 422
            ? Effect.flatMap(messageOf(response), (message) => new AlpacaNotCancelable({ detail: message }))
            : response.status === 404
            ? new AlpacaOrderNotFound({ detail: `Alpaca holds no order ${orderId}` })
            : unexpected(what, response)
      )
    }, Tracing.span("AlpacaClient.cancel"))

    /**
     * The executions of one order, from the `FILL` account activities since it was placed, page by
     * page (Alpaca answers at most 100 at a time).
     */
    const fills = Effect.fnUntraced(
      function*(credentials: Credentials, order: Pick<AlpacaSchemas.Order, "id" | "created_at">) {
        const what = "GET /v2/account/activities/FILL"
        // A second of margin for a clock between the order's time and its fills'.
        const after = DateTime.formatIso(DateTime.subtract(order.created_at, { seconds: 1 }))
        const found: Array<AlpacaSchemas.FillActivity> = []
        let token: string | undefined
        for (let page = 0; page < MAX_ACTIVITY_PAGES; page++) {
          const activities = yield* call(
            what,
            credentials,
            HttpClientRequest.get("/v2/account/activities/FILL", {
              urlParams: {
                direction: "asc",
                page_size: String(ACTIVITY_PAGE_SIZE),
                after,
                ...(token !== undefined ? { page_token: token } : {})
              }
            }),
            (response) =>
              response.status === 200
                ? decode(what, AlpacaSchemas.FillActivities)(response)
                : unexpected(what, response)
          )
          found.push(...activities.filter((fill) => fill.order_id === order.id))
          token = activities.at(-1)?.id
          if (activities.length < ACTIVITY_PAGE_SIZE || token === undefined) break
        }
        return found
      }, Tracing.span("AlpacaClient.fills")
    )

    return { account, submit, byClientOrderId, getOrder, cancel, fills } as const
  })

/** The Alpaca client's calls. */
export type AlpacaClient = Effect.Effect.Success<ReturnType<typeof make>>
