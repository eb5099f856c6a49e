import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Either from "effect/Either"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

const logLevels: Record<string, LogLevel.LogLevel> = {
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

/** The service's configuration, from the environment; each Layer reads the part it needs. */
export const AppConfig = {
  port: Config.port("PORT").pipe(Config.withDefault(8080)),
  host: Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  /** Empty counts as unset: the operator API stays closed. */
  adminToken: Config.option(Config.redacted("ADMIN_TOKEN")).pipe(
    Config.map(Option.filter((token) => Redacted.value(token) !== ""))
  ),
  credentialsKey: Config.option(
    Config.redacted(
      Config.string("CREDENTIALS_KEY").pipe(
        Config.validate({ message: "CREDENTIALS_KEY must be 64 hex characters", validation: (s) => /^[0-9a-fA-F]{64}$/.test(s) })
      )
    )
  ),
  /** Redis when `REDIS_URL` is set, else the database; `RATE_LIMITS=off` lifts all limits (benchmarks only). */
  rateLimits: Config.all({
    redisUrl: Config.option(Config.redacted("REDIS_URL")),
    switch: Config.literal("on", "off")("RATE_LIMITS").pipe(Config.withDefault("on"))
  }).pipe(
    Config.map(({ redisUrl, switch: enabled }) =>
      enabled === "off"
        ? { _tag: "Off" as const }
        : Option.match(redisUrl, {
          onNone: () => ({ _tag: "Database" as const }),
          onSome: (url) => ({ _tag: "Redis" as const, url })
        })
    )
  ),
  /** Where customers reach the service; the dashboard's cookies are `Secure` when it is https. */
  publicUrl: Config.option(
    Config.string("PUBLIC_URL").pipe(
      Config.mapOrFail((text) => {
        try {
          const url = new URL(text)
          return url.protocol === "http:" || url.protocol === "https:"
            ? Either.right(url)
            : Either.left(ConfigError.InvalidData(["PUBLIC_URL"], "must be an http or https URL"))
        } catch {
          return Either.left(ConfigError.InvalidData(["PUBLIC_URL"], "must be an http or https URL"))
        }
      })
    )
  ),
  /** `open`: anyone may sign up in the dashboard; `closed`: accounts come from the operator API. */
  signup: Config.literal("open", "closed")("SIGNUP").pipe(Config.withDefault("open")),
  authFailuresPerMinute: Config.integer("AUTH_FAILURES_PER_MINUTE").pipe(
    Config.withDefault(20),
    Config.validate({ message: "AUTH_FAILURES_PER_MINUTE must be a positive integer", validation: (n) => n > 0 })
  ),
  logLevel: Config.string("LOG_LEVEL").pipe(
    Config.withDefault("info"),
    Config.mapOrFail((name) => {
      const level = logLevels[name.toLowerCase()]
      return level !== undefined
        ? Either.right(level)
        : Either.left(ConfigError.InvalidData(["LOG_LEVEL"], `must be one of: ${Object.keys(logLevels).join(", ")}`))
    }),
  ),
  /** `json` in production (`NODE_ENV=production`), readable logfmt otherwise; `LOG_FORMAT` overrides. */
  logFormat: Config.literal("json", "logfmt", "pretty")("LOG_FORMAT").pipe(
    Config.orElse(() =>
      Config.string("NODE_ENV").pipe(
        Config.withDefault("development"),
        Config.map((env): "json" | "logfmt" => env === "production" ? "json" : "logfmt")
      )
    )
  )
} as const
