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
    globalSetup: ["test/globalSetup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // PGlite instances are memory-hungry; two workers fit the two cores of CI.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // The process tests run after the others, not beside them: they hold transactions open for
    // seconds on purpose (crashes between a broker and a record), and PostgreSQL's horizon, which
    // the events feed waits behind, covers every database on the server.
    projects: [
      {
        extends: true,
        test: {
          name: "service",
          include: ["test/**/*.test.ts"],
          exclude: ["test/process/**", "**/node_modules/**"],
          sequence: { groupOrder: 0 }
        }
      },
      { extends: true, test: { name: "process", include: ["test/process/**/*.test.ts"], sequence: { groupOrder: 1 } } }
    ]
  }
})
