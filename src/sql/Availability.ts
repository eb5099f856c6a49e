import { SqlError } from "@effect/sql/SqlError"

/** Socket errors of a database that is down, restarting or unreachable. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENOTFOUND", "EAI_AGAIN"])

/**
 * SQLSTATEs of a server that cannot serve now: class 08 (connection exceptions), shutting down or
 * starting up (57P01 to 57P03), out of connections (53300).
 */
const isUnavailableState = (code: string) =>
  code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300"

/** What the `pg` driver says, without a code, about a connection that went away under it. */
const LOST_CONNECTION = /Connection terminated|connection error and is not queryable|timeout exceeded when trying to connect/i

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

const describesLostConnection = (error: unknown) => error instanceof Error && LOST_CONNECTION.test(error.message)

/**
 * Whether `error` says the database could not be reached (as opposed to refusing a statement): the
 * request may succeed when retried a moment later, so clients get 503 rather than 500.
 */
export const isDatabaseUnavailable = (error: unknown): boolean => {
  if (!(error instanceof SqlError)) return false
  const cause = error.cause
  const code = codeOf(cause)
  if (code !== undefined) return NETWORK_CODES.has(code) || isUnavailableState(code)
  return describesLostConnection(cause) || error.message === "Failed to acquire connection" ||
    error.message === "Connection error"
}
