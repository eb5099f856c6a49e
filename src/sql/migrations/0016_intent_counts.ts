import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * How many intents each user has per mode and status, for a page's `total_items` without counting
 * the user's intents on every page.
 *
 * Triggers on `intents` add every change to the counts, in the transaction that makes it: exact
 * whoever writes. Inserts and deletes are counted per statement; an update that moves an intent to
 * another status, per row. Each database connection adds to rows of its own (`backend`, its server
 * process id), so that transactions of different connections never wait on each other for a
 * count, nor lock counts in opposite orders; a count is the sum of its rows. The rows of
 * connections that have ended are folded into `backend` 0 from time to time
 * (`IntentRepository.foldCounts`, hourly), so that their number stays small. Existing intents
 * are counted here, while the migrations' transaction holds off other writers of `intents` (the
 * triggers' creation locks the table).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE intent_counts (
      user_id uuid NOT NULL,
      mode text NOT NULL,
      status text NOT NULL,
      backend integer NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (user_id, mode, status, backend)
    )`
  // A statement trigger's function: the statement's changes, as (user, mode, status, change) rows,
  // added to this connection's counts.
  const statementCounter = (name: string, changes: string) =>
    sql.unsafe(`
      CREATE FUNCTION ${name}() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO intent_counts (user_id, mode, status, backend, n)
        SELECT user_id, mode, status, pg_backend_pid(), sum(change) FROM (${changes}) changes
        GROUP BY user_id, mode, status HAVING sum(change) <> 0
        ON CONFLICT (user_id, mode, status, backend) DO UPDATE SET n = intent_counts.n + EXCLUDED.n;
        RETURN NULL;
      END
      $$`)
  yield* statementCounter("intents_count_inserted", "SELECT user_id, mode, status, 1 AS change FROM inserted_intents")
  yield* statementCounter("intents_count_deleted", "SELECT user_id, mode, status, -1 AS change FROM deleted_intents")
  yield* sql.unsafe(`
    CREATE FUNCTION intents_count_moved() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO intent_counts (user_id, mode, status, backend, n)
      VALUES (OLD.user_id, OLD.mode, OLD.status, pg_backend_pid(), -1), (NEW.user_id, NEW.mode, NEW.status, pg_backend_pid(), 1)
      ON CONFLICT (user_id, mode, status, backend) DO UPDATE SET n = intent_counts.n + EXCLUDED.n;
      RETURN NULL;
    END
    $$`)
  yield* sql`
    CREATE TRIGGER intents_count_inserted AFTER INSERT ON intents
    REFERENCING NEW TABLE AS inserted_intents
    FOR EACH STATEMENT EXECUTE FUNCTION intents_count_inserted()`
  // A row trigger with a condition: the many updates that change no count (a document refreshed,
  // a cancel requested) cost no call, and no copy of the rows is kept for a statement trigger.
  yield* sql`
    CREATE TRIGGER intents_count_moved AFTER UPDATE ON intents
    FOR EACH ROW WHEN ((OLD.user_id, OLD.mode, OLD.status) IS DISTINCT FROM (NEW.user_id, NEW.mode, NEW.status))
    EXECUTE FUNCTION intents_count_moved()`
  yield* sql`
    CREATE TRIGGER intents_count_deleted AFTER DELETE ON intents
    REFERENCING OLD TABLE AS deleted_intents
    FOR EACH STATEMENT EXECUTE FUNCTION intents_count_deleted()`
  yield* sql`
    INSERT INTO intent_counts (user_id, mode, status, backend, n)
    SELECT user_id, mode, status, 0, count(*) FROM intents GROUP BY user_id, mode, status`
})
