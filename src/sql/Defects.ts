import type * as SqlError from "@effect/sql/SqlError"
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"

/** What a statement can fail with that no caller can act on. */
export type StatementError = SqlError.SqlError | ParseResult.ParseError | Cause.NoSuchElementException

const statementTags: ReadonlySet<unknown> = new Set(["SqlError", "ParseError", "NoSuchElementException"])

const isStatementError = <E>(error: E): error is Extract<E, StatementError> =>
  typeof error === "object" && error !== null && "_tag" in error && statementTags.has(error._tag)

/**
 * A repository's edge: SQL errors, rows that do not decode and a `single` statement that returned
 * no row become defects (500s). Only those: a domain failure still reaches its caller.
 */
export const orDie = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, Extract<E, StatementError>>, R> =>
  Effect.catchIf(effect, isStatementError, Effect.die)
