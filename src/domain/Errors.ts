import * as Schema from "effect/Schema"

/** A `detail` field whose constructor default is the error's fixed message. */
export const detail = (message: string) =>
  Schema.String.pipe(Schema.propertySignature, Schema.withConstructorDefault(() => message))

/** Annotates a schema with the rule a client reads in a 400's detail, after the field's name. */
export const rule = (message: string) => ({ message: () => ({ message, override: true }) })

/** The request is malformed: bad JSON, a missing field, a wrong type, an unknown field. */
export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  detail: Schema.String
}) {}

/** The request is well formed but breaks a rule of the resource (missing limit_price, …). */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", {
  detail: Schema.String
}) {}

export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  detail: detail("Internal server error")
}) {}

/** A dependency (the database) does not answer. */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  detail: detail("Service unavailable")
}) {}

/** The largest value an `integer` (int4) column holds: a larger integer is a 400, never a 500. */
export const MAX_INT4 = 2_147_483_647

/** A string without a NUL character, which no PostgreSQL text column can hold. */
export const NulFreeString = Schema.String.pipe(Schema.filter((s) => !s.includes("\u0000"))).annotations(
  rule("must not contain a NUL character")
)
