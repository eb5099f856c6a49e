import { execFileSync } from "node:child_process"
import type { TestProject } from "vitest/node"

/**
 * Tests need a PostgreSQL server: `DATABASE_URL` (CI points it at the local server), or the local
 * default. Each test file creates its own fresh database from it and drops it afterwards.
 */
export default function setup(project: TestProject) {
  // Process tests run the service as `npm start` does: the bundle `npm run build` makes.
  execFileSync("npm", ["run", "--silent", "build"], { stdio: "inherit" })
  project.provide("postgresAdminUrl", process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres")
}

declare module "vitest" {
  export interface ProvidedContext {
    postgresAdminUrl: string
  }
}
