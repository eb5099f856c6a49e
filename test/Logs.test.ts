import { describe, expect, it, vi } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import * as Logs from "../src/Logs.js"
import { jsonLogger } from "../src/Logs.js"

const Line = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const logged = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    yield* Effect.exit(effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, jsonLogger((line) => lines.push(line))))))
    return lines.map((line) => Schema.decodeUnknownSync(Line)(line))
  })

describe("JSON logs", () => {
  it.effect("one object per line: time, level, msg, then the annotations as fields", () =>
    Effect.gen(function*() {
      const [line] = yield* logged(
        Effect.logInfo("request").pipe(Effect.annotateLogs({ method: "GET", status: 200, duration_ms: 3 }))
      )
      expect(Object.keys(line ?? {}).slice(0, 3)).toEqual(["time", "level", "msg"])
      expect(line).toMatchObject({ level: "info", msg: "request", method: "GET", status: 200, duration_ms: 3 })
      expect(Number.isNaN(Date.parse(String(line?.time)))).toBe(false)
    }))

  it.effect("a failure's cause is in error; an annotation never overwrites time, level or msg", () =>
    Effect.gen(function*() {
      const [line] = yield* logged(
        Effect.logError("delivery failed", Cause.die(new Error("boom"))).pipe(Effect.annotateLogs({ msg: "spoofed", level: "x" }))
      )
      expect(line).toMatchObject({ level: "error", msg: "delivery failed" })
      expect(String(line?.error)).toContain("boom")
    }))
})

describe("logfmt logs", () => {
  it.effect("Effect's logfmt line for line, one per log, written to standard output", () =>
    Effect.gen(function*() {
      const written: Array<string> = []
      const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
        written.push(String(chunk))
        return true
      })
      yield* Effect.logInfo("request").pipe(
        Effect.annotateLogs({ method: "GET", path: "/api/v1/intents", status: 200 }),
        Effect.zipRight(Effect.logWarning("key \"x\" refused")),
        Effect.provide(Logs.logfmt),
        Effect.ensuring(Effect.sync(() => write.mockRestore()))
      )
      expect(written).toHaveLength(2)
      const [first = "", second = ""] = written
      expect(first).toMatch(/^timestamp=\S+ level=INFO fiber=#\d+ message=request( \S+=\S+){3}\n$/)
      // The annotations follow, in the order of Effect's annotation map.
      expect(first.trim().split(" ").slice(4).sort()).toEqual(["method=GET", "path=/api/v1/intents", "status=200"])
      // Values with spaces or quotes are quoted as JSON strings, as Effect's logfmt does.
      expect(second).toMatch(/^timestamp=\S+ level=WARN fiber=#\d+ message="key \\"x\\" refused"\n$/)
    }))
})
