/** The node arguments of `npm start`, read from package.json, so that every harness runs the service as it does. */
import { readFileSync } from "node:fs"

const ROOT = new URL("../..", import.meta.url)

/** `npm start`'s arguments to node (its flags and `dist/main.js`), from package.json's `start` script. */
export const startArgs = (): ReadonlyArray<string> => {
  const manifest: unknown = JSON.parse(readFileSync(new URL("package.json", ROOT), "utf8"))
  const script = typeof manifest === "object" && manifest !== null && "scripts" in manifest &&
      typeof manifest.scripts === "object" && manifest.scripts !== null && "start" in manifest.scripts
    ? manifest.scripts.start
    : undefined
  const words = typeof script === "string" ? script.trim().split(/\s+/) : []
  if (words[0] !== "node") throw new Error(`package.json's start script must run node, not: ${String(script)}`)
  return words.slice(1)
}
