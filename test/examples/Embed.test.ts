import { expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { readFileSync } from "node:fs"
import { program } from "../../examples/embed.js"

it.live("the embedding example runs: an intent created, a duplicate refused with a typed error", () =>
  Effect.gen(function*() {
    const { duplicate, intent } = yield* program
    expect(intent).toMatchObject({ intent_id: "embedded-1", status: "pending", orders: [], quantity: 5 })
    expect(duplicate._tag).toBe("DuplicateIntent")
  }), 60_000)

it("the embedding guide shows the example exactly as it is tested", () => {
  const readme = readFileSync(new URL("../../docs/embedding.md", import.meta.url), "utf8")
  const example = readFileSync(new URL("../../examples/embed.ts", import.meta.url), "utf8")
  expect(readme).toContain(example.trim())
})
