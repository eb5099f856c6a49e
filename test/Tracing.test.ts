import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracing from "../src/Tracing.js"

/** The innermost span's name, parent's name and attributes, if there is one. */
const currentSpan = Effect.map(Effect.option(Effect.currentSpan), Option.map((span) => ({
  name: span.name,
  parent: Option.flatMap(span.parent, (parent) => parent._tag === "Span" ? Option.some(parent.name) : Option.none()),
  attributes: Object.fromEntries(span.attributes)
})))

describe("Tracing.span", () => {
  it.effect("with the tracer on, the effect runs in a span of that name, under the span around it", () =>
    Effect.gen(function*() {
      const inner = yield* currentSpan.pipe(
        Tracing.span("Repository.find", { attributes: { id: "a" } }),
        Tracing.span("UseCase.get")
      )
      expect(inner).toEqual(Option.some({ name: "Repository.find", parent: Option.some("UseCase.get"), attributes: { id: "a" } }))
    }))

  it.effect("with the tracer off, no span is made, and the effect's success and failure pass through", () =>
    Effect.gen(function*() {
      expect(yield* currentSpan.pipe(Tracing.span("UseCase.get"), Effect.withTracerEnabled(false))).toEqual(Option.none())
      expect(yield* Effect.succeed(42).pipe(Tracing.span("UseCase.get"), Effect.withTracerEnabled(false))).toBe(42)
      const failed = yield* Effect.fail("refused").pipe(Tracing.span("UseCase.get"), Effect.withTracerEnabled(false), Effect.flip)
      expect(failed).toBe("refused")
    }))

  it.effect("the tracer is read when the effect runs, not when it is built", () =>
    Effect.gen(function*() {
      const traced = currentSpan.pipe(Tracing.span("UseCase.get"))
      expect(Option.isNone(yield* Effect.withTracerEnabled(traced, false))).toBe(true)
      expect(Option.map(yield* traced, (span) => span.name)).toEqual(Option.some("UseCase.get"))
    }))
})
