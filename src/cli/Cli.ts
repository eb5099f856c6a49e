import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Usage from "@effect/cli/Usage"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { readFileSync } from "node:fs"
import * as Admin from "./Admin.js"
import * as Events from "./Events.js"
import { CliFailure, failure, printError, usage } from "./Failure.js"

/** The package's version: package.json sits two folders up from both src/cli/ and lib/cli/. */
const version = (() => {
  try {
    const json: unknown = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"))
    return typeof json === "object" && json !== null && "version" in json ? String(json.version) : "unknown"
  } catch {
    return "unknown"
  }
})()

/** `tir admin …` and `tir events …`. */
export const command = Command.make("tir").pipe(
  Command.withDescription("The Trade Intent Router from the command line"),
  Command.withSubcommands([Admin.command, Events.command])
)

const entry = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>) => ({
  names: [...Command.getNames(command)],
  usage: Command.getUsage(command)
})

// Each tuple holds commands of different types: read them as one (only their names and usage are read).
type AnyCommand = Command.Command<string, never, unknown, unknown>
const entries = (commands: ReadonlyArray<unknown>) => (commands as ReadonlyArray<AnyCommand>).map(entry)

const groups = [
  { name: "admin", ...entry(Admin.command), subcommands: entries(Admin.subcommands) },
  { name: "events", ...entry(Events.command), subcommands: entries(Events.subcommands) }
]

const plain = (text: string) =>
  text.replace(/\x1b\[[0-9;]*m/g, "").split("\n").map((line) => line.trim()).filter((line) => line !== "").join("; ")

/**
 * The usage of the deepest command the arguments name: `Usage: tir admin create-user --name NAME …`;
 * `prefix` stands for `tir <group>` when the group is run as its own program (`npm run admin --`).
 */
const hint = (args: ReadonlyArray<string>, prefix: string | undefined) => {
  const words = args.filter((arg) => !arg.startsWith("-"))
  const group = groups.find((candidate) => candidate.name === words[0])
  if (group === undefined) return `Usage: tir admin|events <command> [flags] (--help for the commands)`
  const program = prefix ?? `tir ${group.name}`
  const sub = group.subcommands.find((candidate) => candidate.names.includes(words[1] ?? ""))
  if (sub === undefined) return `Usage: ${program} <command> [flags] (--help for the commands)`
  return `Usage: ${program} ${plain(HelpDoc.toAnsiText(Usage.getHelp(sub.usage)))} (--help for more)`
}

const report = (error: CliFailure, hintLine?: string) =>
  Effect.zipRight(
    printError(hintLine === undefined ? error.message : `${error.message}\n${hintLine}`),
    Effect.sync(() => (process.exitCode = error.exitCode))
  )

/**
 * Runs `tir` on a command line (`process.argv`: the runtime, the script, then the arguments).
 * Every failure ends as one line on stderr (a usage error adds the command's usage on a second)
 * and the exit code: 2 for usage errors, else 1.
 */
export const run = (argv: ReadonlyArray<string>, options: { readonly usagePrefix?: string } = {}) => {
  const args = argv.slice(2)
  const group = groups.find((candidate) => candidate.name === args[0])
  const named = args[1]
  // @effect/cli reports an unknown subcommand against the root ("Invalid subcommand for tir"): name the group's.
  if (
    group !== undefined && named !== undefined && !named.startsWith("-") &&
    !group.subcommands.some((sub) => sub.names.includes(named))
  ) {
    const known = group.subcommands.map((sub) => sub.names[0]).join(", ")
    return report(
      usage(`unknown command '${group.name} ${named}': one of ${known}`),
      hint([group.name], options.usagePrefix)
    )
  }
  return Console.consoleWith((console) =>
    Command.run(command, { name: "tir", version })(argv).pipe(
      // The CLI's own error printing is multi-line: it is replaced by `report`'s one line.
      Console.withConsole({ ...console, error: () => Effect.void })
    )
  ).pipe(
    Effect.catchAll((error) => {
      const usageLine = hint(args, options.usagePrefix)
      if (error instanceof CliFailure) return report(error, error.exitCode === 2 ? usageLine : undefined)
      if (ValidationError.isValidationError(error)) {
        return report(usage(plain(HelpDoc.toAnsiText(error.error))), usageLine)
      }
      return report(failure(error instanceof Error ? error.message : String(error)))
    }),
    Effect.provide(NodeContext.layer)
  )
}
