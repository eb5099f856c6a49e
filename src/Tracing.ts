import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import type * as Tracer from "effect/Tracer"

/**
 * The span of a use case or repository method, named `name`: the last step of an
 * `Effect.fnUntraced`, so that the span covers the body and every step before it.
 *
 * `Effect.fn(name)` does the same, but it captures the call site's stack trace on every call (for
 * a failed span's `code.stacktrace`) and sets up its span even while the tracer is off. Both cost
 * a lookup about a tenth of its CPU in a service that exports no traces. These spans carry no stack
 * trace, and while the tracer is off (`Layer.setTracerEnabled(false)`, or a request the HTTP
 * middleware leaves untraced) the effect runs as it is.
 */
export const span = (name: string, options?: Omit<Tracer.SpanOptions, "captureStackTrace">) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // The fiber's flag read in the same step that chooses: one step of the runtime per span, not three.
  Effect.withFiberRuntime((fiber) =>
    fiber.getFiberRef(FiberRef.currentTracerEnabled)
      ? Effect.withSpan(self, name, { ...options, captureStackTrace: false })
      : self
  )
