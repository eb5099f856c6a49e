import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The statement that records a broker's word (orders and fills, `RoutingRepository`) no longer has
 * its intents' documents rebuilt by the triggers on `orders` and `fills`: the recording's next
 * statement, in the same transaction, writes each of those intents (its new status, or its
 * document alone), and the row trigger on `intents` builds the document once, orders and fills
 * included. Before, a recorded word built each document three times (once for the orders, once
 * for the fills, once for the status), a quarter of the database's CPU per routed intent.
 *
 * The recording's statement says so by setting `tir.documents_rebuilt_by` to its own
 * `statement_timestamp()`, for its transaction. The refresh triggers, which fire at the end of the
 * statement that wrote, skip only when the setting names that same statement; every other
 * statement writing orders or fills, in the same transaction or not, still refreshes them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION orders_refresh_documents() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('tir.documents_rebuilt_by', true) = statement_timestamp()::text THEN RETURN NULL; END IF;
      UPDATE intents SET document = NULL WHERE id IN (SELECT intent_id FROM changed_orders);
      RETURN NULL;
    END
    $$`)
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION fills_refresh_documents() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('tir.documents_rebuilt_by', true) = statement_timestamp()::text THEN RETURN NULL; END IF;
      UPDATE intents SET document = NULL
      WHERE id IN (SELECT o.intent_id FROM orders o JOIN changed_fills f ON f.order_id = o.id);
      RETURN NULL;
    END
    $$`)
})
