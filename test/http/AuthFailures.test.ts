import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as AuthFailures from "../../src/http/AuthFailures.js"

const addresses = (n: number, prefix = "10.0.0.") => Array.from({ length: n }, (_, i) => `${prefix}${i}`)

describe("failed authentications per address", () => {
  it.effect("item 11: an address whose window has ended is dropped, within a minute", () =>
    Effect.gen(function*() {
      const failures = yield* AuthFailures.make({ perMinute: 2 })
      yield* TestClock.setTime(10_000)
      for (const address of addresses(50)) yield* failures.fail(address)
      expect(yield* failures.size).toBe(50)
      const third = yield* Effect.all([failures.fail("10.0.0.1"), failures.fail("10.0.0.1")])
      expect(third.map((d) => d.allowed)).toEqual([true, false])
      // The window ends at 60 s: the first failure after it drops every address counted in it.
      yield* TestClock.adjust("1 minute")
      expect((yield* failures.fail("10.0.0.1")).remaining).toBe(1)
      expect(yield* failures.size).toBe(1)
    }))

  it.effect("item 11: the addresses counted are bounded: a flood of addresses drops the oldest first", () =>
    Effect.gen(function*() {
      const failures = yield* AuthFailures.make({ perMinute: 2, maxAddresses: 100 })
      yield* TestClock.setTime(70_000)
      yield* failures.fail("192.0.2.2")
      yield* failures.fail("192.0.2.2")
      for (const address of addresses(1_000)) yield* failures.fail(address)
      expect(yield* failures.size).toBe(100)
      // The flood's oldest went first: the last 100 addresses are counted.
      expect((yield* failures.fail("10.0.0.999")).remaining).toBe(0)
      expect((yield* failures.fail("192.0.2.2")).remaining).toBe(1)
      expect((yield* failures.fail("10.0.0.0")).remaining).toBe(1)
    }))
})
