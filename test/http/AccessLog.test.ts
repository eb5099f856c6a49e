import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as AccessLog from "../../src/http/AccessLog.js"
import { jsonLogger } from "../../src/Logs.js"

const entry: AccessLog.Entry = {
  method: "GET",
  path: "/api/v1/intents/a=b c",
  status: 404,
  durationMs: 3,
  requestId: "req_0123456789abcdef0123456789abcdef"
}

/** The lines an Effect logger writes while `effect` runs, through `make`. */
const linesOf = (effect: Effect.Effect<void>, make: (write: (line: string) => void) => Logger.Logger<unknown, void>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, make((line) => void lines.push(line)))))
    return lines
  })

/** A logfmt line's fields after `timestamp` and `fiber`, whose values vary, in a stable order. */
const logfmtFields = (line: string) =>
  line.replace(/^timestamp=\S+ /, "").replace(/ fiber=#\d+/, "").split(/ (?=[a-z_]+=)/).sort()

const logfmt = (write: (line: string) => void) => Logger.map(Logger.logfmtLogger, write)

describe("the access log", () => {
  it.effect("by default an Effect log at info: `request` with the entry's fields as annotations", () =>
    Effect.gen(function*() {
      const [line] = yield* linesOf(Effect.flatMap(AccessLog.AccessLog, (log) => log.log(entry)), logfmt)
      expect(logfmtFields(line ?? "")).toEqual([
        "duration_ms=3",
        "level=INFO",
        "message=request",
        "method=GET",
        "path=\"/api/v1/intents/a=b c\"",
        "request_id=req_0123456789abcdef0123456789abcdef",
        "status=404"
      ])
    }))

  it.effect("the direct logfmt line holds what Effect's logfmt logger writes for that log", () =>
    Effect.gen(function*() {
      const [logged = ""] = yield* linesOf(Effect.flatMap(AccessLog.AccessLog, (log) => log.log(entry)), logfmt)
      const direct = yield* Effect.fiberIdWith((fiberId) => Effect.succeed(AccessLog.logfmtLine(entry, new Date(), fiberId)))
      expect(direct).toMatch(/^timestamp=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=INFO fiber=#\d+ message=request /)
      expect(logfmtFields(direct)).toEqual(logfmtFields(logged))
    }))

  it.effect("the direct JSON line holds what the service's JSON logger writes for that log", () =>
    Effect.gen(function*() {
      const [logged = ""] = yield* linesOf(Effect.flatMap(AccessLog.AccessLog, (log) => log.log(entry)), jsonLogger)
      const { time: loggedTime, ...loggedFields } = JSON.parse(logged)
      const { time, ...fields } = JSON.parse(AccessLog.jsonLine(entry, new Date()))
      expect(fields).toEqual(loggedFields)
      expect(Number.isNaN(Date.parse(time))).toBe(false)
      expect(Number.isNaN(Date.parse(loggedTime))).toBe(false)
    }))

  it.effect("written directly: one line per request at info and below, none above", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const write = (line: string) => void lines.push(line)
      const logTwice = Effect.flatMap(AccessLog.AccessLog, (log) => Effect.zipRight(log.log(entry), log.log(entry)))
      yield* Effect.provide(logTwice, AccessLog.layerWrite({ format: "logfmt", minimumLevel: LogLevel.Info, write }))
      yield* Effect.provide(logTwice, AccessLog.layerWrite({ format: "json", minimumLevel: LogLevel.Debug, write }))
      yield* Effect.provide(logTwice, AccessLog.layerWrite({ format: "json", minimumLevel: LogLevel.Warning, write }))
      expect(lines.map((line) => line.startsWith("{") ? "json" : "logfmt")).toEqual(["logfmt", "logfmt", "json", "json"])
    }))
})
