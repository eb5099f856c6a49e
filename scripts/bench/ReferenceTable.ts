/**
 * The table the bench's reference servers write and read: the bare `node:http` + `pg` server
 * (Reference.ts) and the stack's floor (StackFloor.ts) each have one of this shape, so that both
 * do the same INSERT and the same SELECT by primary key on the same columns and indexes.
 */

/** The two references' tables. */
export const BARE_TABLE = "reference_intents"
export const FLOOR_TABLE = "floor_intents"

/** `CREATE TABLE IF NOT EXISTS <name>` with the reference columns. */
export const createTable = (name: string) => `
  CREATE TABLE IF NOT EXISTS ${name} (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    intent_id text NOT NULL UNIQUE,
    symbol text NOT NULL,
    side text NOT NULL,
    quantity numeric NOT NULL,
    order_type text NOT NULL,
    broker_id uuid NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    created_at timestamptz NOT NULL DEFAULT now()
  )`
