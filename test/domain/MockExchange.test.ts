import { describe, expect, it } from "@effect/vitest"
import type { OrderSpec } from "../../src/domain/Intent.js"
import { decide, onPrice, type RestingOrder } from "../../src/domain/MockExchange.js"

const spec = (overrides: Partial<OrderSpec>): OrderSpec => ({
  symbol: "AAPL",
  side: "buy",
  quantity: 2,
  order_type: "market",
  limit_price: null,
  stop_price: null,
  time_in_force: "gtc",
  extended_hours: false,
  ...overrides
})

const resting = (overrides: Partial<OrderSpec>, triggered = false): RestingOrder => ({ spec: spec(overrides), triggered, filled: 0 })

describe("the mock exchange", () => {
  it("decides at 100 unless given the symbol's price", () => {
    expect(decide(spec({ order_type: "limit", limit_price: 99 }))).toMatchObject({ status: "new", filled: 0 })
    expect(decide(spec({ order_type: "limit", limit_price: 99 }), 98)).toMatchObject({ status: "filled", filled: 2 })
    expect(decide(spec({ side: "sell", order_type: "limit", limit_price: 101 }), 101)).toMatchObject({ status: "filled" })
    expect(decide(spec({ order_type: "stop", stop_price: 101 }))).toMatchObject({ status: "new", triggered: false })
    expect(decide(spec({ order_type: "stop", stop_price: 101 }), 101)).toMatchObject({ status: "filled" })
  })

  it("remembers a stop limit whose stop triggered while its limit rests", () => {
    const order = spec({ order_type: "stop_limit", stop_price: 105, limit_price: 103 })
    expect(decide(order, 106)).toEqual({ _tag: "Placed", status: "new", filled: 0, triggered: true })
    expect(decide(order, 102)).toEqual({ _tag: "Placed", status: "new", filled: 0, triggered: false })
  })

  it("fills or triggers a resting order when the price moves through it, and nothing else", () => {
    expect(onPrice(resting({ order_type: "limit", limit_price: 90 }), 90.01)).toEqual({ _tag: "Unchanged" })
    expect(onPrice(resting({ order_type: "limit", limit_price: 90 }), 90)).toEqual({ _tag: "Filled", quantity: 2 })
    expect(onPrice(resting({ side: "sell", order_type: "limit", limit_price: 110 }), 109)).toEqual({ _tag: "Unchanged" })
    expect(onPrice(resting({ side: "sell", order_type: "stop", stop_price: 95 }), 95)).toEqual({ _tag: "Filled", quantity: 2 })
    expect(onPrice(resting({ order_type: "stop_limit", stop_price: 105, limit_price: 103 }), 106)).toEqual({ _tag: "Triggered" })
    expect(onPrice(resting({ order_type: "stop_limit", stop_price: 105, limit_price: 103 }, true), 106)).toEqual({ _tag: "Unchanged" })
    expect(onPrice(resting({ order_type: "stop_limit", stop_price: 105, limit_price: 103 }, true), 103)).toEqual({ _tag: "Filled", quantity: 2 })
    expect(onPrice(resting({ order_type: "stop_limit", stop_price: 105, limit_price: 103 }), 103)).toEqual({ _tag: "Unchanged" })
  })

  it("leaves HOLD and PARTIAL's rest resting", () => {
    expect(onPrice(resting({ symbol: "HOLD", order_type: "limit", limit_price: 90 }), 1)).toEqual({ _tag: "Unchanged" })
    expect(onPrice({ ...resting({ symbol: "PARTIAL", order_type: "limit", limit_price: 90 }), filled: 1 }, 1)).toEqual({ _tag: "Unchanged" })
  })
})
