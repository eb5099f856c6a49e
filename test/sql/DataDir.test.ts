import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import * as PgLite from "../../src/sql/PgLite.js"

const tempParent = Effect.acquireRelease(
  Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "pglite-mode-"))),
  (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
)

const modeOf = (dir: string) => Effect.promise(() => fs.stat(dir)).pipe(Effect.map((stat) => stat.mode & 0o777))

describe("hardening", () => {
  it.scoped("item 17: a fresh DATA_DIR is created for its owner alone, and a loose one the service made is tightened", () =>
    Effect.gen(function*() {
      const parent = yield* tempParent
      const dataDir = path.join(parent, "data")
      yield* Effect.scoped(Effect.flatMap(PgLite.make({ dataDir }), (sql) => sql`SELECT 1`))
      expect((yield* modeOf(dataDir)) & 0o077).toBe(0)

      // A folder left open by an earlier version: the next start closes it.
      yield* Effect.promise(() => fs.chmod(dataDir, 0o777))
      yield* Effect.scoped(Effect.flatMap(PgLite.make({ dataDir }), (sql) => sql`SELECT 1`))
      expect((yield* modeOf(dataDir)) & 0o077).toBe(0)
    }), { timeout: 60_000 })
})
