import type * as SqlClient from "@effect/sql/SqlClient"

/**
 * Put at the start of a statement's text, this comment has PostgreSQL prepare the statement once
 * per connection (a named statement) instead of parsing and planning it on every call: for the
 * hottest statements, a lookup's time in PostgreSQL fell by about two thirds. Only for statements
 * whose text never grows with their input (no `IN` lists, no multi-row `VALUES`), each of which
 * would be kept as a statement of its own on every connection. PGlite ignores it.
 *
 * Named statements need a session of their own, as `LISTEN` does: a pooler in front of
 * PostgreSQL must keep each connection's session (PgBouncer's session mode, or its transaction
 * mode from 1.21 with `max_prepared_statements` set).
 */
export const PREPARED = "/* prepared */"

/**
 * An integer that a prepared statement's plan should not depend on (a page's size or offset),
 * read through a sub-select. PostgreSQL keeps a prepared statement's generic plan only while it
 * looks no dearer than plans made for the values seen; seeing a `LIMIT 20`, it always judged a
 * fresh plan cheaper and planned the statement again on every call, which cost more than running
 * it. Through a sub-select no plan sees the value, and the prepared plan is kept.
 */
export const unplanned = (sql: SqlClient.SqlClient, value: number) => sql`(SELECT ${value}::int)`

/**
 * Ids for a prepared statement, as one `uuid[]` built from a single text parameter: `id =
 * ANY(...)` on it reads the primary key, and the statement's text stays the same however many ids
 * there are (an `IN` list or an array of parameters would make a statement of its own per count).
 */
export const uuidArray = (sql: SqlClient.SqlClient, ids: ReadonlyArray<string>) =>
  sql`string_to_array(${ids.join(",")}, ',')::uuid[]`
