import * as Config from "effect/Config"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/** What a command reports on one line of stderr, and its exit code: 2 for a usage error, else 1. */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  readonly message: string
  readonly exitCode: 1 | 2
}> {}

/** The command line is at fault: a flag missing, unknown or refused. */
export const usage = (message: string) => new CliFailure({ message, exitCode: 2 })

/** Anything else: the environment, the network, the API's answer. */
export const failure = (message: string) => new CliFailure({ message, exitCode: 1 })

/** A line on stderr, outside `Console` (which the CLI's own error printing goes through). */
export const printError = (line: string) => Effect.sync(() => void process.stderr.write(`${line}\n`))

/** `requests_per_minute` → `--requests-per-minute`. */
const flagOf = (path: ReadonlyArray<PropertyKey>) => {
  const field = path.filter((segment) => typeof segment === "string").at(-1)
  return field === undefined ? "the flags" : `--${String(field).replaceAll("_", "-")}`
}

/**
 * Flags decoded through the schema the API decodes the payload with, so that the CLI refuses what
 * the API would, with the same rule: `--tier must be one of: free, pro, enterprise`.
 */
export const decodeFlags = <A, I>(schema: Schema.Schema<A, I>, input: unknown) =>
  Schema.decodeUnknown(schema)(JSON.parse(JSON.stringify(input))).pipe(
    Effect.mapError((error) => {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
      if (issue === undefined) return usage("the flags are invalid")
      const flag = flagOf(issue.path)
      switch (issue._tag) {
        case "Missing":
          return usage(`${flag} is required`)
        case "Unexpected":
          return usage(`${flag} is not a known flag`)
        default:
          return usage(`${flag} ${issue.message}`)
      }
    })
  )

const reasons: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  ETIMEDOUT: "timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  UND_ERR_CONNECT_TIMEOUT: "connection timed out",
  UND_ERR_SOCKET: "connection closed"
}

/** The system error under a failed `fetch` (its `cause`, or the first of an AggregateError's). */
const networkCode = (error: unknown, depth = 0): string | undefined => {
  if (typeof error !== "object" || error === null || depth > 5) return undefined
  if ("code" in error && typeof error.code === "string" && error.code in reasons) return error.code
  if ("errors" in error && Array.isArray(error.errors)) {
    for (const inner of error.errors) {
      const code = networkCode(inner, depth + 1)
      if (code !== undefined) return code
    }
  }
  return "cause" in error ? networkCode(error.cause, depth + 1) : undefined
}

const innermostMessage = (error: unknown): string => {
  let current = error
  while (typeof current === "object" && current !== null && "cause" in current && current.cause !== undefined) {
    current = current.cause
  }
  return current instanceof Error ? current.message : String(current)
}

/** `cannot reach http://127.0.0.1:8080: connection refused (ECONNREFUSED)` */
export const unreachable = (baseUrl: string, cause: unknown) => {
  const code = networkCode(cause)
  return failure(
    `cannot reach ${baseUrl}: ${code === undefined ? innermostMessage(cause) : `${reasons[code]} (${code})`}`
  )
}

/** The router's base URL: `ROUTER_URL`, else the local default. */
export const routerUrl = Config.string("ROUTER_URL").pipe(
  Config.withDefault("http://127.0.0.1:8080"),
  Config.map((url) => url.replace(/\/$/, ""))
)

/** A command's answer on stdout, as JSON. */
export const printJson = (value: unknown) => Effect.sync(() => void process.stdout.write(`${JSON.stringify(value, null, 2)}\n`))
