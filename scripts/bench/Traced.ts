/**
 * The bench's server processes, started with V8's GC trace (`--trace-gc-nvp`) so that the bench can
 * tell how much of a server's CPU time goes to garbage collection.
 *
 * With that flag V8 prints one line per collection to stdout, as `name=value` pairs: `pause` is
 * the time the collection stopped JavaScript on the main thread, `incremental` (full collections
 * only) the incremental marking steps done on the main thread between pauses, and each
 * `background.*` the time V8's helper threads spent on it (parallel scavenging, concurrent marking,
 * sweeping, evacuation). The lines are read whole (a line split across two reads of the pipe would
 * otherwise be lost) and kept out of the process's other output.
 *
 * V8 times those phases by the clock, not by CPU: while the machine's cores are oversubscribed, a
 * pause also counts the time its thread sat in the run queue. So {@link gcShareBetween} scales the
 * main thread's GC time by the fraction of its runnable time the main thread was actually on a core,
 * and the helpers' GC time by the same fraction for the process's other threads (from
 * /proc/<pid>/task/<tid>/schedstat), each at most that class of threads' CPU time.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createInterface } from "node:readline"
import type { Readable } from "node:stream"
import { startCommand, untilHealthy } from "../../test/support/Harness.js"
import { ADMIN_TOKEN, build, freePort, ROOT, type Service } from "../lib/Service.js"
import { type Scheduled, threadTimes } from "./ProcessStats.js"

const GC_FLAG = "--trace-gc-nvp"
// A process with more than one isolate (tsx runs its loader on a thread of its own) may interleave
// their lines: one isolate's `[pid:isolate] t ms: ` prefix, then another's whole line, then the
// first one's `pause=…` alone. Each `pause=…` is one collection, whatever prefixes precede it.
const GC_LINE = /^(?:\[\d+:0x[0-9a-f]+\]\s+[\d.]+ ms: )*(pause=.*)$/

/** One collection's time in milliseconds, as V8 clocked it. */
export interface Collection {
  /** Pause plus incremental marking steps, on the main (JavaScript) thread. */
  readonly mainMs: number
  /** V8's helper threads. */
  readonly backgroundMs: number
}

/** The collection a `--trace-gc-nvp` line reports, or undefined for any other line. */
export const parseCollection = (line: string): Collection | undefined => {
  const pairs = GC_LINE.exec(line)?.[1]
  if (pairs === undefined) return undefined
  let mainMs = 0
  let backgroundMs = 0
  for (const pair of pairs.split(" ")) {
    const equals = pair.indexOf("=")
    const name = pair.slice(0, equals)
    const value = Number(pair.slice(equals + 1))
    if (equals < 0 || !Number.isFinite(value)) continue
    if (name === "pause" || name === "incremental") mainMs += value
    else if (name.startsWith("background.")) backgroundMs += value
  }
  return { mainMs, backgroundMs }
}

/** The collections of one process so far. */
export interface GcTally {
  /** All GC time so far, in milliseconds as V8 clocked it. */
  readonly totalMs: () => number
  /** The main thread's share of it. */
  readonly mainMs: () => number
  readonly collections: () => number
}

/** A process's GC trace and its threads' times at one moment. */
export interface GcSnapshot {
  readonly gcMainMs: number
  readonly gcBackgroundMs: number
  readonly main: Scheduled
  readonly others: Scheduled
}

/** Before anything ran: to measure a whole process's life. */
export const PROCESS_START: GcSnapshot = {
  gcMainMs: 0,
  gcBackgroundMs: 0,
  main: { cpuMs: 0, waitMs: 0 },
  others: { cpuMs: 0, waitMs: 0 }
}

export const gcSnapshot = (pid: number, gc: GcTally): GcSnapshot => ({
  gcMainMs: gc.mainMs(),
  gcBackgroundMs: gc.totalMs() - gc.mainMs(),
  ...threadTimes(pid)
})

export interface GcShare {
  /** The process's CPU time (all threads), in ms. */
  readonly cpuMs: number
  /** The part of it spent in GC, estimated as described above, in ms. */
  readonly gcCpuMs: number
  /** GC time as V8 clocked it, in ms. */
  readonly gcClockMs: number
  /** gcCpuMs / cpuMs. */
  readonly share: number
}

/** GC's share of the process's CPU time between two snapshots. */
export const gcShareBetween = (before: GcSnapshot, after: GcSnapshot): GcShare => {
  const onCore = (from: Scheduled, to: Scheduled) => {
    const cpuMs = to.cpuMs - from.cpuMs
    const runnableMs = cpuMs + (to.waitMs - from.waitMs)
    return { cpuMs, fraction: runnableMs > 0 ? cpuMs / runnableMs : 1 }
  }
  const main = onCore(before.main, after.main)
  const others = onCore(before.others, after.others)
  const mainGc = after.gcMainMs - before.gcMainMs
  const backgroundGc = after.gcBackgroundMs - before.gcBackgroundMs
  const gcCpuMs = Math.min(main.cpuMs, mainGc * main.fraction) + Math.min(others.cpuMs, backgroundGc * others.fraction)
  const cpuMs = main.cpuMs + others.cpuMs
  return { cpuMs, gcCpuMs, gcClockMs: mainGc + backgroundGc, share: cpuMs > 0 ? gcCpuMs / cpuMs : Number.NaN }
}

export interface Traced {
  readonly child: ChildProcess
  readonly gc: GcTally
  /** Everything it printed so far but its GC lines. */
  readonly output: () => string
}

/**
 * Runs `node --trace-gc-nvp <args>` in the repository, each line of its stdout and stderr read
 * whole: GC lines counted, the others kept and given to `onLine`.
 */
export const spawnTraced = (
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  onLine: (line: string) => void
): Traced => {
  const child = spawn(process.execPath, [GC_FLAG, ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] })
  let main = 0
  let background = 0
  let count = 0
  let output = ""
  const read = (stream: Readable | null) => {
    if (stream === null) return
    createInterface({ input: stream, crlfDelay: Infinity }).on("line", (line) => {
      const collection = parseCollection(line)
      if (collection !== undefined) {
        main += collection.mainMs
        background += collection.backgroundMs
        count++
        return
      }
      output += `${line}\n`
      if (line !== "") onLine(line)
    })
  }
  read(child.stdout)
  read(child.stderr)
  return {
    child,
    gc: { totalMs: () => main + background, mainMs: () => main, collections: () => count },
    output: () => output
  }
}

const labelled = (label: string) => (line: string) => process.stderr.write(`[${label}] ${line}\n`)

export interface TracedService {
  readonly service: Service
  readonly gc: GcTally
}

/**
 * The service as `npm start` runs it (the bundle built first, the same node flags), with the GC
 * trace added, on PostgreSQL at `databaseUrl` with the bench's admin token; `env` adds or overrides
 * settings. Resolves once `/healthz` answers 200. Its other output goes to stderr, labelled.
 */
export const startService = async (
  databaseUrl: string,
  env: Record<string, string> = {},
  label = "service",
  healthTimeoutMs = 60_000
): Promise<TracedService> => {
  build()
  const port = await freePort()
  // The caller's DATABASE_URL and REDIS_URL never leak in: pass them in `env`.
  const { DATABASE_URL: _database, REDIS_URL: _redis, ...inherited } = process.env
  const command = startCommand()
  const traced = spawnTraced(command.args, {
    ...inherited,
    ...command.env,
    PORT: String(port),
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    DATABASE_URL: databaseUrl,
    ADMIN_TOKEN,
    ...env
  }, labelled(label))
  const { child } = traced
  const baseUrl = `http://127.0.0.1:${port}`
  if (await untilHealthy(child, baseUrl, healthTimeoutMs)) {
    return { service: { child, baseUrl, port, output: traced.output }, gc: traced.gc }
  }
  child.kill("SIGKILL")
  throw new Error(`${label} did not start (exit code ${child.exitCode}):\n${traced.output()}`)
}

export interface ReferenceServer {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly pid: number
  readonly gc: GcTally
}

/**
 * One of the reference servers (`script`, under scripts/bench/) as its own process on
 * `databaseUrl`, run through tsx; resolves once it prints `listening`.
 */
export const startReferenceServer = async (
  script: string,
  databaseUrl: string,
  label: string
): Promise<ReferenceServer> => {
  const port = await freePort()
  let listening = () => {}
  const ready = new Promise<void>((resolve) => {
    listening = resolve
  })
  const args = ["--import", "tsx", `scripts/bench/${script}`, databaseUrl, String(port)]
  const traced = spawnTraced(args, process.env, (line) => {
    if (line === "listening") listening()
    else labelled(label)(line)
  })
  const { child } = traced
  const exited = new Promise<never>((_, reject) => {
    child.once("exit", (code) => reject(new Error(`${label} exited with ${code}:\n${traced.output()}`)))
  })
  await Promise.race([ready, exited])
  // Once it is up, its exit is reported by the bench's own checks (its requests fail).
  exited.catch(() => undefined)
  if (child.pid === undefined) throw new Error(`${label} has no pid`)
  return { child, baseUrl: `http://127.0.0.1:${port}`, pid: child.pid, gc: traced.gc }
}
