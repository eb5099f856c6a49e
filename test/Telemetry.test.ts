import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Telemetry from "../src/Telemetry.js"

const configFrom = (env: Record<string, string>) =>
  Telemetry.config.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("telemetry configuration", () => {
  it.effect("an empty endpoint counts as unset: telemetry is off and the other OTEL_ variables are not read", () =>
    Effect.gen(function*() {
      const options = yield* configFrom({
        OTEL_EXPORTER_OTLP_ENDPOINT: "",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_BSP_SCHEDULE_DELAY: "soon"
      })
      expect(Option.isNone(options)).toBe(true)
      expect(Telemetry.summary(options)).toBe("off")
    }))

  it.effect("with an endpoint: the protocol, the headers percent-decoded and redacted, the service name", () =>
    Effect.gen(function*() {
      const options = Option.getOrThrow(yield* configFrom({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
        OTEL_EXPORTER_OTLP_HEADERS: "x-collector-key=s3cret%21, x-tenant = ops"
      }))
      expect(options.protocol).toBe("http/protobuf")
      expect(options.serviceName).toBe(Telemetry.DEFAULT_SERVICE_NAME)
      expect(Redacted.value(options.headers)).toEqual({ "x-collector-key": "s3cret!", "x-tenant": "ops" })
      expect(String(options.headers)).not.toContain("s3cret")
      expect(Telemetry.summary(Option.some(options))).toBe("otlp http/protobuf (http://collector:4318)")
    }))

  it.effect("a protocol other than http/protobuf or http/json, or a bad endpoint, is refused naming the variable", () =>
    Effect.gen(function*() {
      const grpc = yield* Effect.flip(configFrom({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc"
      }))
      expect(String(grpc)).toContain("OTEL_EXPORTER_OTLP_PROTOCOL")
      const endpoint = yield* Effect.flip(configFrom({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }))
      expect(String(endpoint)).toContain("OTEL_EXPORTER_OTLP_ENDPOINT")
    }))
})
