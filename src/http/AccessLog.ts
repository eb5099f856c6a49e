import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"

/** One answered request, as its access-log line shows it. */
export interface Entry {
  readonly method: string
  /** The path, without the query. */
  readonly path: string
  readonly status: number
  readonly durationMs: number
  readonly requestId: string
}

const fieldsOf = (entry: Entry) => ({
  method: entry.method,
  path: entry.path,
  status: entry.status,
  duration_ms: entry.durationMs,
  request_id: entry.requestId
})

/**
 * How each request's line is logged. By default it is an Effect log at `info`, message `request`,
 * with the entry's fields as annotations: a program that embeds the HTTP Layers gets the lines
 * through its own logger. The standalone service writes them itself (`layerStdout`).
 */
export class AccessLog extends Context.Reference<AccessLog>()("AccessLog", {
  defaultValue: () => ({
    log: (entry: Entry): Effect.Effect<void> => Effect.logInfo("request").pipe(Effect.annotateLogs(fieldsOf(entry)))
  })
}) {}

const TEXT_ONLY = /^[^\s"=]*$/

/** A logfmt value as Effect's logfmt logger writes it: bare when it can be, else a JSON string. */
const logfmtValue = (value: string) => TEXT_ONLY.test(value) ? value : JSON.stringify(value)

/** The line Effect's logfmt logger writes for the entry's log, made directly. */
export const logfmtLine = (entry: Entry, date: Date, fiberId: FiberId.FiberId) =>
  `timestamp=${date.toISOString()} level=INFO fiber=${FiberId.threadName(fiberId)} message=request` +
  ` method=${logfmtValue(entry.method)} path=${logfmtValue(entry.path)} status=${entry.status}` +
  ` duration_ms=${entry.durationMs} request_id=${logfmtValue(entry.requestId)}`

/** The line the service's JSON logger writes for the entry's log, made directly. */
export const jsonLine = (entry: Entry, date: Date) =>
  JSON.stringify({ time: date.toISOString(), level: "info", msg: "request", ...fieldsOf(entry) })

/**
 * The access log of the standalone service: each line formatted at once and written to `write`,
 * in the service's log format, or nothing below `minimumLevel`. It is the line an Effect log
 * would give, without the logging machinery (annotations, loggers, a fiber's log context): that
 * machinery cost a lookup about a sixth of its CPU. It holds no fiber annotations or log spans
 * (a request has none).
 */
export const layerWrite = (options: {
  readonly format: "json" | "logfmt"
  readonly minimumLevel: LogLevel.LogLevel
  readonly write: (line: string) => void
}) =>
  Layer.succeed(AccessLog, {
    log: LogLevel.greaterThan(options.minimumLevel, LogLevel.Info)
      ? () => Effect.void
      : options.format === "json"
      ? (entry) => Effect.sync(() => options.write(jsonLine(entry, new Date())))
      : (entry) => Effect.fiberIdWith((fiberId) => Effect.sync(() => options.write(logfmtLine(entry, new Date(), fiberId))))
  })
