import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { createServer } from "node:net"
import { inject } from "vitest"
import { isDatabaseUnavailable } from "../../src/sql/Availability.js"

const withCode = (code: string) => new SqlError({ cause: Object.assign(new Error(code), { code }), message: "Failed to execute statement" })

/** A port nothing listens on: a database that is down. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

describe("a database that cannot be reached is told from one that refuses a statement", () => {
  it("network errors, shutdown, start-up and connection exceptions are unavailability", () => {
    for (const code of ["ECONNREFUSED", "ECONNRESET", "57P01", "57P03", "08006", "53300"]) {
      expect(isDatabaseUnavailable(withCode(code)), code).toBe(true)
    }
    const lost = new SqlError({ cause: new Error("Connection terminated unexpectedly"), message: "Failed to execute statement" })
    expect(isDatabaseUnavailable(lost)).toBe(true)
  })

  it("statement errors and other defects are not", () => {
    for (const code of ["42601", "23505", "40001", "22P02"]) expect(isDatabaseUnavailable(withCode(code)), code).toBe(false)
    expect(isDatabaseUnavailable(new Error("ECONNREFUSED"))).toBe(false)
    expect(isDatabaseUnavailable(new SqlError({ cause: new Error("boom"), message: "Failed to execute statement" })))
      .toBe(false)
  })

  it.effect("the driver's own failures: a server that is not there, and a statement PostgreSQL refuses", () =>
    Effect.gen(function*() {
      const down = yield* Effect.promise(closedPort)
      const refused = yield* Effect.flip(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`).pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(`postgres://postgres@127.0.0.1:${down}/none`) }))
        )
      )
      expect(isDatabaseUnavailable(refused)).toBe(true)
      const syntax = yield* Effect.flip(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("SELEC 1")).pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(inject("postgresAdminUrl")) }))
        )
      )
      expect(isDatabaseUnavailable(syntax)).toBe(false)
    }))
})
