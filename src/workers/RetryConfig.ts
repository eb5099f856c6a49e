import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"

const MILLIS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

/** `1s,5s,30s` → durations; units ms, s, m, h. */
export const parseDelays = (text: string): Either.Either<ReadonlyArray<Duration.Duration>, string> => {
  const delays: Array<Duration.Duration> = []
  for (const part of text.split(",").map((p) => p.trim())) {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(part)
    const unit = match?.[2] === undefined ? undefined : MILLIS[match[2]]
    if (match === null || unit === undefined) return Either.left(`"${part}" is not a delay like 500ms, 5s, 30m or 2h`)
    delays.push(Duration.millis(Number(match[1]) * unit))
  }
  return Either.right(delays)
}

/** A comma-separated list of delays, e.g. `ROUTING_RETRY_SCHEDULE=1s,5s,30s`. */
export const delays = (name: string, fallback: string) =>
  Config.string(name).pipe(
    Config.withDefault(fallback),
    Config.mapOrFail((text) => Either.mapLeft(parseDelays(text), (message) => ConfigError.InvalidData([name], message)))
  )

/** Retry delays as an Effect `Schedule` whose output is the (jittered) delay before each retry. */
export const retrySchedule = (delays: ReadonlyArray<Duration.Duration>): Schedule.Schedule<Duration.Duration> => {
  const [first, ...rest] = delays
  return first === undefined ? Schedule.stop.pipe(Schedule.as(Duration.zero)) : Schedule.delays(Schedule.jittered(Schedule.fromDelays(first, ...rest)))
}

/**
 * The delay a schedule prescribes after the `failures`-th failure, or none when it has given up.
 * For retries that outlive the process: the count lives in the database, the policy in the schedule.
 */
export const delayAfter = (schedule: Schedule.Schedule<Duration.Duration>, failures: number) =>
  Effect.gen(function*() {
    let state: unknown = schedule.initial
    let delay = Option.none<Duration.Duration>()
    for (let step = 0; step < failures; step++) {
      const [next, out, decision] = yield* schedule.step(0, undefined, state)
      if (ScheduleDecision.isDone(decision)) return Option.none<Duration.Duration>()
      state = next
      delay = Option.some(out)
    }
    return delay
  })
