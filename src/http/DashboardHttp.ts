import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { ApiKeyView, BrokerView, CreatedApiKey, CreatedWebhookEndpoint, WebhookEndpointView } from "../api/AdminApi.js"
import { Api } from "../api/Api.js"
import { type Account, CurrentAccount, DashboardEndpoint, Overview } from "../api/DashboardApi.js"
import { EventTimeline } from "../api/EventsApi.js"
import { RateLimited } from "../domain/Auth.js"
import type { Mode, Owner } from "../domain/Ids.js"
import { monthlyPeriod } from "../domain/Limits.js"
import { DEVICE_COOKIE, Session, SignupClosed } from "../domain/Login.js"
import type { WebhookEndpoint } from "../domain/Webhook.js"
import { Operators } from "../services/accounts/Operators.js"
import { Events } from "../services/events/Events.js"
import { EventStreams, MAX_STREAMS_PER_KEY } from "../services/events/EventStreams.js"
import { IntentRepository } from "../services/intents/IntentRepository.js"
import { Intents } from "../services/intents/Intents.js"
import { Logins, type OpenedSession } from "../services/logins/Logins.js"
import { Webhooks } from "../services/webhooks/Webhooks.js"
import { cookies, PublicUrl, requireSameOrigin, SignupPolicy } from "./DashboardAuth.js"
import { intentPage, jsonText } from "./IntentsHttp.js"
import * as ResponseHeaders from "./ResponseHeaders.js"

const toSession = (opened: OpenedSession) =>
  new Session({ user: opened.user, email: opened.email, csrf_token: opened.csrfToken })

const ownerOf = (account: Account, mode: Mode): Owner => ({ userId: account.user.id, mode })

const endpointView = ({ user_id: _, ...endpoint }: WebhookEndpoint) => new WebhookEndpointView(endpoint)

/** How many recent intents the overview shows. */
const RECENT_INTENTS = 5

/** Sign-up and login: each answers with the session and sets its cookie. */
export const DashboardLoginHttpLive = HttpApiBuilder.group(Api, "dashboardLogin", (handlers) =>
  Effect.gen(function*() {
    const logins = yield* Logins
    const publicUrl = yield* PublicUrl
    const cookie = cookies(publicUrl)
    const signupPolicy = yield* SignupPolicy
    return handlers
      .handle("signup", ({ payload }) =>
        Effect.gen(function*() {
          yield* requireSameOrigin(publicUrl)
          if (signupPolicy === "closed") return yield* new SignupClosed()
          const opened = yield* logins.signup(payload)
          yield* cookie.setSession(opened.token)
          return toSession(opened)
        }))
      .handle("login", ({ payload }) =>
        Effect.gen(function*() {
          yield* requireSameOrigin(publicUrl)
          const request = yield* HttpServerRequest.HttpServerRequest
          const { deviceToken, session } = yield* logins.login(payload, {
            address: Option.getOrElse(request.remoteAddress, () => "unknown"),
            deviceToken: request.cookies[DEVICE_COOKIE]
          })
          yield* cookie.setSession(session.token)
          yield* cookie.setDevice(deviceToken)
          return toSession(session)
        }).pipe(Effect.tapErrorTag("LoginThrottled", (error) => ResponseHeaders.retryAfter(error.retry_after))))
  }))

/** Everything a signed-in customer does: the same use cases the operator and v1 APIs use, on their own things. */
export const DashboardHttpLive = HttpApiBuilder.group(Api, "dashboard", (handlers) =>
  Effect.gen(function*() {
    const logins = yield* Logins
    const operators = yield* Operators
    const webhooks = yield* Webhooks
    const intents = yield* Intents
    const intentRepository = yield* IntentRepository
    const events = yield* Events
    const streams = yield* EventStreams
    const cookie = cookies(yield* PublicUrl)

    const withAccount = <A, E, R>(f: (account: Account) => Effect.Effect<A, E, R>) => Effect.flatMap(CurrentAccount, f)

    return handlers
      .handle("session", () =>
        withAccount((account) =>
          Effect.succeed(new Session({ user: account.user, email: account.email, csrf_token: account.csrfToken }))
        ))
      .handle("logout", () =>
        withAccount((account) => Effect.zipRight(logins.logout(account.sessionId), cookie.clearSession)))
      .handle("logoutEverywhere", () =>
        withAccount((account) => Effect.zipRight(logins.logoutEverywhere(account.user.id), cookie.clearSession)))
      .handle("updateAccount", ({ payload }) =>
        withAccount((account) =>
          Effect.map(
            logins.rename(account.user.id, payload.name),
            (user) => new Session({ user, email: account.email, csrf_token: account.csrfToken })
          )
        ))
      .handle("changePassword", ({ payload }) =>
        withAccount((account) =>
          Effect.gen(function*() {
            const opened = yield* logins.changePassword(account, payload)
            yield* cookie.setSession(opened.token)
            return toSession(opened)
          })
        ))
      .handle("overview", ({ urlParams }) =>
        withAccount((account) =>
          Effect.gen(function*() {
            const owner = ownerOf(account, urlParams.mode)
            const [used, recent, endpoints] = yield* Effect.all([
              Effect.flatMap(DateTime.now, (now) =>
                intentRepository.monthlyUsage(account.user.id, monthlyPeriod(now).period)),
              intents.list(owner, { page: 1, pageSize: RECENT_INTENTS }),
              webhooks.listEndpointsOf(owner)
            ], { concurrency: "unbounded" })
            return new Overview({
              mode: urlParams.mode,
              tier: account.user.tier,
              requests_per_minute: account.user.requests_per_minute,
              intents_per_month: account.user.intents_per_month,
              live_intents_this_month: used,
              recent_intents: recent.items,
              failing_endpoints: endpoints
                .filter(({ endpoint, failingDeliveries }) => endpoint.disabled_at !== null || failingDeliveries > 0)
                .map(({ endpoint, failingDeliveries }) =>
                  new DashboardEndpoint({ ...endpointView(endpoint), failing_deliveries: failingDeliveries })
                )
            })
          })
        ))
      .handle("listApiKeys", ({ urlParams }) =>
        withAccount((account) =>
          Effect.map(operators.listApiKeys(account.user.id), (keys) => ({
            items: keys.filter((key) => key.mode === urlParams.mode).map((key) => new ApiKeyView(key))
          }))
        ).pipe(Effect.orDie))
      .handle("createApiKey", ({ payload }) =>
        withAccount((account) =>
          Effect.map(operators.createApiKey(account.user.id, payload), (key) => new CreatedApiKey(key))
        ).pipe(Effect.catchTag("UserNotFound", Effect.die)))
      .handle("revokeApiKey", ({ path }) => withAccount((account) => operators.revokeApiKey(path.key_id, account.user.id)))
      .handle("listBrokers", ({ urlParams }) =>
        withAccount((account) =>
          Effect.map(operators.listBrokers(ownerOf(account, urlParams.mode)), (brokers) => ({
            items: brokers.map((broker) => new BrokerView(broker))
          }))
        ))
      .handle("createBroker", ({ payload }) =>
        withAccount((account) =>
          Effect.map(operators.createBroker(account.user.id, payload), (broker) => new BrokerView(broker))
        ).pipe(Effect.catchTag("UserNotFound", Effect.die)))
      .handle("replaceBrokerCredentials", ({ path, payload }) =>
        withAccount((account) =>
          Effect.map(
            operators.replaceBrokerCredentials(path.broker_id, payload, account.user.id),
            (broker) => new BrokerView(broker)
          )
        ))
      .handle("disconnectBroker", ({ path }) =>
        withAccount((account) => operators.disconnectBroker(account.user.id, path.broker_id)))
      .handle("listWebhookEndpoints", ({ urlParams }) =>
        withAccount((account) =>
          Effect.map(webhooks.listEndpointsOf(ownerOf(account, urlParams.mode)), (endpoints) => ({
            items: endpoints.map(({ endpoint, failingDeliveries }) =>
              new DashboardEndpoint({ ...endpointView(endpoint), failing_deliveries: failingDeliveries })
            )
          }))
        ))
      .handle("createWebhookEndpoint", ({ payload }) =>
        withAccount((account) =>
          Effect.map(
            webhooks.createEndpoint(account.user.id, payload),
            ({ endpoint, secret }) => new CreatedWebhookEndpoint({ ...endpointView(endpoint), secret })
          )
        ).pipe(Effect.catchTag("UserNotFound", Effect.die)))
      .handle("deleteWebhookEndpoint", ({ path }) =>
        withAccount((account) => webhooks.deleteEndpoint(path.endpoint_id, account.user.id)))
      .handle("rotateWebhookSecret", ({ path }) =>
        withAccount((account) =>
          Effect.map(
            webhooks.rotateSecret(account.user.id, path.endpoint_id),
            ({ endpoint, secret }) => new CreatedWebhookEndpoint({ ...endpointView(endpoint), secret })
          )
        ))
      .handle("disableWebhookEndpoint", ({ path }) =>
        withAccount((account) => Effect.map(webhooks.setEnabled(account.user.id, path.endpoint_id, false), endpointView)))
      .handle("enableWebhookEndpoint", ({ path }) =>
        withAccount((account) => Effect.map(webhooks.setEnabled(account.user.id, path.endpoint_id, true), endpointView)))
      .handle("sendTestEvent", ({ path }) =>
        withAccount((account) => webhooks.sendTestEvent(account.user.id, path.endpoint_id)))
      .handle("listDeliveries", ({ path, urlParams }) =>
        withAccount((account) =>
          Effect.map(
            webhooks.listDeliveries(path.endpoint_id, urlParams.limit ?? 100, account.user.id),
            (items) => ({ items })
          )
        ))
      .handle("resendDelivery", ({ path }) => withAccount((account) => webhooks.resend(path.delivery_id, account.user.id)))
      .handle("listIntents", ({ urlParams }) =>
        withAccount((account) => intentPage(intents, ownerOf(account, urlParams.mode), urlParams)))
      .handle("getIntent", ({ path, urlParams }) =>
        withAccount((account) => Effect.map(intents.getJson(ownerOf(account, urlParams.mode), { id: path.id }), jsonText)))
      .handle("intentEvents", ({ path, urlParams }) =>
        withAccount((account) =>
          Effect.map(events.timeline(ownerOf(account, urlParams.mode), path.id), (items) => new EventTimeline({ items }))
        ))
      .handle("cancelIntent", ({ path, urlParams }) =>
        withAccount((account) => intents.cancel(ownerOf(account, urlParams.mode), path.id)))
      .handle("streamEvents", ({ headers, urlParams }) =>
        withAccount((account) =>
          Effect.gen(function*() {
            const slot = `session:${account.sessionId}`
            if (!(yield* streams.admit(slot))) {
              yield* ResponseHeaders.retryAfter(5)
              return yield* new RateLimited({
                retry_after: 5,
                detail: `At most ${MAX_STREAMS_PER_KEY} event streams may be open at once per session`
              })
            }
            const after = Option.orElse(
              Option.fromNullable(headers["last-event-id"]),
              () => Option.fromNullable(urlParams.after)
            )
            const frames = streams.follow(ownerOf(account, urlParams.mode), after).pipe(
              Stream.tapErrorCause((cause) => Effect.logWarning("a dashboard event stream failed", cause)),
              Stream.ensuring(streams.release(slot))
            )
            return HttpServerResponse.stream(Stream.encodeText(frames), {
              contentType: "text/event-stream",
              headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
            })
          })
        ))
  }))
