import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import CreateAccounts from "./migrations/0001_create_accounts.js"
import CreateIntents from "./migrations/0002_create_intents.js"
import CreateRateLimits from "./migrations/0003_create_rate_limits.js"
import CreateRouting from "./migrations/0004_create_routing.js"
import CreateWebhooks from "./migrations/0005_create_webhooks.js"
import UnloggedRateLimits from "./migrations/0006_unlogged_rate_limits.js"
import RoutingJobVersions from "./migrations/0007_routing_job_versions.js"
import WebhookClaimIndexes from "./migrations/0008_webhook_claim_indexes.js"
import BrokerEnvironments from "./migrations/0009_broker_environments.js"
import EventFeed from "./migrations/0010_event_feed.js"
import DashboardLogins from "./migrations/0011_dashboard_logins.js"
import WebhookTestEvents from "./migrations/0012_webhook_test_events.js"
import MockPrices from "./migrations/0013_mock_prices.js"
import IntentDocument from "./migrations/0014_intent_document.js"
import StoredIntentDocuments from "./migrations/0015_stored_intent_documents.js"
import IntentCounts from "./migrations/0016_intent_counts.js"
import DocumentsRebuiltByRecording from "./migrations/0017_documents_rebuilt_by_recording.js"
import UsageWithinLimit from "./migrations/0018_usage_within_limit.js"
import OrderlessDocuments from "./migrations/0019_orderless_documents.js"
import WebhookClaimOrder from "./migrations/0020_webhook_claim_order.js"
import EventsWithoutOwnerIndex from "./migrations/0021_events_without_owner_index.js"
import WebhookDeliveriesWithoutDueIndex from "./migrations/0022_webhook_deliveries_without_due_index.js"
import IntentCountsPerStatement from "./migrations/0023_intent_counts_per_statement.js"
import DocumentsAroundWrittenOrders from "./migrations/0024_documents_around_written_orders.js"
import FillsWithoutOrderIndex from "./migrations/0025_fills_without_order_index.js"
import * as Tracing from "../Tracing.js"

/** Every migration by name, statically imported so that a bundled build finds them. */
export const records = {
  "0001_create_accounts": CreateAccounts,
  "0002_create_intents": CreateIntents,
  "0003_create_rate_limits": CreateRateLimits,
  "0004_create_routing": CreateRouting,
  "0005_create_webhooks": CreateWebhooks,
  "0006_unlogged_rate_limits": UnloggedRateLimits,
  "0007_routing_job_versions": RoutingJobVersions,
  "0008_webhook_claim_indexes": WebhookClaimIndexes,
  "0009_broker_environments": BrokerEnvironments,
  "0010_event_feed": EventFeed,
  "0011_dashboard_logins": DashboardLogins,
  "0012_webhook_test_events": WebhookTestEvents,
  "0013_mock_prices": MockPrices,
  "0014_intent_document": IntentDocument,
  "0015_stored_intent_documents": StoredIntentDocuments,
  "0016_intent_counts": IntentCounts,
  "0017_documents_rebuilt_by_recording": DocumentsRebuiltByRecording,
  "0018_usage_within_limit": UsageWithinLimit,
  "0019_orderless_documents": OrderlessDocuments,
  "0020_webhook_claim_order": WebhookClaimOrder,
  "0021_events_without_owner_index": EventsWithoutOwnerIndex,
  "0022_webhook_deliveries_without_due_index": WebhookDeliveriesWithoutDueIndex,
  "0023_intent_counts_per_statement": IntentCountsPerStatement,
  "0024_documents_around_written_orders": DocumentsAroundWrittenOrders,
  "0025_fills_without_order_index": FillsWithoutOrderIndex
}

export const loader = Migrator.fromRecord(records)

export const run = Migrator.make({})({ loader })

/** The key of the session-level advisory lock that instances migrate under (`tirm` in ASCII). */
export const LOCK_KEY = 0x7469726d

/**
 * `run` under a PostgreSQL advisory lock, held on a connection of its own until it is done: instances
 * starting together take turns. The Migrator locks its table, but creates that table unguarded
 * first, so on a fresh database all instances but one failed to start
 * (`duplicate key value violates unique constraint "pg_type_typname_nsp_index"`).
 * PostgreSQL only: PGlite is one connection, which the lock would hold from the migrations.
 */
export const runExclusive = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const connection = yield* sql.reserve
  yield* connection.executeRaw("SELECT pg_advisory_lock($1)", [LOCK_KEY])
  yield* Effect.addFinalizer(() =>
    Effect.ignoreLogged(connection.executeRaw("SELECT pg_advisory_unlock($1)", [LOCK_KEY]))
  )
  return yield* run
}).pipe(Effect.scoped)

const logged = <A, E, R>(migrations: Effect.Effect<A, E, R>) =>
  migrations.pipe(Tracing.span("Migrations.run"), Effect.annotateLogs({ service: "migrations" }))

/** Runs the migrations when built: provide it after the `SqlClient` and before anything that queries. */
export const layer = Layer.effectDiscard(logged(run))

/** `layer` for PostgreSQL, where several instances may start at once: they migrate one at a time. */
export const layerExclusive = Layer.effectDiscard(logged(runExclusive))
