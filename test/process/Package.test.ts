import { execFile } from "node:child_process"
import { createHmac } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/**
 * The package as a consumer gets it: `npm pack` of the built `lib/`, installed from the tarball
 * into a scratch ESM project (its peers from the registry), then used from plain `node` (no tsx)
 * and type-checked by `tsc` under strict consumer settings.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc")
const NPM_ARGS = ["--no-audit", "--no-fund"]

/**
 * The test's own environment, minus what `npm test` passes to its scripts that would point a nested
 * npm at this repository (its prefix, its package) and any loader vitest runs under.
 */
const childEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_(config_(local_|global_)?prefix$|package_|lifecycle_|command$)/i.test(key)) continue
    if (key === "NODE_OPTIONS") continue
    env[key] = value
  }
  return env
}

interface Ran {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const run = (file: string, args: ReadonlyArray<string>, cwd: string, timeout = 120_000) =>
  new Promise<Ran>((done) => {
    execFile(file, [...args], { cwd, env: childEnv(), timeout, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  })

const ok = async (file: string, args: ReadonlyArray<string>, cwd: string, timeout?: number) => {
  const ran = await run(file, args, cwd, timeout)
  if (ran.code !== 0) throw new Error(`${file} ${args.join(" ")} exited ${ran.code}\n${ran.stdout}\n${ran.stderr}`)
  return ran.stdout
}

/** `node <script>` in the scratch project: the script's last stdout line, as JSON. */
const node = async (scratch: string, name: string, source: string): Promise<unknown> => {
  writeFileSync(join(scratch, name), source)
  const lines = (await ok(process.execPath, [name], scratch, 60_000)).trim().split("\n")
  return JSON.parse(lines[lines.length - 1] ?? "null")
}

/** The packages an ES module of the installed package loads, following its relative imports. */
const packagesLoadedBy = (entry: string): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    const source = readFileSync(file, "utf8")
    // Static imports and re-exports only, one per line as tsc emits them (a description string
    // that happens to hold `from "` is not an import).
    for (const match of source.matchAll(/^(?:import|export)\b[^\n"]*\bfrom\s*"([^"]+)";?$|^import\s*"([^"]+)";?$/gm)) {
      const specifier = (match[1] ?? match[2])!
      if (specifier.startsWith(".")) visit(resolve(dirname(file), specifier))
      else if (!specifier.startsWith("node:")) {
        const parts = specifier.split("/")
        packages.add(specifier.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!)
      }
    }
  }
  visit(entry)
  return [...packages].sort()
}

const secret = "5f".repeat(32)
const timestamp = Math.floor(Date.now() / 1000)
const body = JSON.stringify({ id: "evt_pack_1", type: "intent.created", created_at: "2026-01-01T00:00:00Z", data: {} })
const vector = `v1=${createHmac("sha256", Buffer.from(secret, "hex")).update(`${timestamp}.${body}`).digest("hex")}`

const CONSUMER_TS = `import * as Effect from "effect/Effect"
import { Database, Ids, Server, Services } from "trade-intent-router"
import { make } from "trade-intent-router/client"
import { sign, verify, type VerifiedDelivery, verifyWebhook, WebhookVerificationError } from "trade-intent-router/receiver"

const secret = "ab".repeat(32)
const signature: string = sign(secret, 1_700_000_000, "{}")
export const checked: Effect.Effect<VerifiedDelivery, unknown> = verify({ headers: { "sr-signature": signature }, body: "{}", secret })
export const viaPromise: Promise<VerifiedDelivery> = verifyWebhook({ headers: new Headers(), body: new Uint8Array(), secret })
export const reason = (error: WebhookVerificationError): string => error.reason
export const client = make({ baseUrl: "http://localhost:8080", token: "sk_test_x" }).pipe(
  Effect.flatMap((c) => c.intents.getIntent({ path: { id: Ids.IntentId.make("00000000-0000-4000-8000-000000000000") } }))
)
export const layers = [Services.layer, Server.layer, Database.migrated(Database.pglite(undefined))] as const
`

/** A consumer's strict settings; `skipLibCheck` as most projects (and Effect's own guide) set it. */
const consumerTsconfig = (skipLibCheck: boolean) => ({
  compilerOptions: {
    strict: true,
    noUncheckedIndexedAccess: true,
    module: "nodenext",
    moduleResolution: "nodenext",
    target: "es2022",
    types: ["node"],
    noEmit: true,
    skipLibCheck
  },
  files: ["consumer.ts"]
})

describe("the installable package", () => {
  let scratch = ""
  let tarballFiles: ReadonlyArray<string> = []

  beforeAll(async () => {
    await ok("npm", ["run", "--silent", "build:lib"], ROOT)
    scratch = mkdtempSync(join(tmpdir(), "tir-package-"))
    // `prepare` has just run as build:lib; --ignore-scripts packs exactly that lib/.
    const packed = JSON.parse(await ok("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", scratch], ROOT)) as
      ReadonlyArray<{ readonly filename: string; readonly files: ReadonlyArray<{ readonly path: string }> }>
    const tarball = packed[0]!
    tarballFiles = tarball.files.map((file) => file.path)
    writeFileSync(join(scratch, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }, null, 2))
    // The peers (effect, @effect/*) come from the registry. A Node program has Node's types; the
    // same @types/node as this repository's. No dependency's install script is needed to import it.
    const typesNode = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      readonly devDependencies: Readonly<Record<string, string>>
    }).devDependencies["@types/node"]
    await ok(
      "npm",
      ["install", `./${tarball.filename}`, `@types/node@${typesNode}`, "--ignore-scripts", ...NPM_ARGS],
      scratch,
      200_000
    )
  }, 240_000)

  afterAll(() => {
    if (scratch !== "") rmSync(scratch, { recursive: true, force: true })
  })

  it("the tarball holds lib/ with declarations, README and LICENSE; no sources, tests, web or dist", () => {
    for (const file of ["package.json", "README.md", "LICENSE", "lib/index.js", "lib/index.d.ts", "lib/Receiver.js", "lib/Receiver.d.ts", "lib/Client.js", "lib/Client.d.ts"]) {
      expect(tarballFiles).toContain(file)
    }
    expect(tarballFiles.filter((file) => !/^(lib\/.+\.(js|d\.ts|d\.ts\.map)|package\.json|README\.md|LICENSE)$/.test(file))).toEqual([])
  })

  it("plain node imports trade-intent-router/receiver, and sign and verify agree with the vector", async () => {
    const result = await node(
      scratch,
      "receiver.mjs",
      `import { Effect } from "effect"
const receiver = await import("trade-intent-router/receiver")
const [secret, timestamp, body] = ${JSON.stringify([secret, timestamp, body])}
const headers = { "sr-signature": receiver.sign(secret, timestamp, body), "sr-timestamp": String(timestamp) }
const verified = await Effect.runPromise(receiver.verify({ headers, body, secret }))
const viaPromise = await receiver.verifyWebhook({ headers, body: new TextEncoder().encode(body), secret })
const forged = await receiver.verifyWebhook({ headers: { ...headers, "sr-signature": "v1=" + "0".repeat(64) }, body, secret })
  .then(() => "accepted", (error) => error.reason)
console.log(JSON.stringify({ signature: headers["sr-signature"], verified, viaPromise, forged }))
`
    )
    expect(result).toEqual({
      signature: vector,
      verified: { eventId: "evt_pack_1", timestamp, body },
      viaPromise: { eventId: "evt_pack_1", timestamp, body },
      forged: "signature_mismatch"
    })
  })

  it("the receiver loads only effect and @effect/platform; the client too (no database, PGlite, Redis or pg)", () => {
    const lib = join(scratch, "node_modules", "trade-intent-router", "lib")
    expect(packagesLoadedBy(join(lib, "Receiver.js"))).toEqual(["@effect/platform", "effect"])
    expect(packagesLoadedBy(join(lib, "Client.js"))).toEqual(["@effect/platform", "effect"])
  })

  it("plain node imports trade-intent-router/client and trade-intent-router: make and the Layers", async () => {
    const result = await node(
      scratch,
      "main.mjs",
      `import { Layer } from "effect"
const client = await import("trade-intent-router/client")
const main = await import("trade-intent-router")
console.log(JSON.stringify({
  make: typeof client.make,
  sameMake: main.Client.make === client.make,
  servicesLayer: typeof main.Services.layer,
  serverLayer: typeof main.Server.layer,
  apiLive: Layer.isLayer(main.Server.ApiLive),
  database: Layer.isLayer(main.Database.migrated(main.Database.pglite(undefined)))
}))
`
    )
    expect(result).toEqual({
      make: "function",
      sameMake: true,
      servicesLayer: "function",
      serverLayer: "function",
      apiLive: true,
      database: true
    })
  })

  it("tsc under strict, noUncheckedIndexedAccess and nodenext accepts the three subpaths", async () => {
    writeFileSync(join(scratch, "consumer.ts"), CONSUMER_TS)
    writeFileSync(join(scratch, "tsconfig.json"), JSON.stringify(consumerTsconfig(true), null, 2))
    const ran = await run(process.execPath, [TSC, "-p", "tsconfig.json"], scratch)
    expect(ran.stdout + ran.stderr).toBe("")
    expect(ran.code).toBe(0)
  }, 60_000)

  it("with skipLibCheck off, the package's own declarations have no errors either", async () => {
    writeFileSync(join(scratch, "consumer.ts"), CONSUMER_TS)
    writeFileSync(join(scratch, "tsconfig.strict.json"), JSON.stringify(consumerTsconfig(false), null, 2))
    const ran = await run(process.execPath, [TSC, "-p", "tsconfig.strict.json"], scratch)
    // Third parties' declarations may need more (PGlite's the Emscripten types, @effect/sql-pg's
    // @types/pg): only errors in this package's files or the consumer's count here.
    const ours = (ran.stdout + ran.stderr).split("\n").filter((line) =>
      /^(node_modules\/trade-intent-router\/|consumer\.ts)/.test(line)
    )
    expect(ours).toEqual([])
  }, 60_000)
})
