/**
 * What routing a mock intent costs the service's CPU, with HTTP and the load's clients out of the
 * way: RoutingDriver.ts run as a child process on a fresh database, creations alone (no routing
 * worker) and creations routed through the mock, alternated, `PAIRS` times. The difference of the
 * two means is routing's CPU per intent (the mock's book, the recording, the worker's loop), the
 * service's and PostgreSQL's.
 */
import * as Schema from "effect/Schema"
import { dropDatabase, freshDatabase, ROOT, run } from "../lib/Service.js"

/** Creations in each measured round, and the fibers making them. */
export const DRIVER_INTENTS = 8000
export const DRIVER_FIBERS = 50
/** Rounds of each variant, alternated. */
const PAIRS = 2

/** One measured round of the driver. */
export interface DriverRun {
  readonly perSecond: number
  /** The process's CPU per intent, user and system, in µs. */
  readonly cpuUs: number
  /** The CPU of the machine's PostgreSQL processes per intent over the round, in µs. */
  readonly databaseUs: number
}

export interface RoutingCost {
  readonly alone: ReadonlyArray<DriverRun>
  readonly routed: ReadonlyArray<DriverRun>
}

/** The driver's one JSON line. */
const DriverOutput = Schema.parseJson(Schema.Struct({
  intents: Schema.Number,
  seconds: Schema.Number,
  userUs: Schema.Number,
  systemUs: Schema.Number,
  databaseUs: Schema.Number
}))
const decodeOutput = Schema.decodeUnknownSync(DriverOutput)

/** The driver's output, read: its last JSON line (a warning logged around it is passed over). */
const parseRun = (output: string): DriverRun => {
  const line = output.split("\n").filter((text) => text.startsWith("{")).at(-1) ?? ""
  const { databaseUs, intents, seconds, systemUs, userUs } = decodeOutput(line)
  return { perSecond: intents / seconds, cpuUs: (userUs + systemUs) / intents, databaseUs: databaseUs / intents }
}

/** One round of the driver, routing `on` or `off`, on a database of its own. */
const driverRun = async (admin: string, routing: "on" | "off"): Promise<DriverRun> => {
  const database = await freshDatabase(admin, "tir_bench_routing")
  try {
    const args = ["--import", "tsx", "scripts/bench/RoutingDriver.ts", database.url, routing, String(DRIVER_INTENTS), String(DRIVER_FIBERS)]
    // A failing driver rejects with its exit code and its stderr.
    const { stdout } = await run(process.execPath, args, { cwd: ROOT })
    return parseRun(stdout)
  } finally {
    await dropDatabase(admin, database.name)
  }
}

/** Creations alone and routed, alternated, `PAIRS` rounds of each. */
export const routingCost = async (admin: string): Promise<RoutingCost> => {
  const alone: Array<DriverRun> = []
  const routed: Array<DriverRun> = []
  for (let pair = 0; pair < PAIRS; pair++) {
    alone.push(await driverRun(admin, "off"))
    routed.push(await driverRun(admin, "on"))
  }
  return { alone, routed }
}

/** The mean of the runs' figure `of`. */
export const mean = (runs: ReadonlyArray<DriverRun>, of: (run: DriverRun) => number): number =>
  runs.length === 0 ? Number.NaN : runs.reduce((sum, run) => sum + of(run), 0) / runs.length
