import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** Whether the service's dependencies answer: what `/healthz` reports. */
export class Health extends Context.Tag("Health")<Health, {
  readonly check: Effect.Effect<boolean>
}>() {
  /** The database answers a trivial query within two seconds. */
  static readonly layerSql = Layer.effect(
    this,
    Effect.map(SqlClient.SqlClient, (sql) => ({
      check: sql`SELECT 1`.pipe(Effect.timeout("2 seconds"), Effect.as(true), Effect.orElseSucceed(() => false))
    }))
  )

  static readonly layerInMemory = Layer.succeed(this, { check: Effect.succeed(true) })
}
