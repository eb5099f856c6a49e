import * as Schema from "effect/Schema"
import { BrokerId, IntentId, Mode, OrderId, UserId } from "../domain/Ids.js"
import { IntentStatus, OrderStatus, OrderType, Side, TimeInForce } from "../domain/Intent.js"

/** The SQL types the row definitions use. */
export type SqlType = "uuid" | "text" | "numeric" | "boolean" | "int" | "date" | "timestamptz"

/** A table's row: its schema and each column's SQL type, from which column lists are rendered. */
export interface Table<F extends Schema.Struct.Fields> {
  readonly name: string
  readonly row: Schema.Struct<F>
  readonly types: Types<F>
}

const table = <F extends Schema.Struct.Fields>(
  name: string,
  fields: F,
  types: Types<F>
): Table<F> => ({ name, row: Schema.Struct(fields), types })

type Column<F extends Schema.Struct.Fields> = keyof F & string

/** SQL types for the columns of a row schema. */
export type Types<F extends Schema.Struct.Fields> = { readonly [K in keyof F]: SqlType }

/** The columns of a row schema, in its order. */
export const columnsOf = <F extends Schema.Struct.Fields>(row: Schema.Struct<F>): ReadonlyArray<Column<F>> =>
  Object.keys(row.fields).filter((key): key is Column<F> => Object.hasOwn(row.fields, key))

/** `a, b, c`: the columns of a row schema, each prefixed with `alias.` when an alias is given. */
export const columnList = <F extends Schema.Struct.Fields>(row: Schema.Struct<F>, alias?: string): string =>
  columnsOf(row).map((column) => alias === undefined ? column : `${alias}.${column}`).join(", ")

/** `a uuid, b text, …`: the column definitions of a `json_to_recordset(…) AS x(…)` that yields `row`. */
export const recordsetTypes = <F extends Schema.Struct.Fields>(row: Schema.Struct<F>, types: Types<F>): string =>
  columnsOf(row).map((column) => `${column} ${types[column]}`).join(", ")

/** `'a', x.a, …` for a `json_build_object` that `row` decodes: numerics as text. */
export const rowFields = <F extends Schema.Struct.Fields>(row: Schema.Struct<F>, types: Types<F>, alias: string): string =>
  columnsOf(row).map((column) => `'${column}', ${alias}.${column}${types[column] === "numeric" ? "::text" : ""}`)
    .join(", ")

const Amount = Schema.NumberFromString
const Timestamp = Schema.DateTimeUtcFromDate

/** A row of `intents`. */
export const Intents = table("intents", {
  id: IntentId,
  user_id: UserId,
  mode: Mode,
  intent_id: Schema.String,
  symbol: Schema.String,
  side: Side,
  quantity: Amount,
  order_type: OrderType,
  limit_price: Schema.NullOr(Amount),
  stop_price: Schema.NullOr(Amount),
  time_in_force: TimeInForce,
  extended_hours: Schema.Boolean,
  status: IntentStatus,
  status_reason: Schema.NullOr(Schema.String),
  broker_id: BrokerId,
  cancel_requested_at: Schema.NullOr(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp
}, {
  id: "uuid",
  user_id: "uuid",
  mode: "text",
  intent_id: "text",
  symbol: "text",
  side: "text",
  quantity: "numeric",
  order_type: "text",
  limit_price: "numeric",
  stop_price: "numeric",
  time_in_force: "text",
  extended_hours: "boolean",
  status: "text",
  status_reason: "text",
  broker_id: "uuid",
  cancel_requested_at: "timestamptz",
  created_at: "timestamptz",
  updated_at: "timestamptz"
})

/** A row of `orders`. */
export const Orders = table("orders", {
  id: OrderId,
  intent_id: IntentId,
  client_order_id: Schema.String,
  broker_order_id: Schema.String,
  status: OrderStatus,
  created_at: Timestamp,
  updated_at: Timestamp
}, {
  id: "uuid",
  intent_id: "uuid",
  client_order_id: "text",
  broker_order_id: "text",
  status: "text",
  created_at: "timestamptz",
  updated_at: "timestamptz"
})

/** A row of `fills`. */
export const Fills = table("fills", {
  id: Schema.String,
  order_id: OrderId,
  broker_fill_id: Schema.String,
  quantity: Amount,
  price: Amount,
  filled_at: Timestamp
}, {
  id: "uuid",
  order_id: "uuid",
  broker_fill_id: "text",
  quantity: "numeric",
  price: "numeric",
  filled_at: "timestamptz"
})

/** A row of `routing_jobs`: `claims` and `version` fence a worker that lost its lease or whose job was enqueued again. */
export const RoutingJobs = table("routing_jobs", {
  intent_id: IntentId,
  kind: Schema.Literal("submit", "cancel", "sync"),
  run_at: Timestamp,
  locked_until: Schema.NullOr(Timestamp),
  claims: Schema.Int,
  version: Schema.Int,
  created_at: Timestamp
}, {
  intent_id: "uuid",
  kind: "text",
  run_at: "timestamptz",
  locked_until: "timestamptz",
  claims: "int",
  version: "int",
  created_at: "timestamptz"
})

/** The columns of `table` that `view` (a schema of the API) shows, in the view's order. */
export const shownColumns = <F extends Schema.Struct.Fields>(
  table: Table<F>,
  view: Schema.Struct.Fields
): ReadonlyArray<Column<F>> => Object.keys(view).filter((key): key is Column<F> => Object.hasOwn(table.types, key))
