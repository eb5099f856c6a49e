import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { IdGenerator } from "../../src/services/IdGenerator.js"

describe("IdGenerator", () => {
  it.effect("ids drawn across many blocks of the random pool are well formed and never repeat", () =>
    Effect.gen(function*() {
      const ids = yield* IdGenerator
      // 2,000 × 16 bytes and 2,000 × (2 × 24) bytes: many 4 KiB blocks, with draws across their ends.
      const hex = yield* Effect.replicateEffect(ids.hex(16), 2_000)
      const base62 = yield* Effect.replicateEffect(ids.base62(24), 2_000)
      const events = yield* Effect.replicateEffect(ids.eventId, 100)
      for (const id of hex) expect(id).toMatch(/^[0-9a-f]{32}$/)
      for (const id of base62) expect(id).toMatch(/^[0-9A-Za-z]{24}$/)
      for (const id of events) expect(id).toMatch(/^evt_[0-9a-f]{32}$/)
      expect(new Set([...hex, ...events.map((id) => id.slice(4))]).size).toBe(2_100)
      expect(new Set(base62).size).toBe(2_000)
    }).pipe(Effect.provide(IdGenerator.layer)))

  it.effect("UUIDs are of version 7 and event ids time-ordered: the clock's millisecond first, so later ids sort after earlier ones", () =>
    Effect.gen(function*() {
      const ids = yield* IdGenerator
      const millis = Date.UTC(2026, 10, 30, 12, 34, 56, 789)
      yield* TestClock.setTime(millis)
      const sameMillisecond = yield* Effect.replicateEffect(ids.uuid, 1_000)
      const events = yield* Effect.replicateEffect(ids.eventId, 1_000)
      yield* TestClock.adjust("1 millis")
      const later = yield* ids.uuid
      const prefix = millis.toString(16).padStart(12, "0")
      for (const id of [...sameMillisecond, later]) {
        expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      }
      for (const id of sameMillisecond) expect(id.replaceAll("-", "").slice(0, 12)).toBe(prefix)
      for (const id of events) expect(id).toMatch(new RegExp(`^evt_${prefix}[0-9a-f]{20}$`))
      expect(later.replaceAll("-", "").slice(0, 12)).toBe((millis + 1).toString(16).padStart(12, "0"))
      // Within a millisecond the 74 random bits tell ids apart; across one, time orders them.
      expect(new Set(sameMillisecond).size).toBe(1_000)
      expect(new Set(events).size).toBe(1_000)
      for (const id of sameMillisecond) expect(id < later).toBe(true)
    }).pipe(Effect.provide(IdGenerator.layer)))

  it.effect("a draw larger than the pool is served whole", () =>
    Effect.gen(function*() {
      const ids = yield* IdGenerator
      const long = yield* ids.hex(8_192)
      expect(long).toMatch(/^[0-9a-f]{16384}$/)
      // Random bytes of that length are never all one value.
      expect(new Set(long).size).toBeGreaterThan(1)
    }).pipe(Effect.provide(IdGenerator.layer)))

  it.effect("two instances of the Layer draw different bytes", () =>
    Effect.gen(function*() {
      const draw = Effect.flatMap(IdGenerator, (ids) => ids.hex(16))
      const first = yield* Effect.provide(draw, IdGenerator.layer)
      const second = yield* Effect.provide(draw, IdGenerator.layer)
      expect(first).not.toBe(second)
    }))
})
