/**
 * `node --import tsx scripts/build-dashboard.ts [outDir]`: bundles the dashboard (web/dashboard)
 * into `outDir` (`dist/dashboard` unless given): content-hashed JavaScript and CSS, and the
 * index.html that loads them. `npm run build` runs it.
 */
import * as esbuild from "esbuild"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { mkdir, readdir, rm, stat, writeFile } from "node:fs/promises"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { gzipSync } from "node:zlib"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const WEB = Path.join(ROOT, "web", "dashboard")

/** What a build writes: `<name>-<hash>.<ext>` (esbuild's hash alphabet) and index.html. */
const OUTPUT = /^(?:[a-z]+-[A-Z0-9]{8}\.(?:js|css|svg)(?:\.map)?|index\.html)$/

/** The only project code the browser may load: the API contract and the domain it is made of. */
const BROWSER_SAFE = /^src\/(?:api|domain)\//

const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#3730a3"/><path d="M7 21l6-6 4 4 8-9" fill="none" stroke="#fff" stroke-width="3" stroke-linecap="round" stroke-linejoin="round"/><circle cx="25" cy="10" r="2" fill="#fbbf24"/></svg>`

/** esbuild's style of content hash, for the file esbuild does not write. */
const hashOf = (content: string) =>
  createHash("sha256").update(content).digest("base64url").replace(/[^A-Za-z0-9]/g, "").slice(0, 8).toUpperCase()

const indexHtml = (files: { readonly js: string; readonly css: string; readonly icon: string }) =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<title>Dashboard · Trade Intent Router</title>
<link rel="icon" type="image/svg+xml" href="/dashboard/${files.icon}">
<link rel="stylesheet" href="/dashboard/${files.css}">
<script type="module" src="/dashboard/${files.js}"></script>
</head>
<body>
<div id="app"></div>
<noscript><p class="noscript">The dashboard needs JavaScript.</p></noscript>
</body>
</html>
`

/** Bundles the dashboard into `outDir`, replacing an earlier build there. */
export const buildDashboard = async (outDir: string): Promise<void> => {
  const out = Path.resolve(outDir)
  await mkdir(out, { recursive: true })
  // Only what an earlier build wrote is removed: outDir may be any folder.
  for (const name of await readdir(out)) if (OUTPUT.test(name)) await rm(Path.join(out, name))

  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: { main: Path.join(WEB, "main.tsx"), styles: Path.join(WEB, "styles.css") },
    outdir: out,
    entryNames: "[name]-[hash]",
    assetNames: "[name]-[hash]",
    bundle: true,
    minify: true,
    sourcemap: "linked",
    sourcesContent: false,
    legalComments: "none",
    platform: "browser",
    format: "esm",
    target: "es2020",
    jsx: "automatic",
    jsxImportSource: "preact",
    tsconfig: Path.join(WEB, "tsconfig.json"),
    define: { "process.env.NODE_ENV": "\"production\"" },
    metafile: true,
    logLevel: "warning"
  })

  const server = Object.keys(result.metafile.inputs).filter((input) =>
    input.startsWith("node:") || (input.startsWith("src/") && !BROWSER_SAFE.test(input))
  )
  if (server.length > 0) throw new Error(`the dashboard bundle imports server code: ${server.join(", ")}`)

  const outputOf = (entry: string) => {
    const found = Object.entries(result.metafile.outputs).find(([, output]) =>
      output.entryPoint !== undefined && Path.resolve(ROOT, output.entryPoint) === entry
    )
    if (found === undefined) throw new Error(`esbuild wrote nothing for ${entry}`)
    return Path.basename(found[0])
  }
  const icon = `icon-${hashOf(ICON)}.svg`
  await writeFile(Path.join(out, icon), ICON)
  await writeFile(
    Path.join(out, "index.html"),
    indexHtml({ js: outputOf(Path.join(WEB, "main.tsx")), css: outputOf(Path.join(WEB, "styles.css")), icon })
  )
}

const report = async (outDir: string) => {
  const names = (await readdir(outDir)).filter((name) => OUTPUT.test(name) && !name.endsWith(".map")).sort()
  for (const name of names) {
    const file = Path.join(outDir, name)
    const { size } = await stat(file)
    const gzipped = gzipSync(readFileSync(file)).length
    console.log(`  ${name.padEnd(28)} ${(size / 1024).toFixed(1).padStart(7)} KiB  (${(gzipped / 1024).toFixed(1)} KiB gzipped)`)
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(Path.resolve(process.argv[1])).href) {
  const outDir = process.argv[2] ?? Path.join(ROOT, "dist", "dashboard")
  buildDashboard(outDir).then(
    () => {
      // `npm run build` (and so `npm start`) stays quiet; run on its own, it reports the sizes.
      if (process.env.npm_lifecycle_event !== "build") {
        console.log(`Dashboard built into ${Path.relative(process.cwd(), outDir) || "."}:`)
        return report(outDir)
      }
    },
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error)
      process.exitCode = 1
    }
  )
}
