import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { intentObject } from "../Outbox.js"

/**
 * `intent_document(intents)`: an intent with its orders and fills as the API's JSON, the same
 * document the outbox writes into events. PL/pgSQL keeps the plans of a function's queries per
 * connection, so a lookup or a page no longer has the whole document's query parsed and planned
 * each time (most of the database's work for a lookup), and sends a short statement.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION intent_document(i intents) RETURNS json
    LANGUAGE plpgsql STABLE AS $$
    BEGIN
      RETURN ${intentObject};
    END
    $$`)
})
