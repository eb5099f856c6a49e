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
