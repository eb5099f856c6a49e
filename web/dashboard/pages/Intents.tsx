import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { JSX } from "preact"
import { useEffect, useState } from "preact/hooks"
import { IntentId } from "../../../src/domain/Ids.js"
import { finalStatuses, IntentStatus, type Order, type TradeIntent } from "../../../src/domain/Intent.js"
import { doneOrProblem, run } from "../api.js"
import {
  Badge,
  ConfirmDialog,
  Empty,
  Fact,
  IntentStatusBadge,
  Link,
  Loaded,
  PageHeader,
  TableScroll,
  Time
} from "../components.js"
import { Field, InputField } from "../forms.js"
import { formatAmount, formatCount, humanize } from "../format.js"
import { navigate } from "../router.js"
import { useApp, useEvents, useLoad, useThrottledReload } from "../state.js"

const PAGE_SIZE = 20

const priceOf = (intent: TradeIntent) => {
  switch (intent.order_type) {
    case "market":
      return "Market"
    case "limit":
      return `Limit ${formatAmount(intent.limit_price ?? 0)}`
    case "stop":
      return `Stop ${formatAmount(intent.stop_price ?? 0)}`
    case "stop_limit":
      return `Stop ${formatAmount(intent.stop_price ?? 0)}, limit ${formatAmount(intent.limit_price ?? 0)}`
  }
}

export const IntentTable = (
  { intents, label, brokers }: {
    readonly intents: ReadonlyArray<TradeIntent>
    readonly label: string
    readonly brokers?: ReadonlyMap<string, string>
  }
) => (
  <TableScroll label={label}>
    <table class="table table-stack">
      <thead>
        <tr>
          <th scope="col">Intent</th>
          <th scope="col">Status</th>
          <th scope="col">Symbol</th>
          <th scope="col">Side</th>
          <th scope="col" class="num">Quantity</th>
          <th scope="col">Order</th>
          {brokers !== undefined && <th scope="col">Broker</th>}
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {intents.map((intent) => (
          <tr key={intent.id} data-intent={intent.id}>
            <td data-label="Intent">
              <Link to={`/intents/${intent.id}`} class="mono">{intent.intent_id}</Link>
            </td>
            <td data-label="Status">
              <IntentStatusBadge status={intent.status} />
            </td>
            <td data-label="Symbol" class="strong">{intent.symbol}</td>
            <td data-label="Side">
              <span class={`side side-${intent.side}`}>{humanize(intent.side)}</span>
            </td>
            <td data-label="Quantity" class="num">{formatAmount(intent.quantity)}</td>
            <td data-label="Order">{priceOf(intent)}</td>
            {brokers !== undefined && <td data-label="Broker">{brokers.get(intent.broker_id) ?? "Disconnected"}</td>}
            <td data-label="Created">
              <Time at={intent.created_at} compact />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </TableScroll>
)

const isStatus = Schema.is(IntentStatus)

const statuses: ReadonlyArray<IntentStatus> = ["pending", "partially_filled", "filled", "canceled", "rejected", "failed"]

interface Filters {
  readonly status: string
  readonly symbol: string
  readonly broker: string
  readonly page: number
}

const filtersOf = (query: URLSearchParams): Filters => {
  const page = Number(query.get("page") ?? "1")
  return {
    status: query.get("status") ?? "",
    symbol: query.get("symbol") ?? "",
    broker: query.get("broker_id") ?? "",
    page: Number.isInteger(page) && page >= 1 ? page : 1
  }
}

const queryOf = (filters: Filters) => {
  const query = new URLSearchParams()
  if (filters.status !== "") query.set("status", filters.status)
  if (filters.symbol.trim() !== "") query.set("symbol", filters.symbol.trim())
  if (filters.broker !== "") query.set("broker_id", filters.broker)
  if (filters.page > 1) query.set("page", String(filters.page))
  const text = query.toString()
  return text === "" ? "/intents" : `/intents?${text}`
}

export const IntentsPage = ({ query }: { readonly query: URLSearchParams }) => {
  const { mode } = useApp()
  const filters = filtersOf(query)
  const [draft, setDraft] = useState<Filters>(filters)
  useEffect(() => setDraft(filters), [filters.status, filters.symbol, filters.broker])
  const [page, reload] = useLoad(
    () =>
      run((client) =>
        Effect.all({
          intents: client.dashboard.listIntents({
            urlParams: {
              mode,
              page: filters.page,
              page_size: PAGE_SIZE,
              ...(isStatus(filters.status) ? { status: filters.status } : {}),
              ...(filters.symbol !== "" ? { symbol: filters.symbol } : {}),
              ...(filters.broker !== "" ? { broker_id: filters.broker } : {})
            }
          }),
          brokers: client.dashboard.listBrokers({ urlParams: { mode } })
        }, { concurrency: 2 })
      ),
    [mode, filters.status, filters.symbol, filters.broker, filters.page]
  )
  const refresh = useThrottledReload(reload)
  useEvents(refresh)
  const apply = (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault()
    navigate(queryOf({ ...draft, page: 1 }))
  }
  const filtered = filters.status !== "" || filters.symbol !== "" || filters.broker !== ""
  return (
    <>
      <PageHeader
        title="Intents"
        description={`Every ${mode} Trade Intent, newest first. The list follows new intents and status changes as they happen.`}
      />
      <form class="filters" onSubmit={apply} aria-label="Filter intents">
        <Field id="filter-status" label="Status">
          <select
            id="filter-status"
            class="input"
            value={draft.status}
            onChange={(event) => setDraft({ ...draft, status: event.currentTarget.value })}
          >
            <option value="">Any status</option>
            {statuses.map((status) => <option key={status} value={status}>{humanize(status)}</option>)}
          </select>
        </Field>
        <InputField
          id="filter-symbol"
          label="Symbol"
          type="search"
          placeholder="e.g. AAPL"
          value={draft.symbol}
          onValue={(symbol) => setDraft({ ...draft, symbol })}
        />
        <Field id="filter-broker" label="Broker">
          <select
            id="filter-broker"
            class="input"
            value={draft.broker}
            onChange={(event) => setDraft({ ...draft, broker: event.currentTarget.value })}
          >
            <option value="">Any broker</option>
            {page._tag === "Loaded" &&
              page.value.brokers.items.map((broker) => <option key={broker.id} value={broker.id}>{broker.name}</option>)}
          </select>
        </Field>
        <div class="filters-actions">
          <button type="submit" class="button button-primary">Apply filters</button>
          {filtered && (
            <button
              type="button"
              class="button"
              onClick={() => {
                setDraft({ status: "", symbol: "", broker: "", page: 1 })
                navigate("/intents")
              }}
            >
              Clear
            </button>
          )}
        </div>
      </form>
      <Loaded load={page} retry={reload}>
        {({ intents, brokers }) => {
          const names = new Map(brokers.items.map((broker) => [broker.id, broker.name]))
          return intents.items.length === 0
            ? (
              <Empty>
                {filtered || filters.page > 1
                  ? "No intents match these filters."
                  : `No ${mode} intents yet. Create one with a ${mode} API key: POST /api/v1/intents.`}
              </Empty>
            )
            : (
              <>
                <IntentTable intents={intents.items} label="Intents" brokers={names} />
                <nav class="pagination" aria-label="Pages of intents">
                  <span>
                    Page {formatCount(intents.page)} of {formatCount(Math.max(1, intents.total_pages))} ·{" "}
                    {formatCount(intents.total_items)} {intents.total_items === 1 ? "intent" : "intents"}
                  </span>
                  <span class="pagination-buttons">
                    <button
                      type="button"
                      class="button"
                      disabled={intents.page <= 1}
                      onClick={() => navigate(queryOf({ ...filters, page: intents.page - 1 }))}
                    >
                      Previous
                    </button>
                    <button
                      type="button"
                      class="button"
                      disabled={intents.page >= intents.total_pages}
                      onClick={() => navigate(queryOf({ ...filters, page: intents.page + 1 }))}
                    >
                      Next
                    </button>
                  </span>
                </nav>
              </>
            )
        }}
      </Loaded>
    </>
  )
}

const filledOf = (order: Order) => order.fills.reduce((sum, fill) => sum + fill.quantity, 0)

const averagePrice = (order: Order) => {
  const quantity = filledOf(order)
  return quantity === 0 ? null : order.fills.reduce((sum, fill) => sum + fill.quantity * fill.price, 0) / quantity
}

const orderTones = {
  new: "info",
  partially_filled: "warning",
  filled: "success",
  canceled: "neutral",
  expired: "neutral",
  rejected: "danger"
} as const

const OrderCard = ({ order }: { readonly order: Order }) => {
  const average = averagePrice(order)
  return (
    <article class="order" data-order={order.id}>
      <header class="order-header">
        <h3 class="order-title">
          Order <span class="mono">{order.broker_order_id}</span>
        </h3>
        <Badge tone={orderTones[order.status]}>{humanize(order.status)}</Badge>
      </header>
      <dl class="facts facts-inline">
        <div>
          <dt>Filled</dt>
          <dd>{formatAmount(filledOf(order))}</dd>
        </div>
        <div>
          <dt>Average price</dt>
          <dd>{average === null ? "—" : formatAmount(average)}</dd>
        </div>
        <div>
          <dt>Placed</dt>
          <dd>
            <Time at={order.created_at} />
          </dd>
        </div>
        <div>
          <dt>Updated</dt>
          <dd>
            <Time at={order.updated_at} />
          </dd>
        </div>
      </dl>
      {order.fills.length === 0
        ? <p class="muted">No fills yet.</p>
        : (
          <TableScroll label={`Fills of order ${order.broker_order_id}`}>
            <table class="table table-compact">
              <caption class="sr-only">Fills</caption>
              <thead>
                <tr>
                  <th scope="col" class="num">Quantity</th>
                  <th scope="col" class="num">Price</th>
                  <th scope="col">Filled at</th>
                </tr>
              </thead>
              <tbody>
                {order.fills.map((fill, n) => (
                  <tr key={n} class="fill">
                    <td class="num">{formatAmount(fill.quantity)}</td>
                    <td class="num">{formatAmount(fill.price)}</td>
                    <td>
                      <Time at={fill.filled_at} compact />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableScroll>
        )}
    </article>
  )
}

export const IntentPage = ({ id }: { readonly id: string }) => {
  const app = useApp()
  const { mode } = app
  const intentId = Schema.decodeUnknownOption(IntentId)(id)
  const [cancelOpen, setCancelOpen] = useState(false)
  const [detail, reload] = useLoad(
    () =>
      Option.match(intentId, {
        onNone: () => Promise.resolve(Either.left({ tag: "IntentNotFound", detail: "Trade Intent not found" })),
        onSome: (intentId) =>
          run((client) =>
            Effect.all({
              intent: client.dashboard.getIntent({ path: { id: intentId }, urlParams: { mode } }),
              timeline: client.dashboard.intentEvents({ path: { id: intentId }, urlParams: { mode } }),
              brokers: client.dashboard.listBrokers({ urlParams: { mode } })
            }, { concurrency: 3 })
          )
      }),
    [id, mode]
  )
  const refresh = useThrottledReload(reload, 100)
  useEvents((event) => {
    if (event.data.id === id) refresh()
  })
  const other = mode === "test" ? "live" : "test"
  if (detail._tag === "Failed" && detail.problem.tag === "IntentNotFound") {
    return (
      <>
        <PageHeader title="Intent not found" description={`There is no ${mode} intent with this id.`} />
        <div class="panel">
          <p>It may belong to {other} mode.</p>
          <div class="panel-actions">
            <button type="button" class="button" onClick={() => app.setMode(other)}>
              Switch to {other} mode
            </button>
            <Link to="/intents" class="button">All intents</Link>
          </div>
        </div>
      </>
    )
  }
  return (
    <Loaded load={detail} retry={reload}>
      {({ intent, timeline, brokers }) => (
        <>
          <p class="breadcrumb">
            <Link to="/intents">Intents</Link> <span aria-hidden="true">/</span> <span class="mono">{intent.intent_id}</span>
          </p>
          <PageHeader
            title={`${humanize(intent.side)} ${formatAmount(intent.quantity)} ${intent.symbol}`}
            description={
              <span class="intent-status-line" data-testid="intent-status">
                <IntentStatusBadge status={intent.status} />
                {intent.status_reason !== null && <span class="muted">{intent.status_reason}</span>}
              </span>
            }
            actions={!finalStatuses.has(intent.status) && (
              <button type="button" class="button button-danger" onClick={() => setCancelOpen(true)}>
                Cancel intent
              </button>
            )}
          />
          <section class="section" aria-labelledby="intent-facts-title">
            <h2 id="intent-facts-title">Details</h2>
            <dl class="facts">
              <Fact label="Your intent_id">
                <span class="mono">{intent.intent_id}</span>
              </Fact>
              <Fact label="Intent id">
                <span class="mono">{intent.id}</span>
              </Fact>
              <Fact label="Status">
                <IntentStatusBadge status={intent.status} />
              </Fact>
              <Fact label="Status reason">{intent.status_reason ?? "—"}</Fact>
              <Fact label="Symbol">{intent.symbol}</Fact>
              <Fact label="Side">{humanize(intent.side)}</Fact>
              <Fact label="Quantity">{formatAmount(intent.quantity)}</Fact>
              <Fact label="Order type">{humanize(intent.order_type)}</Fact>
              <Fact label="Limit price">{intent.limit_price === null ? "—" : formatAmount(intent.limit_price)}</Fact>
              <Fact label="Stop price">{intent.stop_price === null ? "—" : formatAmount(intent.stop_price)}</Fact>
              <Fact label="Time in force">{intent.time_in_force.toUpperCase()}</Fact>
              <Fact label="Extended hours">{intent.extended_hours ? "Yes" : "No"}</Fact>
              <Fact label="Broker connection">
                <span>
                  {brokers.items.find((broker) => broker.id === intent.broker_id)?.name ?? "Disconnected"}{" "}
                  <span class="mono muted">{intent.broker_id}</span>
                </span>
              </Fact>
              <Fact label="Created">
                <Time at={intent.created_at} />
              </Fact>
              <Fact label="Updated">
                <Time at={intent.updated_at} />
              </Fact>
            </dl>
          </section>
          <section class="section" aria-labelledby="orders-title">
            <h2 id="orders-title">Orders</h2>
            {intent.orders.length === 0
              ? <Empty>No order at the broker yet.</Empty>
              : intent.orders.map((order) => <OrderCard key={order.id} order={order} />)}
          </section>
          <section class="section" aria-labelledby="timeline-title">
            <h2 id="timeline-title">Timeline</h2>
            {timeline.items.length === 0
              ? <Empty>No events kept for this intent.</Empty>
              : (
                <ol class="timeline">
                  {timeline.items.map((event) => (
                    <li key={event.id} class="timeline-item" data-event-type={event.type}>
                      <span class="timeline-dot" aria-hidden="true" />
                      <div class="timeline-body">
                        <p class="timeline-title">
                          <span class="mono">{event.type}</span>
                          <IntentStatusBadge status={event.data.status} />
                        </p>
                        <p class="timeline-meta">
                          <Time at={event.created_at} /> · <span class="mono">{event.id}</span>
                        </p>
                      </div>
                    </li>
                  ))}
                </ol>
              )}
          </section>
          <ConfirmDialog
            open={cancelOpen}
            title="Cancel this intent?"
            confirmLabel="Cancel intent"
            cancelLabel="Keep it"
            danger
            onClose={() => setCancelOpen(false)}
            onConfirm={() =>
              doneOrProblem(
                run((client) => client.dashboard.cancelIntent({ path: { id: intent.id }, urlParams: { mode } })),
                (canceled) => {
                  app.announce(`Intent ${intent.intent_id} is ${humanize(canceled.status).toLowerCase()}`)
                  reload()
                }
              )}
          >
            <p>
              The cancel is sent to the broker. Fills made before it arrives are kept, and the order may fill first.
            </p>
          </ConfirmDialog>
        </>
      )}
    </Loaded>
  )
}
