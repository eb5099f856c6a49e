import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import type { IntentStatus, OrderStatus } from "../../src/domain/Intent.js"
import {
  applyFailure,
  applyLocalCancel,
  applyOrderUpdate,
  isFinal,
  isLegal,
  nextOrderStatus,
  type OrderUpdate,
  type RoutingState
} from "../../src/domain/Routing.js"

const orderStatuses: ReadonlyArray<OrderStatus> = ["new", "partially_filled", "filled", "canceled", "expired", "rejected"]

const fill = FastCheck.record({
  id: FastCheck.constantFrom("f1", "f2", "f3", "f4", "f5"),
  quantity: FastCheck.integer({ min: 1, max: 40 }).map((n) => n / 4),
  price: FastCheck.constant(100)
})

type Step =
  | { readonly _tag: "update"; readonly update: OrderUpdate }
  | { readonly _tag: "fail" }
  | { readonly _tag: "cancel" }

const step: FastCheck.Arbitrary<Step> = FastCheck.oneof(
  {
    arbitrary: FastCheck.record({
      status: FastCheck.constantFrom(...orderStatuses),
      fills: FastCheck.array(fill, { maxLength: 4 })
    }).map((update): Step => ({ _tag: "update", update })),
    weight: 8
  },
  { arbitrary: FastCheck.constant<Step>({ _tag: "fail" }), weight: 1 },
  { arbitrary: FastCheck.constant<Step>({ _tag: "cancel" }), weight: 1 }
)

const filledOf = (state: RoutingState) => state.fills.reduce((sum, f) => sum + f.quantity, 0)

describe("the transition function", () => {
  it.prop(
    "any sequence of broker updates takes only legal edges, absorbs in final states and never overfills",
    [FastCheck.integer({ min: 1, max: 40 }).map((n) => n / 2), FastCheck.array(step, { maxLength: 12 })],
    ([quantity, steps]) => {
      let state: RoutingState = { status: "pending", quantity, fills: [] }
      for (const s of steps) {
        const transition = s._tag === "update"
          ? applyOrderUpdate(state, s.update)
          : s._tag === "fail"
          ? applyFailure(state, "unreachable")
          : applyLocalCancel(state, "client")
        const before: IntentStatus = state.status
        expect(transition.changed).toBe(transition.status !== before)
        if (transition.changed) expect(isLegal(before, transition.status)).toBe(true)
        if (isFinal(before)) {
          expect(transition.status).toBe(before)
          expect(transition.fills).toEqual([])
        }
        const known = new Set(state.fills.map((f) => f.id))
        expect(transition.fills.every((f) => !known.has(f.id))).toBe(true)
        state = { ...state, status: transition.status, fills: [...state.fills, ...transition.fills] }
        expect(filledOf(state)).toBeLessThanOrEqual(quantity + 1e-9)
        if (state.status === "filled") expect(filledOf(state)).toBeCloseTo(quantity, 9)
      }
    },
    { fastCheck: { numRuns: 500 } }
  )

  it("a complete fill makes the intent filled whatever the order status says; rejection keeps its reason", () => {
    const state: RoutingState = { status: "pending", quantity: 10, fills: [] }
    expect(applyOrderUpdate(state, { status: "new", fills: [{ id: "a", quantity: 10, price: 100 }] }).status).toBe("filled")
    const rejected = applyOrderUpdate(state, { status: "rejected", fills: [], reason: "no" })
    expect(rejected).toMatchObject({ status: "rejected", reason: "no", changed: true })
    const expired = applyOrderUpdate({ ...state, status: "partially_filled", fills: [{ id: "a", quantity: 4 }] }, {
      status: "expired",
      fills: [{ id: "a", quantity: 4, price: 100 }]
    })
    expect(expired).toMatchObject({ status: "canceled", reason: "Order expired at the end of the day", fills: [] })
  })

  it("a fill beyond the quantity is cut to what remains, and a repeated fill is recorded once", () => {
    const state: RoutingState = { status: "partially_filled", quantity: 10, fills: [{ id: "a", quantity: 6 }] }
    const next = applyOrderUpdate(state, {
      status: "filled",
      fills: [{ id: "a", quantity: 6, price: 100 }, { id: "b", quantity: 9, price: 100 }]
    })
    expect(next.fills).toEqual([{ id: "b", quantity: 4, price: 100 }])
    expect(next.status).toBe("filled")
  })
})

describe("an order's status on a later word", () => {
  it("never goes back: a final status stays, a partial fill is not undone by new, anything else follows the word", () => {
    for (const final of ["filled", "canceled", "expired", "rejected"] as const) {
      for (const incoming of orderStatuses) expect(nextOrderStatus(final, incoming)).toBe(final)
    }
    expect(nextOrderStatus("partially_filled", "new")).toBe("partially_filled")
    expect(nextOrderStatus("partially_filled", "filled")).toBe("filled")
    expect(nextOrderStatus("new", "partially_filled")).toBe("partially_filled")
    expect(nextOrderStatus("new", "canceled")).toBe("canceled")
    expect(nextOrderStatus("new", "new")).toBe("new")
  })
})
