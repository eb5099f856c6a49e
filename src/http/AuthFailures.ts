import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { decide, type RateDecision, rateWindow } from "../domain/Limits.js"

/** Failed authentications per client address, counted in this instance's memory. */
export interface AuthFailures {
  /** Counts one failure from `address`: allowed while within the limit of its one-minute window. */
  readonly fail: (address: string) => Effect.Effect<RateDecision>
  /** How many addresses are counted now. */
  readonly size: Effect.Effect<number>
}

export interface AuthFailuresOptions {
  readonly perMinute: number
  /** Addresses counted at most; past it, ended windows are dropped, then the oldest addresses. */
  readonly maxAddresses?: number | undefined
}

/**
 * Counts failures in fixed one-minute windows, per address, with no query: a flood of bad
 * credentials costs memory only, and bounded. The first failure of a new window drops the
 * addresses whose window has ended (no timer: a map that takes no failures does not grow).
 */
export const make = (options: AuthFailuresOptions): Effect.Effect<AuthFailures> =>
  Effect.sync(() => {
    const maxAddresses = options.maxAddresses ?? 100_000
    // Mutated in place: a flood must not copy the map on every failure. Insertion order is the
    // order windows started, since an address is re-inserted when its new window starts.
    const windows = new Map<string, { readonly start: number; readonly count: number }>()
    let swept = 0

    const dropEnded = (currentStart: number) => {
      for (const [address, window] of windows) if (window.start < currentStart) windows.delete(address)
    }

    const fail = (address: string) =>
      Effect.flatMap(DateTime.now, (now) =>
        Effect.sync(() => {
          const { start } = rateWindow(now)
          if (start > swept) {
            dropEnded(start)
            swept = start
          }
          const current = windows.get(address)
          if (current !== undefined && current.start === start) {
            windows.set(address, { start, count: current.count + 1 })
            return decide(options.perMinute, current.count + 1, now)
          }
          windows.delete(address)
          for (const oldest of windows.keys()) {
            if (windows.size < maxAddresses) break
            windows.delete(oldest)
          }
          windows.set(address, { start, count: 1 })
          return decide(options.perMinute, 1, now)
        }))

    return { fail, size: Effect.sync(() => windows.size) }
  })
