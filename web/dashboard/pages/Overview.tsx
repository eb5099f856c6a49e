import { run } from "../api.js"
import { Badge, Empty, Link, Loaded, PageHeader } from "../components.js"
import { formatCount, humanize } from "../format.js"
import { useApp, useEvents, useLoad, useThrottledReload } from "../state.js"
import { IntentTable } from "./Intents.js"

export const OverviewPage = () => {
  const { mode } = useApp()
  const [overview, reload] = useLoad(() => run((client) => client.dashboard.overview({ urlParams: { mode } })), [mode])
  const refresh = useThrottledReload(reload)
  useEvents(refresh)
  return (
    <>
      <PageHeader
        title="Overview"
        description={mode === "test" ? "Your account's limits and your test activity." : "Your account's limits and your live activity."}
      />
      <Loaded load={overview} retry={reload}>
        {(overview) => {
          const used = overview.live_intents_this_month
          const quota = overview.intents_per_month
          const share = quota === 0 ? 0 : Math.min(100, Math.round((used / quota) * 100))
          return (
            <>
              <section class="cards" aria-label="Limits and usage">
                <div class="card">
                  <h2 class="card-label">Plan</h2>
                  <p class="card-value">{humanize(overview.tier)}</p>
                </div>
                <div class="card">
                  <h2 class="card-label">Requests per minute</h2>
                  <p class="card-value">{formatCount(overview.requests_per_minute)}</p>
                  <p class="hint">Per API key</p>
                </div>
                <div class="card card-wide">
                  <h2 class="card-label" id="quota-label">Live intents this month</h2>
                  <p class="card-value">
                    {formatCount(used)} <span class="card-of">of {formatCount(quota)}</span>
                  </p>
                  <meter
                    class="meter"
                    aria-labelledby="quota-label"
                    min={0}
                    max={quota}
                    low={quota * 0.8}
                    high={quota * 0.95}
                    optimum={0}
                    value={used}
                  >
                    {share}%
                  </meter>
                  <p class="hint">{share}% of the monthly quota used. Test intents are free.</p>
                </div>
              </section>
              <section class="section" aria-labelledby="recent-title">
                <div class="section-header">
                  <h2 id="recent-title">Recent intents</h2>
                  <Link to="/intents">View all intents</Link>
                </div>
                {overview.recent_intents.length === 0
                  ? (
                    <Empty>
                      No {mode} intents yet. Create one with a {mode} API key: <code>POST /api/v1/intents</code>.
                    </Empty>
                  )
                  : <IntentTable intents={overview.recent_intents} label="Recent intents" />}
              </section>
              <section class="section" aria-labelledby="failing-title">
                <div class="section-header">
                  <h2 id="failing-title">Webhook endpoints needing attention</h2>
                  <Link to="/webhooks">All endpoints</Link>
                </div>
                {overview.failing_endpoints.length === 0
                  ? <Empty>Every {mode} endpoint is delivering.</Empty>
                  : (
                    <ul class="list">
                      {overview.failing_endpoints.map((endpoint) => (
                        <li key={endpoint.id} class="list-item">
                          <Link to={`/webhooks/${endpoint.id}`} class="mono">{endpoint.url}</Link>
                          <span class="list-badges">
                            {endpoint.disabled_at !== null && <Badge tone="neutral">Disabled</Badge>}
                            {endpoint.failing_deliveries > 0 && (
                              <Badge tone="danger">
                                {endpoint.failing_deliveries} failing {endpoint.failing_deliveries === 1 ? "delivery" : "deliveries"}
                              </Badge>
                            )}
                          </span>
                        </li>
                      ))}
                    </ul>
                  )}
              </section>
            </>
          )
        }}
      </Loaded>
    </>
  )
}
