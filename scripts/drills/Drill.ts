/** A fault drill: runs against real processes and fails (throws) when the service let it down. */
export interface Drill {
  /** The name `npm run drill -- <name>` selects it by. */
  readonly name: string
  /** One line: the fault, and what must hold after it. */
  readonly description: string
  /** Resolves when every check passed; rejects with what failed. Cleans up after itself. */
  readonly run: (log: (line: string) => void) => Promise<void>
}

/** Fails the drill with `message` unless `condition` holds. */
export const check = (condition: boolean, message: string): void => {
  if (!condition) throw new Error(message)
}
