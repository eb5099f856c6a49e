import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import { jsonLogger } from "../src/JsonLogs.js"

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
