import * as DateTime from "effect/DateTime"

const WINDOW_SECONDS = 60

/** The fixed one-minute window that `now` falls in, as Unix seconds. */
export const rateWindow = (now: DateTime.Utc) => {
  const seconds = Math.floor(DateTime.toEpochMillis(now) / 1000)
  const start = seconds - (seconds % WINDOW_SECONDS)
  return { start, reset: start + WINDOW_SECONDS, retryAfter: Math.max(1, start + WINDOW_SECONDS - seconds) }
}

export interface RateDecision {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  /** Unix seconds when the window resets. */
  readonly reset: number
  /** Seconds until then, 1 to 60. */
  readonly retryAfter: number
}

export const decide = (limit: number, count: number, now: DateTime.Utc): RateDecision => {
  const window = rateWindow(now)
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    reset: window.reset,
    retryAfter: window.retryAfter
  }
}

/** The UTC calendar month of `now`: its first day and the seconds left until the next one. */
export const monthlyPeriod = (now: DateTime.Utc) => {
  const date = DateTime.toDateUtc(now)
  const year = date.getUTCFullYear()
  const month = date.getUTCMonth()
  const next = Date.UTC(year, month + 1, 1)
  return {
    period: `${year}-${String(month + 1).padStart(2, "0")}-01`,
    retryAfter: Math.max(1, Math.ceil((next - date.getTime()) / 1000))
  }
}

/** The most requests one instance takes from a key's shared count at once. */
const MAX_LEASE = 1_000

/**
 * How many requests an instance takes at once from a key's shared per-minute count (`counted` so
 * far, as it last saw it): 2% of the limit, at most a quarter of what is left and at most 1,000,
 * and at least 1. A free key (60 a minute) is counted one request at a time, exactly; a key
 * allowed thousands a minute costs one round trip per lease, not per request. What an instance
 * holds unused when the key stops reaching it is refused elsewhere until the window ends: at most
 * a lease and a half per other instance (the half left of its lease, and the next one, which is
 * taken ahead once half of a lease is used), never more than the limit admitted in all.
 */
export const leaseSize = (limit: number, counted: number) =>
  Math.max(1, Math.min(MAX_LEASE, Math.floor(limit / 50), Math.floor((limit - counted) / 4)))

/** What a lease of `size` got, the shared count being `total` once bumped by it: none once the limit is reached. */
export const granted = (limit: number, size: number, total: number) => Math.max(0, Math.min(size, limit - (total - size)))
