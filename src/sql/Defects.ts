import type * as SqlError from "@effect/sql/SqlError"
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"

/** What a statement can fail with that no caller can act on. */
export type StatementError = SqlError.SqlError | ParseResult.ParseError | Cause.NoSuchElementException

/**
 * A repository's edge: SQL errors, rows that do not decode and a `single` statement that returned
 * no row become defects (500s). Only those: a domain failure still reaches its caller.
 */
export const orDie = <A, E extends StatementError, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, never, R> =>
  Effect.orDie(effect)
