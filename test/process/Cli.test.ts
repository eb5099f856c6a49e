import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { root } from "../support/Process.js"

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** `node --import tsx <script> …args` with `env` over the environment (undefined unsets). */
const cli = (script: string, args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  new Promise<Run>((resolve) => {
    const merged: Record<string, string> = {}
    for (const [name, value] of Object.entries({ ...process.env, ...env })) if (value !== undefined) merged[name] = value
    const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
      cwd: root,
      env: merged,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })

const lines = (text: string) => text.trimEnd().split("\n")

/** A port nothing listens on: bound, then released. */
const closedPort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const userId = "00000000-0000-4000-8000-000000000000"

describe("the CLI's errors, as a newcomer meets them", () => {
  it("without ADMIN_TOKEN: one line that says what the token is, exit 1", async () => {
    const run = await cli("scripts/admin.ts", ["get-user", "--user", userId], { ADMIN_TOKEN: undefined })
    expect(run.code).toBe(1)
    expect(lines(run.stderr)).toEqual([
      "ADMIN_TOKEN is not set: the operator token (printed by the first start, kept in DATA_DIR/admin.token)"
    ])
    expect(run.stderr).not.toMatch(/redacted/i)
    expect(run.stdout).toBe("")
  }, 30_000)

  it("an unknown flag: one readable line and the command's usage, exit 2", async () => {
    const run = await cli("scripts/admin.ts", ["create-user", "--name", "x", "--tier", "pro", "--bogus", "1"], {
      ADMIN_TOKEN: "adm"
    })
    expect(run.code).toBe(2)
    const [message, usage, ...rest] = lines(run.stderr)
    expect(message).toBe("Received unknown argument: '--bogus'")
    expect(usage).toMatch(/^Usage: npm run admin -- create-user --name NAME --tier free\|pro\|enterprise/)
    expect(rest).toEqual([])
    expect(run.stderr).not.toContain("TypeError")
  }, 30_000)

  it("a flag value the API would refuse: the payload schema's rule on the flag, exit 2", async () => {
    const run = await cli("scripts/admin.ts", ["create-user", "--name", "x", "--tier", "gold"], { ADMIN_TOKEN: "adm" })
    expect(run.code).toBe(2)
    expect(lines(run.stderr)[0]).toBe("--tier must be one of: free, pro, enterprise")
    const count = await cli("scripts/admin.ts", ["create-user", "--name", "x", "--tier", "pro", "--requests-per-minute", "lots"], {
      ADMIN_TOKEN: "adm"
    })
    expect(count.code).toBe(2)
    expect(lines(count.stderr)[0]).toBe("--requests-per-minute must be an integer from 1 to 2147483647")
    const event = await cli("scripts/events.ts", ["trigger", "intent.nope", "--broker", userId], { API_KEY: "sk_test_x" })
    expect(event.code).toBe(2)
    expect(lines(event.stderr)[0]).toMatch(/^TYPE must be one of: intent\.created, /)
  }, 30_000)

  it("an unreachable ROUTER_URL: the URL and the network's cause, exit 1", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`
    const admin = await cli("scripts/admin.ts", ["get-user", "--user", userId], { ADMIN_TOKEN: "adm", ROUTER_URL: url })
    expect(admin.code).toBe(1)
    expect(lines(admin.stderr)).toEqual([`cannot reach ${url}: connection refused (ECONNREFUSED)`])
    const events = await cli("scripts/events.ts", ["list"], { API_KEY: "sk_test_x", ROUTER_URL: url })
    expect(events.code).toBe(1)
    expect(lines(events.stderr)).toEqual([`cannot reach ${url}: connection refused (ECONNREFUSED)`])
  }, 30_000)

  it("--help lists the commands; --version prints the package's", async () => {
    const admin = await cli("scripts/admin.ts", ["--help"])
    expect(admin.code).toBe(0)
    for (
      const command of [
        "create-user",
        "get-user",
        "create-login",
        "create-key",
        "list-keys",
        "revoke-key",
        "create-broker",
        "replace-broker-credentials",
        "create-webhook",
        "list-webhooks",
        "delete-webhook",
        "deliveries",
        "resend"
      ]
    ) expect(admin.stdout).toContain(command)
    const tir = await cli("src/cli/main.ts", ["--help"])
    expect(tir.code).toBe(0)
    for (const command of ["admin create-user", "events list", "events listen", "events trigger"]) {
      expect(tir.stdout).toContain(command)
    }
    const version = await cli("src/cli/main.ts", ["--version"])
    const { version: expected } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }
    expect(version.stdout.trim()).toBe(expected)
  }, 30_000)
})
