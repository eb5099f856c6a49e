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

/** Samples `pid`'s CPU and memory while `work` runs: CPU ms spent and the highest RSS seen. */
export const measure = async <A>(
  pid: number,
  work: () => Promise<A>
): Promise<{ readonly result: A; readonly cpuMs: number; readonly peakMiB: number }> => {
  const cpuBefore = cpuMs(pid)
  let peakMiB = rssMiB(pid)
  const sampler = setInterval(() => {
    peakMiB = Math.max(peakMiB, rssMiB(pid))
  }, 50)
  try {
    const result = await work()
    peakMiB = Math.max(peakMiB, rssMiB(pid))
    return { result, cpuMs: cpuMs(pid) - cpuBefore, peakMiB }
  } finally {
    clearInterval(sampler)
  }
}
