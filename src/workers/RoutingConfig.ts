import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"

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
