import * as Migrator from "@effect/sql/Migrator"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import CreateAccounts from "./migrations/0001_create_accounts.js"
import CreateIntents from "./migrations/0002_create_intents.js"
import CreateRateLimits from "./migrations/0003_create_rate_limits.js"
import CreateRouting from "./migrations/0004_create_routing.js"
import CreateWebhooks from "./migrations/0005_create_webhooks.js"
import UnloggedRateLimits from "./migrations/0006_unlogged_rate_limits.js"

/** Every migration, statically imported so that a bundled build finds them. */
export const loader = Migrator.fromRecord({
  "0001_create_accounts": CreateAccounts,
  "0002_create_intents": CreateIntents,
  "0003_create_rate_limits": CreateRateLimits,
  "0004_create_routing": CreateRouting,
  "0005_create_webhooks": CreateWebhooks,
  "0006_unlogged_rate_limits": UnloggedRateLimits
})

export const run = Migrator.make({})({ loader })

/** Runs the migrations when built: provide it after the `SqlClient` and before anything that queries. */
export const layer = Layer.effectDiscard(
  run.pipe(Effect.withSpan("Migrations.run"), Effect.annotateLogs({ service: "migrations" }))
)
