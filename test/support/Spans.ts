import * as Effect from "effect/Effect"
import * as Tracer from "effect/Tracer"

/** Runs `effect` with the current tracer, keeping every span it makes: what a trace exporter would see. */
export const withSpansRecorded = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.tracerWith((tracer) => {
    const spans: Array<Tracer.Span> = []
    const recording = Tracer.make({
      span: (...args) => {
        const span = tracer.span(...args)
        spans.push(span)
        return span
      },
      context: tracer.context
    })
    return Effect.map(Effect.withTracer(effect, recording), (result) => ({ result, spans }))
  })
