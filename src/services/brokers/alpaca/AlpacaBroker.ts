import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { BrokerEnvironment } from "../../../domain/Account.js"
import {
  BrokerCredentialsRefused,
  BrokerRejected,
  BrokerUnavailable,
  CREDENTIALS_REFUSED_REASON
} from "../../../domain/Broker.js"
import type { BrokerId } from "../../../domain/Ids.js"
import { AccountRepository } from "../../accounts/AccountRepository.js"
import { CredentialsCipher } from "../../CredentialsCipher.js"
import { RateLimiter } from "../../RateLimiter.js"
import type { BrokerCredentials, BrokerGateway, BrokerOrder, BrokerUpdate, Connection } from "../BrokerGateway.js"
import { submitEach } from "../SubmitEach.js"
import * as AlpacaClient from "./AlpacaClient.js"
import type { AlpacaOptions } from "./AlpacaConfig.js"
import * as AlpacaSchemas from "./AlpacaSchemas.js"
import * as AlpacaStream from "./AlpacaStream.js"
import * as Tracing from "../../../Tracing.js"

/** The credentials of a connection as they are stored, encrypted. */
const StoredCredentials = Schema.parseJson(Schema.Struct({ api_key_id: Schema.String, api_secret_key: Schema.String }))

/** What a call needs to act for a connection: where its environment is and how it signs in. */
interface Account extends AlpacaClient.Credentials {
  readonly streamUrl: string
  /** The credentials as stored (encrypted): which ones a refusal is about. */
  readonly stored: string
}

/** How long a connection's decrypted credentials are kept: replaced ones are used within this. */
const CREDENTIALS_CACHED_FOR = Duration.seconds(30)

/** An event of the `trade_updates` stream as the order it leaves, with the one execution it reports. */
const fromTradeUpdate = (update: AlpacaSchemas.TradeUpdate): BrokerOrder => {
  const execution = (update.event === "fill" || update.event === "partial_fill") &&
      update.execution_id !== undefined && update.execution_id !== null &&
      update.qty !== undefined && update.qty !== null && update.price !== undefined && update.price !== null
    ? [{
      id: update.execution_id,
      quantity: update.qty,
      price: update.price,
      filledAt: update.timestamp ?? update.order.updated_at
    }]
    : []
  return { ...AlpacaClient.toBrokerOrder(update.order, []), fills: execution }
}

const refused = () => new BrokerCredentialsRefused({ detail: CREDENTIALS_REFUSED_REASON })

/**
 * Alpaca behind the broker port. Submissions are never blindly repeated (the routing side looks an
 * order up by client order id when an outcome is unknown); a refusal of the credentials marks the
 * connection invalid.
 */
export const make = (options: AlpacaOptions) =>
  Effect.gen(function*() {
    const accounts = yield* AccountRepository
    const cipher = yield* CredentialsCipher
    // Calls per account are paced here and counted across instances in the shared store.
    const client = yield* AlpacaClient.make({ timeout: options.timeout, shared: yield* RateLimiter })
    const known = new Map<BrokerId, { readonly account: Account; readonly until: number }>()

    const accountOf = (environment: BrokerEnvironment, credentials: BrokerCredentials, stored = ""): Account => ({
      baseUrl: options.endpoints[environment].api,
      streamUrl: options.endpoints[environment].stream,
      apiKeyId: credentials.apiKeyId,
      apiSecretKey: credentials.apiSecretKey,
      stored
    })

    /** The connection's account; refused at once when the connection is known to be invalid. */
    const account = (id: BrokerId) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const cached = known.get(id)
        if (cached !== undefined && cached.until > now) return cached.account
        const secrets = yield* accounts.findBrokerSecrets(id)
        if (Option.isNone(secrets) || secrets.value.credentials === null) {
          return yield* new BrokerUnavailable({ detail: "The broker connection holds no Alpaca credentials" })
        }
        if (secrets.value.status === "invalid") return yield* refused()
        const stored = yield* cipher.decrypt(secrets.value.credentials).pipe(
          Effect.flatMap(Schema.decode(StoredCredentials)),
          Effect.mapError(() => new BrokerUnavailable({ detail: "The Alpaca credentials cannot be read on this server" }))
        )
        const found = accountOf(secrets.value.environment ?? "paper", {
          apiKeyId: stored.api_key_id,
          apiSecretKey: Redacted.make(stored.api_secret_key)
        }, secrets.value.credentials)
        known.set(id, { account: found, until: now + Duration.toMillis(CREDENTIALS_CACHED_FOR) })
        return found
      })

    /**
     * Alpaca refused `used`: the connection becomes invalid, unless its credentials were replaced
     * since they were read (then the call is worth making again with the new ones).
     */
    const refusedWith = (id: BrokerId, used: Account) =>
      Effect.gen(function*() {
        known.delete(id)
        const current = yield* accounts.findBrokerSecrets(id)
        if (Option.isSome(current) && current.value.credentials !== used.stored) {
          return yield* new BrokerUnavailable({ detail: "The connection's credentials were replaced meanwhile" })
        }
        yield* accounts.markBrokerInvalid(id, used.stored)
        return yield* refused()
      })

    /** Runs a call for a connection; Alpaca's refusal of the credentials marks the connection invalid. */
    const forConnection = <A, E>(
      connection: Connection,
      call: (account: Account) => Effect.Effect<A, E | AlpacaClient.AlpacaCredentialsRefused>
    ) =>
      Effect.flatMap(account(connection.id), (found) =>
        call(found).pipe(
          Effect.catchIf(
            (error): error is AlpacaClient.AlpacaCredentialsRefused => error instanceof AlpacaClient.AlpacaCredentialsRefused,
            () => refusedWith(connection.id, found)
          )
        ))

    /** The order with its executions, read only when Alpaca's filled total exceeds what is recorded. */
    const withFills = (account: Account, order: AlpacaSchemas.Order, recorded: number) =>
      order.filled_qty > recorded
        ? client.fills(account, order).pipe(
          // The order stands without them: a later reconciliation reads them again.
          Effect.catchTags({ BrokerTimeout: () => Effect.succeed([]), BrokerUnavailable: () => Effect.succeed([]) }),
          Effect.map((fills) => AlpacaClient.toBrokerOrder(order, fills))
        )
        : Effect.succeed(AlpacaClient.toBrokerOrder(order, []))

    const isOpen = (order: AlpacaSchemas.Order) => {
      const status = AlpacaSchemas.orderStatus(order)
      return status === "new" || status === "partially_filled"
    }

    const submit: BrokerGateway["Type"]["submit"] = (connection, order) =>
      forConnection(connection, (account) =>
        client.submit(account, order).pipe(
          Effect.catchTag("AlpacaRejected", (rejected) => new BrokerRejected({ reason: rejected.reason })),
          Effect.flatMap((placed) => withFills(account, placed, 0))
        )).pipe(Tracing.span("AlpacaBroker.submit"))

    return identity<BrokerGateway["Type"]>({
      submit,
      submitMany: submitEach(submit),

      lookup: (connection, { brokerOrderId, clientOrderId, recorded = 0 }) =>
        forConnection(connection, (account) =>
          // A recorded order is read by its own id (`GET /v2/orders/{id}`); one whose submission had
          // no answer, by the client order id the router gave it.
          (brokerOrderId
            ? client.getOrder(account, brokerOrderId).pipe(
              Effect.asSome,
              Effect.catchTag("AlpacaOrderNotFound", () => client.byClientOrderId(account, clientOrderId))
            )
            : client.byClientOrderId(account, clientOrderId)).pipe(
            Effect.flatMap(Option.match({
              onNone: () => Effect.succeed(Option.none<BrokerOrder>()),
              onSome: (order) => Effect.map(withFills(account, order, recorded), Option.some)
            }))
          )).pipe(Tracing.span("AlpacaBroker.lookup")),

      cancel: (connection, clientOrderId) =>
        forConnection(connection, (account) =>
          Effect.gen(function*() {
            const found = yield* client.byClientOrderId(account, clientOrderId)
            if (Option.isNone(found)) return Option.none<BrokerOrder>()
            if (isOpen(found.value)) {
              // 204: requested, the outcome comes later; 422: no longer cancelable; either way, read it again.
              yield* client.cancel(account, found.value.id).pipe(
                Effect.catchTags({ AlpacaNotCancelable: () => Effect.void, AlpacaOrderNotFound: () => Effect.void })
              )
            }
            const order = isOpen(found.value)
              ? yield* client.getOrder(account, found.value.id).pipe(
                Effect.catchTag("AlpacaOrderNotFound", () => Effect.succeed(found.value))
              )
              : found.value
            return Option.some(yield* withFills(account, order, 0))
          })).pipe(Tracing.span("AlpacaBroker.cancel")),

      verify: (_kind, environment, credentials) =>
        client.account(accountOf(environment, credentials)).pipe(
          Effect.asVoid,
          Effect.catchTags({
            AlpacaCredentialsRefused: () => Effect.fail(refused()),
            BrokerTimeout: (error) => Effect.fail(new BrokerUnavailable({ detail: error.detail }))
          }),
          Tracing.span("AlpacaBroker.verify")
        ),

      streaming: ["alpaca"],

      updates: (connection) =>
        Stream.unwrap(
          account(connection.id).pipe(
            // A connection whose credentials cannot be read has no stream: it cannot trade either.
            Effect.catchTag("BrokerUnavailable", () => Effect.fail(refused())),
            Effect.map((found) =>
              AlpacaStream.updates(found.streamUrl, found).pipe(
                Stream.map((event): BrokerUpdate =>
                  event._tag === "Connected" ? event : { _tag: "Order", order: fromTradeUpdate(event.update) }
                ),
                // Replaced credentials end this stream as well: the next one starts with them.
                Stream.catchTag("AlpacaCredentialsRefused", () =>
                  Stream.fromEffect(
                    refusedWith(connection.id, found).pipe(Effect.catchTag("BrokerUnavailable", () => Effect.fail(refused())))
                  ))
              )
            )
          )
        )
    })
  })
