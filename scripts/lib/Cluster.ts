/**
 * A throwaway PostgreSQL cluster for drills that stop and start the database server: `initdb` into
 * a temporary folder, on a free port, trust authentication, never the shared server.
 */
import { chownSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort, run } from "./Service.js"

export interface Cluster {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  readonly adminUrl: string
  readonly port: number
  /** `pg_ctl start`, waiting until it accepts connections. */
  readonly start: () => Promise<void>
  /** `pg_ctl stop -m fast`: disconnects every session, then shuts down cleanly. */
  readonly stop: () => Promise<void>
  /** Stops the server (immediate) if it runs and deletes the folder. */
  readonly remove: () => Promise<void>
}

const binaries = () => {
  const versions = readdirSync("/usr/lib/postgresql").filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(a) - Number(b))
  const version = versions.at(-1)
  if (version === undefined) throw new Error("no PostgreSQL under /usr/lib/postgresql")
  return `/usr/lib/postgresql/${version}/bin`
}

/** initdb and pg_ctl refuse to run as root: as root they run as the `postgres` user. */
const asOwner = async (command: string, args: ReadonlyArray<string>) => {
  const root = process.getuid?.() === 0
  const [file, argv] = root ? ["runuser", ["-u", "postgres", "--", command, ...args]] : [command, [...args]]
  try {
    return await run(file, argv, { timeout: 60_000 })
  } catch (error) {
    const stderr = typeof error === "object" && error !== null && "stderr" in error ? String(error.stderr) : ""
    throw new Error(`${command} ${args.join(" ")} failed: ${stderr || String(error)}`)
  }
}

/** Creates and starts a cluster; `remove()` it in a `finally`. */
export const createCluster = async (): Promise<Cluster> => {
  const bin = binaries()
  const dir = mkdtempSync(join(tmpdir(), "tir-drill-pg-"))
  const data = join(dir, "data")
  const port = await freePort()
  let running = false
  const pgCtl = (...args: ReadonlyArray<string>) => asOwner(join(bin, "pg_ctl"), ["-D", data, ...args])
  const cluster: Cluster = {
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start: async () => {
      await pgCtl("-l", join(dir, "server.log"), "-w", "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, "start")
      running = true
    },
    stop: async () => {
      await pgCtl("-m", "fast", "-w", "stop")
      running = false
    },
    remove: async () => {
      try {
        if (running) await pgCtl("-m", "immediate", "-w", "stop")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }
  }
  try {
    if (process.getuid?.() === 0) {
      const uid = Number((await run("id", ["-u", "postgres"])).stdout.trim())
      const gid = Number((await run("id", ["-g", "postgres"])).stdout.trim())
      chownSync(dir, uid, gid)
    }
    await asOwner(join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"])
    await cluster.start()
  } catch (error) {
    await cluster.remove()
    throw error
  }
  return cluster
}
