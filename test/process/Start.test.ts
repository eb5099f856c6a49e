import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Postgres from "../support/Postgres.js"
import { call, clientOf, root, start, stop } from "../support/Process.js"
import { startArgs, startEnv } from "../support/Harness.js"

/** `npm run admin -- …` against `baseUrl`. */
const admin = (baseUrl: string, args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly output: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "scripts/admin.ts", ...args], {
      cwd: root,
      env: { ...process.env, ROUTER_URL: baseUrl, ADMIN_TOKEN: "adm" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.once("exit", (code) => resolve({ code, output }))
  })

describe("npm start", () => {
  it("first run on an empty DATA_DIR prints a working key, broker_id and curl command, once", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tir-start-"))
    try {
      const first = await start({ DATA_DIR: dataDir })
      const printed = first.output()
      const key = /API key \(shown only now\): (sk_test_[A-Za-z0-9]{32})/.exec(printed)?.[1]
      const broker = /broker_id: +([0-9a-f-]{36})/.exec(printed)?.[1]
      expect(key).toBeDefined()
      expect(broker).toBeDefined()
      expect(printed).toContain(`curl -s -X POST ${first.baseUrl}/api/v1/intents`)

      const body = /-d '(\{.*\})'/.exec(printed)?.[1]
      const created = await fetch(`${first.baseUrl}/api/v1/intents`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: body!
      })
      expect(created.status).toBe(201)
      expect(await created.json()).toMatchObject({ intent_id: "demo-1", status: "pending", broker_id: broker })

      // The operator token kept in DATA_DIR opens the operator API; the demo login opens the dashboard.
      const token = /Operator API token \(kept in .*admin\.token\): ([A-Za-z0-9]{32})/.exec(printed)?.[1]
      const userId = /user id: +([0-9a-f-]{36})/.exec(printed)?.[1]
      const keys = await fetch(`${first.baseUrl}/admin/v1/users/${userId}/api-keys`, {
        headers: { authorization: `Bearer ${token}` }
      })
      expect(keys.status).toBe(200)
      expect(printed).toContain(`Dashboard: ${first.baseUrl}/dashboard/`)
      const password = /password \(shown only now\): (\S+)/.exec(printed)?.[1]
      const login = await fetch(`${first.baseUrl}/dashboard/api/v1/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "demo@example.com", password })
      })
      expect(login.status).toBe(200)
      const page = await fetch(`${first.baseUrl}/dashboard/`)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain("<!doctype html>")
      expect(await stop(first.child)).toBe(0)

      const second = await start({ DATA_DIR: dataDir })
      expect(second.output()).not.toContain("First run")
      expect(second.output()).not.toContain(token)
      const found = await fetch(`${second.baseUrl}/api/v1/intents/by-external-id/demo-1`, {
        headers: { authorization: `Bearer ${key}` }
      })
      expect(found.status).toBe(200)
      expect(await stop(second.child)).toBe(0)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 90_000)

  it("on PostgreSQL it migrates, serves, creates no demo user, and fails clearly on bad configuration", async () => {
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const { url } = yield* Postgres.freshDatabaseUrl
      yield* Effect.promise(async () => {
        const service = await start({ DATABASE_URL: url, ADMIN_TOKEN: "adm" })
        expect(service.output()).not.toContain("First run")
        const operator = await clientOf(service.baseUrl, "adm")
        const { id } = await call(operator.admin.createUser({ payload: { name: "Op", tier: "pro" } }))

        const cli = await admin(service.baseUrl, ["create-key", "--user", id, "--name", "ci", "--mode", "live"])
        expect(cli.code).toBe(0)
        expect(JSON.parse(cli.output)).toMatchObject({ name: "ci", mode: "live", key: expect.stringMatching(/^sk_live_/) })
        const refused = await admin(service.baseUrl, ["create-broker", "--user", id, "--name", "m", "--kind", "mock", "--mode", "live"])
        expect(refused.code).toBe(1)
        expect(refused.output).toContain("kind mock is only available in test mode")
        const hook = await admin(service.baseUrl, ["create-webhook", "--user", id, "--url", "http://127.0.0.1:9/hooks", "--mode", "test"])
        expect(hook.code).toBe(0)
        const endpoint = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ id: Schema.String, secret: Schema.String })))(
          hook.output
        )
        expect(endpoint.secret).toMatch(/^[0-9a-f]{64}$/)
        const none = await admin(service.baseUrl, ["deliveries", "--endpoint", endpoint.id])
        expect(JSON.parse(none.output)).toEqual({ items: [] })

        const users = await admin(service.baseUrl, ["list-users", "--limit", "5"])
        expect(JSON.parse(users.output)).toMatchObject({ items: [{ id, name: "Op" }] })
        const mock = await admin(service.baseUrl, ["create-broker", "--user", id, "--name", "m", "--kind", "mock", "--mode", "test"])
        const brokers = await admin(service.baseUrl, ["list-brokers", "--user", id])
        expect(JSON.parse(brokers.output)).toMatchObject({ items: [{ id: JSON.parse(mock.output).id, kind: "mock" }] })
        const intents = await admin(service.baseUrl, ["list-intents", "--user", id, "--mode", "live"])
        expect(JSON.parse(intents.output)).toMatchObject({ items: [], page: 1, total_items: 0 })
        const badMode = await admin(service.baseUrl, ["list-intents", "--user", id, "--mode", "paper"])
        expect(badMode.code).toBe(2)
        expect(badMode.output).toContain("--mode must be one of: test, live")
        expect(await stop(service.child)).toBe(0)
      })
    })))

    const bad = spawn(process.execPath, [...startArgs()], {
      cwd: root,
      env: { ...process.env, PORT: "not-a-port" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    bad.stderr.on("data", (chunk) => (output += chunk))
    bad.stdout.on("data", (chunk) => (output += chunk))
    const code = await new Promise<number | null>((resolve) => bad.once("exit", resolve))
    expect(code).not.toBe(0)
    expect(output).toContain("PORT")
  }, 60_000)

  it("the image runs node with the same arguments and environment, the memory settings among them", () => {
    const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8")
    const cmd = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1]
    expect(cmd).toBeDefined()
    expect(JSON.parse(cmd ?? "[]")).toEqual(["node", ...startArgs()])
    expect(startArgs()).toEqual(expect.arrayContaining(["--max-old-space-size=160", "--heap-growing-percent=60"]))
    const imageEnv = Object.fromEntries(
      [...dockerfile.matchAll(/^ENV (.*)$/gm)].flatMap((line) => line[1].split(/\s+/)).map((word) => word.split("="))
    )
    expect(startEnv()).toEqual({ MALLOC_TRIM_THRESHOLD_: "131072" })
    expect(imageEnv).toMatchObject(startEnv())
  })
})
