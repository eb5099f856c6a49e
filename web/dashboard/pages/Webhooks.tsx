import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { useEffect, useState } from "preact/hooks"
import type { CreatedWebhookEndpoint, WebhookEndpointView } from "../../../src/api/AdminApi.js"
import type { DashboardEndpoint } from "../../../src/api/DashboardApi.js"
import { type Mode, WebhookEndpointId } from "../../../src/domain/Ids.js"
import { allEventTypes, type Delivery, type DeliveryStatus, type EventType } from "../../../src/domain/Webhook.js"
import { doneOrProblem, type Problem, run } from "../api.js"
import {
  Badge,
  ConfirmDialog,
  Empty,
  Fact,
  FormDialog,
  ItemsTable,
  Link,
  Loaded,
  PageHeader,
  SecretPanel,
  TableScroll,
  Time,
  type Tone
} from "../components.js"
import { FormError, InputField, useSubmit } from "../forms.js"
import { humanize } from "../format.js"
import { navigate } from "../router.js"
import { useApp, useEvents, useLoad, useThrottledReload } from "../state.js"

const EndpointStatus = ({ endpoint }: { readonly endpoint: WebhookEndpointView }) =>
  endpoint.disabled_at === null ? <Badge tone="success">Enabled</Badge> : <Badge tone="neutral">Disabled</Badge>

const FailingBadge = ({ count }: { readonly count: number }) =>
  count === 0
    ? <span class="muted">None</span>
    : <Badge tone="danger">{count} failing {count === 1 ? "delivery" : "deliveries"}</Badge>

const EventList = ({ events }: { readonly events: ReadonlyArray<EventType> }) =>
  events.length === allEventTypes.length
    ? <span>All events</span>
    : (
      <ul class="chips">
        {events.map((type) => <li key={type} class="chip">{type}</li>)}
      </ul>
    )

const AddEndpointDialog = (
  { open, onClose, onCreated }: {
    readonly open: boolean
    readonly onClose: () => void
    readonly onCreated: (endpoint: CreatedWebhookEndpoint) => void
  }
) => {
  const { mode } = useApp()
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState<ReadonlyArray<EventType>>(allEventTypes)
  const toggle = (type: EventType, on: boolean) =>
    setEvents(allEventTypes.filter((t) => (t === type ? on : events.includes(t))))
  const form = useSubmit(
    () =>
      events.length === 0
        ? { tag: "Form", detail: "Choose at least one event type." }
        : run((client) => client.dashboard.createWebhookEndpoint({ payload: { url: url.trim(), mode, events } })),
    (endpoint) => {
      setUrl("")
      setEvents(allEventTypes)
      onCreated(endpoint)
    }
  )
  return (
    <FormDialog
      open={open}
      title={`Add a ${mode} webhook endpoint`}
      onClose={onClose}
      form={form}
      submitLabel="Add endpoint"
      busyLabel="Adding…"
    >
      <InputField
        id="endpoint-url"
        label="Endpoint URL"
        mono
        type="url"
        required
        maxLength={2048}
        autoFocus
        placeholder={mode === "test" ? "http://127.0.0.1:4000/hooks" : "https://example.com/hooks"}
        hint={mode === "test"
          ? "Any http or https URL: a receiver on your own machine works in test mode."
          : "An https URL on the public internet."}
        value={url}
        onValue={setUrl}
      />
      <fieldset class="fieldset">
        <legend class="label">Events to send</legend>
        <div class="checks-grid">
          {allEventTypes.map((type) => (
            <label class="check" key={type}>
              <input
                type="checkbox"
                checked={events.includes(type)}
                onChange={(event) => toggle(type, event.currentTarget.checked)}
              />
              <span class="mono">{type}</span>
            </label>
          ))}
        </div>
      </fieldset>
    </FormDialog>
  )
}

const secretNotice = (
  <p class="hint">
    Verify each delivery's <code>sr-signature</code> header with it (HMAC-SHA256 of{" "}
    <code>{"<sr-timestamp>.<raw body>"}</code>); the receiver helper <code>trade-intent-router/receiver</code> does it.
  </p>
)

export const WebhooksPage = () => {
  const app = useApp()
  const { mode } = app
  const [endpoints, reload] = useLoad(
    () => run((client) => client.dashboard.listWebhookEndpoints({ urlParams: { mode } })),
    [mode]
  )
  const [adding, setAdding] = useState(false)
  const [created, setCreated] = useState<CreatedWebhookEndpoint | null>(null)
  return (
    <>
      <PageHeader
        title="Webhooks"
        description={`Where your systems hear about your ${mode} intents: each event is POSTed, signed, and retried until answered with a 2xx.`}
        actions={
          <button type="button" class="button button-primary" onClick={() => setAdding(true)}>
            Add endpoint
          </button>
        }
      />
      {created !== null && created.mode === mode && (
        <SecretPanel
          title={`Signing secret of ${created.url}`}
          label="Signing secret"
          value={created.secret}
          onDone={() => setCreated(null)}
        >
          {secretNotice}
        </SecretPanel>
      )}
      <ItemsTable
        load={endpoints}
        retry={reload}
        label="Webhook endpoints"
        columns={["URL", "Status", "Failing", "Events", "Created"]}
        actions
        empty={<>No {mode} endpoints yet.</>}
        row={(endpoint: DashboardEndpoint) => (
          <tr key={endpoint.id} data-endpoint={endpoint.id}>
            <td data-label="URL" class="mono wrap">
              <Link to={`/webhooks/${endpoint.id}`}>{endpoint.url}</Link>
            </td>
            <td data-label="Status">
              <EndpointStatus endpoint={endpoint} />
            </td>
            <td data-label="Failing">
              <FailingBadge count={endpoint.failing_deliveries} />
            </td>
            <td data-label="Events">
              <EventList events={endpoint.events} />
            </td>
            <td data-label="Created">
              <Time at={endpoint.created_at} compact />
            </td>
            <td class="actions">
              <Link to={`/webhooks/${endpoint.id}`} class="button button-small">
                Manage<span class="sr-only"> {endpoint.url}</span>
              </Link>
            </td>
          </tr>
        )}
      />
      <AddEndpointDialog
        open={adding}
        onClose={() => setAdding(false)}
        onCreated={(endpoint) => {
          setAdding(false)
          setCreated(endpoint)
          app.announce(`Endpoint added. Copy its signing secret now: it will not be shown again.`)
          reload()
        }}
      />
    </>
  )
}

const deliveryTones: Record<DeliveryStatus, Tone> = { pending: "info", succeeded: "success", failed: "danger" }

const DeliveryRow = (
  { delivery, onResend }: { readonly delivery: Delivery; readonly onResend: (delivery: Delivery) => void }
) => (
  <>
    <tr data-delivery={delivery.id}>
      <td data-label="Type" class="mono">{delivery.type}</td>
      <td data-label="Status">
        <Badge tone={deliveryTones[delivery.status]}>{humanize(delivery.status)}</Badge>
      </td>
      <td data-label="Attempts" class="num">{delivery.attempts}</td>
      <td data-label="Last status" class="num">{delivery.last_status_code ?? <span class="muted">—</span>}</td>
      <td data-label="Next attempt">{delivery.next_attempt_at === null ? <span class="muted">—</span> : <Time at={delivery.next_attempt_at} compact />}</td>
      <td data-label="Created">
        <Time at={delivery.created_at} compact />
      </td>
      <td data-label="Event" class="mono">{delivery.event_id}</td>
      <td class="actions">
        <button
          type="button"
          class="button button-small"
          aria-label={`Resend event ${delivery.event_id}`}
          onClick={() => onResend(delivery)}
        >
          Resend
        </button>
      </td>
    </tr>
    {delivery.history.length > 0 && (
      <tr class="attempts-row">
        <td colSpan={8}>
          <details class="attempts">
            <summary>
              {delivery.history.length} {delivery.history.length === 1 ? "attempt" : "attempts"}
              <span class="sr-only"> of {delivery.event_id}</span>
            </summary>
            <table class="table table-compact">
              <thead>
                <tr>
                  <th scope="col">Attempted</th>
                  <th scope="col" class="num">Status code</th>
                  <th scope="col">Error</th>
                  <th scope="col" class="num">Duration</th>
                </tr>
              </thead>
              <tbody>
                {delivery.history.map((attempt, n) => (
                  <tr key={n}>
                    <td>
                      <Time at={attempt.attempted_at} compact />
                    </td>
                    <td class="num">{attempt.status_code ?? <span class="muted">—</span>}</td>
                    <td class="wrap">{attempt.error ?? <span class="muted">—</span>}</td>
                    <td class="num">{attempt.duration_ms} ms</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </details>
        </td>
      </tr>
    )}
  </>
)

const EndpointNotFound = ({ mode }: { readonly mode: Mode }) => (
  <>
    <PageHeader title="Endpoint not found" description={`There is no ${mode} endpoint with this id.`} />
    <Link to="/webhooks">All endpoints</Link>
  </>
)

type Confirming = "rotate" | "delete" | "disable" | null

export const WebhookEndpointPage = ({ id }: { readonly id: string }) => {
  const app = useApp()
  const { mode } = app
  const endpointId = Schema.decodeUnknownOption(WebhookEndpointId)(id)
  const [data, reload] = useLoad(
    () =>
      Option.match(endpointId, {
        onNone: () => Promise.resolve(Either.left({ tag: "WebhookEndpointNotFound", detail: "Webhook endpoint not found" })),
        onSome: (endpointId) =>
          run((client) =>
            Effect.all({
              endpoints: client.dashboard.listWebhookEndpoints({ urlParams: { mode } }),
              deliveries: client.dashboard.listDeliveries({ path: { endpoint_id: endpointId }, urlParams: {} })
            }, { concurrency: 2 })
          )
      }),
    [id, mode]
  )
  const [confirming, setConfirming] = useState<Confirming>(null)
  const [secret, setSecret] = useState<CreatedWebhookEndpoint | null>(null)
  const [problem, setProblem] = useState<Problem | null>(null)
  const [busy, setBusy] = useState(false)
  const refresh = useThrottledReload(reload, 500)
  useEvents(refresh)
  const pending = data._tag === "Loaded" && data.value.deliveries.items.some((delivery) => delivery.status === "pending")
  useEffect(() => {
    if (!pending) return
    const timer = setInterval(reload, 3000)
    return () => clearInterval(timer)
  }, [pending])

  const act = async (f: () => Promise<Either.Either<unknown, Problem>>, done: string) => {
    setBusy(true)
    setProblem(null)
    const result = await f()
    setBusy(false)
    if (Either.isLeft(result)) {
      setProblem(result.left)
      return result.left
    }
    app.announce(done)
    reload()
    return null
  }

  if (data._tag === "Failed" && data.problem.tag === "WebhookEndpointNotFound") {
    return <EndpointNotFound mode={mode} />
  }
  return (
    <Loaded load={data} retry={reload}>
      {({ endpoints, deliveries }) => {
        const endpoint = endpoints.items.find((item) => item.id === id)
        if (endpoint === undefined) {
          return <EndpointNotFound mode={mode} />
        }
        const disabled = endpoint.disabled_at !== null
        return (
          <>
            <p class="breadcrumb">
              <Link to="/webhooks">Webhooks</Link> <span aria-hidden="true">/</span> Endpoint
            </p>
            <PageHeader title="Webhook endpoint" description={<span class="mono wrap">{endpoint.url}</span>} />
            <div class="toolbar" role="group" aria-label="Endpoint actions">
              <button
                type="button"
                class="button"
                disabled={busy || disabled}
                onClick={() =>
                  act(
                    () => run((client) => client.dashboard.sendTestEvent({ path: { endpoint_id: endpoint.id } })),
                    "Test event sent"
                  )}
              >
                Send test event
              </button>
              <button type="button" class="button" disabled={busy} onClick={() => setConfirming("rotate")}>
                Rotate secret
              </button>
              {disabled
                ? (
                  <button
                    type="button"
                    class="button"
                    disabled={busy}
                    onClick={() =>
                      act(
                        () => run((client) => client.dashboard.enableWebhookEndpoint({ path: { endpoint_id: endpoint.id } })),
                        "Endpoint enabled"
                      )}
                  >
                    Enable
                  </button>
                )
                : (
                  <button type="button" class="button" disabled={busy} onClick={() => setConfirming("disable")}>
                    Disable
                  </button>
                )}
              <button type="button" class="button button-danger-outline" disabled={busy} onClick={() => setConfirming("delete")}>
                Delete
              </button>
            </div>
            <FormError problem={problem} />
            {secret !== null && (
              <SecretPanel
                title="New signing secret"
                label="Signing secret"
                value={secret.secret}
                onDone={() => setSecret(null)}
              >
                <p class="hint">The old secret no longer signs deliveries: update your receiver now.</p>
                {secretNotice}
              </SecretPanel>
            )}
            <section class="section" aria-labelledby="endpoint-facts">
              <h2 id="endpoint-facts">Details</h2>
              <dl class="facts">
                <Fact label="Status">
                  <EndpointStatus endpoint={endpoint} />
                </Fact>
                <Fact label="Failing deliveries (7 days)">
                  <FailingBadge count={endpoint.failing_deliveries} />
                </Fact>
                <Fact label="Events">
                  <EventList events={endpoint.events} />
                </Fact>
                <Fact label="Created">
                  <Time at={endpoint.created_at} />
                </Fact>
              </dl>
            </section>
            <section class="section" aria-labelledby="deliveries-title">
              <div class="section-header">
                <h2 id="deliveries-title">Deliveries</h2>
                <button type="button" class="button button-small" onClick={reload}>Refresh</button>
              </div>
              {deliveries.items.length === 0
                ? <Empty>Nothing delivered yet. Send a test event to try the endpoint.</Empty>
                : (
                  <TableScroll label="Deliveries">
                    <table class="table table-stack">
                      <thead>
                        <tr>
                          <th scope="col">Type</th>
                          <th scope="col">Status</th>
                          <th scope="col" class="num">Attempts</th>
                          <th scope="col" class="num">Last status</th>
                          <th scope="col">Next attempt</th>
                          <th scope="col">Created</th>
                          <th scope="col">Event</th>
                          <th scope="col"><span class="sr-only">Actions</span></th>
                        </tr>
                      </thead>
                      <tbody>
                        {deliveries.items.map((delivery) => (
                          <DeliveryRow
                            key={delivery.id}
                            delivery={delivery}
                            onResend={(delivery) =>
                              act(
                                () => run((client) => client.dashboard.resendDelivery({ path: { delivery_id: delivery.id } })),
                                `Event ${delivery.event_id} queued for delivery again`
                              )}
                          />
                        ))}
                      </tbody>
                    </table>
                  </TableScroll>
                )}
            </section>
            <ConfirmDialog
              open={confirming === "rotate"}
              title="Rotate the signing secret?"
              confirmLabel="Rotate secret"
              onClose={() => setConfirming(null)}
              onConfirm={() =>
                doneOrProblem(
                  run((client) => client.dashboard.rotateWebhookSecret({ path: { endpoint_id: endpoint.id } })),
                  (rotated) => {
                    setSecret(rotated)
                    app.announce("Secret rotated. Copy the new one now: it will not be shown again.")
                    reload()
                  }
                )}
            >
              <p>The current secret stops signing at once: deliveries fail verification until your receiver has the new one.</p>
            </ConfirmDialog>
            <ConfirmDialog
              open={confirming === "disable"}
              title="Disable this endpoint?"
              confirmLabel="Disable"
              onClose={() => setConfirming(null)}
              onConfirm={() =>
                act(
                  () => run((client) => client.dashboard.disableWebhookEndpoint({ path: { endpoint_id: endpoint.id } })),
                  "Endpoint disabled"
                )}
            >
              <p>Nothing is sent to it while it is disabled. Enable it again at any time.</p>
            </ConfirmDialog>
            <ConfirmDialog
              open={confirming === "delete"}
              title="Delete this endpoint?"
              confirmLabel="Delete endpoint"
              danger
              onClose={() => setConfirming(null)}
              onConfirm={() =>
                doneOrProblem(
                  run((client) => client.dashboard.deleteWebhookEndpoint({ path: { endpoint_id: endpoint.id } })),
                  () => {
                    app.announce("Endpoint deleted")
                    navigate("/webhooks")
                  }
                )}
            >
              <p>Its pending deliveries are dropped and it receives nothing more. This cannot be undone.</p>
            </ConfirmDialog>
          </>
        )
      }}
    </Loaded>
  )
}
