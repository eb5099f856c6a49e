/** CPU time and memory of a process, read from Linux's /proc. */
import { readdirSync, readFileSync } from "node:fs"

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100

/** User plus system CPU time consumed so far by `pid`, in milliseconds. */
export const cpuMs = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND
}

const statusKiB = (pid: number, field: string): number => {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return match === null ? Number.NaN : Number(match[1])
}

/** Resident memory now, in MiB. */
export const rssMiB = (pid: number): number => statusKiB(pid, "VmRSS") / 1024

/** The highest resident memory since the process started, in MiB. */
export const peakRssMiB = (pid: number): number => statusKiB(pid, "VmHWM") / 1024

/** Time a thread (or a set of threads) spent on a core, and runnable but waiting for one, in ms. */
export interface Scheduled {
  readonly cpuMs: number
  readonly waitMs: number
}

/**
 * From /proc/<pid>/task/<tid>/schedstat (nanoseconds): the main thread's time on a core and in the
 * run queue, and the same summed over the process's other threads (V8's helpers among them).
 * Threads that have exited are no longer counted.
 */
export const threadTimes = (pid: number): { readonly main: Scheduled; readonly others: Scheduled } => {
  let main: Scheduled = { cpuMs: 0, waitMs: 0 }
  let others: Scheduled = { cpuMs: 0, waitMs: 0 }
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let text: string
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8")
    } catch {
      continue // the thread ended meanwhile
    }
    const [onCpu, waiting] = text.trim().split(" ").map(Number)
    const times = { cpuMs: (onCpu ?? 0) / 1e6, waitMs: (waiting ?? 0) / 1e6 }
    if (tid === String(pid)) main = times
    else others = { cpuMs: others.cpuMs + times.cpuMs, waitMs: others.waitMs + times.waitMs }
  }
  return { main, others }
}

/**
 * User plus system CPU time consumed so far by every PostgreSQL process of this machine (the
 * server, its backends and its background workers, all named `postgres`), in milliseconds. A
 * backend that has ended is counted in its parent's children's times (fields 16 and 17), so the
 * total only grows.
 */
export const postgresCpuMs = (): number => {
  let total = 0
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() !== "postgres") continue
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      // utime, stime, cutime, cstime: fields 14 to 17 of the whole line, 12 to 15 after the name.
      total += fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0)
    } catch {
      // the process ended meanwhile
    }
  }
  return (total * 1000) / TICKS_PER_SECOND
}

/**
 * Samples `pid`'s CPU and memory while `work` runs: CPU ms spent and the highest RSS seen, the
 * share of the time `work` took that the process's main (JavaScript) thread was busy, on a core or
 * waiting in the run queue for one, rather than waiting for I/O (`mainBusy`: near 1, requests
 * queue for the thread), and the CPU the machine's PostgreSQL processes spent meanwhile when
 * `countDatabase` (the database is on this machine; `NaN` otherwise).
 */
export const measure = async <A>(
  pid: number,
  work: () => Promise<A>,
  countDatabase = false
): Promise<{
  readonly result: A
  readonly cpuMs: number
  readonly dbCpuMs: number
  readonly peakMiB: number
  readonly mainBusy: number
}> => {
  const cpuBefore = cpuMs(pid)
  const busy = () => {
    const { main } = threadTimes(pid)
    return main.cpuMs + main.waitMs
  }
  const mainBefore = busy()
  const started = performance.now()
  const dbBefore = countDatabase ? postgresCpuMs() : Number.NaN
  let peakMiB = rssMiB(pid)
  const sampler = setInterval(() => {
    peakMiB = Math.max(peakMiB, rssMiB(pid))
  }, 50)
  try {
    const result = await work()
    const mainBusy = (busy() - mainBefore) / (performance.now() - started)
    peakMiB = Math.max(peakMiB, rssMiB(pid))
    const dbCpuMs = countDatabase ? postgresCpuMs() - dbBefore : Number.NaN
    return { result, cpuMs: cpuMs(pid) - cpuBefore, dbCpuMs, peakMiB, mainBusy }
  } finally {
    clearInterval(sampler)
  }
}
