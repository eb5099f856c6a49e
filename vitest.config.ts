import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

export default defineConfig({
  resolve: {
    alias: [
      { find: /^trade-intent-router$/, replacement: fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
      { find: /^trade-intent-router\/receiver$/, replacement: fileURLToPath(new URL("./src/Receiver.ts", import.meta.url)) }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // PGlite instances are memory-hungry; two workers fit the two cores of CI.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } }
  }
})
