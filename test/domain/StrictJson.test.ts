import { describe, expect, it } from "@effect/vitest"
import { problem, problemOfParsed } from "../../src/domain/StrictJson.js"

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

  it("strings read with or without escapes, numbers of up to 15 digits and any spacing are checked alike", () => {
    const inexact = (field: string) => `${field} cannot be represented exactly: send at most 15 significant digits`
    const cases: ReadonlyArray<readonly [string, string | undefined]> = [
      // A key spelled with an escape is the same key as the plain one, whichever comes first.
      ["{\"ab\":1,\"\\u0061b\":2}", "ab is given more than once"],
      ["{\"\\u0061b\":1,\"ab\":2}", "ab is given more than once"],
      ["{\"a\\\"b\":1,\"a\\\"b\":2}", "a\"b is given more than once"],
      ["{\"a\\\\\":1,\"b\":\"\\\\\"}", undefined],
      ["{\"a\\u0000b\":[1]}", "Request body has a key with a NUL character"],
      // Any of JSON's four spaces between tokens.
      ["\t{\r\n \"a\"\t:\r[ 1 ,\n2 ]\n,\"a\" : 3 }\r\n", "a is given more than once"],
      // Fifteen digits come back as sent, sixteen may not, wherever the point.
      ["{\"q\":123456789012345,\"r\":-1.23456789012345,\"s\":0.00000000000001}", undefined],
      ["{\"q\":9007199254740993}", inexact("q")],
      ["{\"q\":0.30000000000000004,\"r\":1}", undefined],
      ["{\"q\":1.0000000000000001}", inexact("q")],
      ["{\"q\":[0.1, 2.5e-3, 1234567890123456789e-2]}", inexact("q.2")]
    ]
    for (const [text, expected] of cases) {
      expect([text, problem(text)]).toEqual([text, expected])
      expect([text, problemOfParsed(text)]).toEqual([text, expected])
    }
  })
})
