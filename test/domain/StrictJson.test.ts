import { describe, expect, it } from "@effect/vitest"
import { problem } from "../../src/domain/StrictJson.js"

describe("hardening", () => {
  it("item 15: the strict JSON scanner refuses duplicate keys, NULs and rounded numbers, and nothing else", () => {
    const inexact = (field: string) => `${field} cannot be represented exactly: send at most 15 significant digits`
    const cases: ReadonlyArray<readonly [string, string | undefined]> = [
      ["{\"a\":1,\"b\":[1,2,{\"c\":\"x\"}]}", undefined],
      ["{\"side\":\"buy\",\"side\":\"sell\"}", "side is given more than once"],
      ["{\"side\":\"buy\",\"s\\u0069de\":\"sell\"}", "side is given more than once"],
      ["{\"a\":[{\"b\":1},{\"b\":1,\"b\":2}]}", "a.1.b is given more than once"],
      ["{\"a\":{\"b\":1},\"c\":{\"b\":1}}", undefined],
      ["{\"quantity\":123456789.123456789}", inexact("quantity")],
      ["{\"quantity\":12345678901234567890}", inexact("quantity")],
      ["{\"quantity\":1e-400}", inexact("quantity")],
      ["{\"quantity\":1e400}", "quantity is too large"],
      ["{\"q\":0.1,\"r\":10.5000000000000000000,\"s\":1e2,\"t\":100.0E-2,\"u\":-0,\"v\":0.0000000001,\"w\":123456.123456789}", undefined],
      ["{\"n\":\"a\\u0000b\"}", "n must not contain a NUL character"],
      ["{\"a\\u0000\":1}", "Request body has a key with a NUL character"],
      ["{\"a\":\"\\\\\\\"\\\"\", \"b\" : true ,\"c\":null,\"d\":false, \"e\": [ ] , \"f\": { } }", undefined],
      ["not json", undefined],
      ["[".repeat(100) + "]".repeat(100), "Request body must not nest deeper than 64 levels"]
    ]
    for (const [text, expected] of cases) expect([text, problem(text)]).toEqual([text, expected])
  })
})
