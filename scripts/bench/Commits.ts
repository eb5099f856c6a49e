/**
 * The commits that write events, as the bench's own LISTEN hears them: every such commit notifies
 * the events' channel with `<user id>:<mode>` of each user it wrote for, and PostgreSQL delivers
 * the notifications in commit order. A notification reaches the bench a little after its commit.
 */
import pg from "pg"
import { EVENTS_CHANNEL } from "../../src/sql/Channels.js"

export interface Commits {
  /** When each `<user id>:<mode>`'s commits were heard (Unix ms), in commit order. */
  readonly heard: ReadonlyMap<string, ReadonlyArray<number>>
  readonly end: () => Promise<void>
}

/** Listens on the events' channel of the database at `databaseUrl` until `end`. */
export const listenForCommits = async (databaseUrl: string): Promise<Commits> => {
  const heard = new Map<string, Array<number>>()
  const listener = new pg.Client({ connectionString: databaseUrl })
  await listener.connect()
  listener.on("notification", ({ payload }) => {
    const at = Date.now()
    if (payload === undefined) return
    const times = heard.get(payload) ?? []
    heard.set(payload, times)
    times.push(at)
  })
  await listener.query(`LISTEN ${EVENTS_CHANNEL}`)
  return { heard, end: () => listener.end() }
}
