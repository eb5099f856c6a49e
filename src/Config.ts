import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Either from "effect/Either"
import * as LogLevel from "effect/LogLevel"

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

/** The service's configuration (DESIGN.md section 2); each Layer reads the part it needs. */
export const AppConfig = {
  port: Config.port("PORT").pipe(Config.withDefault(8080)),
  host: Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  adminToken: Config.option(Config.redacted("ADMIN_TOKEN")),
  credentialsKey: Config.option(
    Config.redacted(
      Config.string("CREDENTIALS_KEY").pipe(
        Config.validate({ message: "CREDENTIALS_KEY must be 64 hex characters", validation: (s) => /^[0-9a-fA-F]{64}$/.test(s) })
      )
    )
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
