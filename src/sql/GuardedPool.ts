import Pg from "pg"

/** `@effect/sql-pg`'s cancel of an interrupted statement, sent through the pool. */
const CANCEL = /^SELECT pg_cancel_backend\((\d+)\)$/

/** The backend process of a client, which pg's declarations leave out. */
const processIdOf = (client: Pg.PoolClient): number | undefined => {
  const id: unknown = Reflect.get(client, "processID")
  return typeof id === "number" ? id : undefined
}

/**
 * A pg pool on which a statement cut short (a client gone, a timeout, shutdown) never cancels
 * another one. `@effect/sql-pg` cancels an interrupted statement with `pg_cancel_backend(pid)`
 * sent through the pool. By the time that arrives, the statement may have finished and its
 * connection been given back and handed to another request, whose statement it then cancelled
 * (a 500 for someone else). Here the connection of a statement being cancelled is closed when it
 * is given back, never reused, so a late cancel can only reach its own session; a cancel for a
 * connection that is no longer checked out is not sent at all.
 */
export const make = (config: Pg.PoolConfig): Pg.Pool => {
  const pool = new Pg.Pool(config)
  // Pool errors surface on the statements that meet them; unhandled, they would end the process.
  pool.on("error", () => undefined)
  const checkedOut = new Set<number>()
  const doomed = new Set<number>()

  const connect = (...args: Array<unknown>): unknown => {
    const [callback] = args
    if (typeof callback !== "function") return Reflect.apply(pool.connect, guarded, args)
    return pool.connect((error, client, done) => {
      if (client === undefined) return Reflect.apply(callback, undefined, [error, client, done])
      const id = processIdOf(client)
      if (id !== undefined) checkedOut.add(id)
      const release = client.release
      const giveBack = (cause?: Error | boolean) => {
        if (id !== undefined) checkedOut.delete(id)
        release(id !== undefined && doomed.delete(id) ? (cause || new Error("a statement was cut short")) : cause)
      }
      client.release = giveBack
      return Reflect.apply(callback, undefined, [error, client, giveBack])
    })
  }

  const query = (...args: Array<unknown>): unknown => {
    const [text, callback] = args
    const cancel = typeof text === "string" ? CANCEL.exec(text) : null
    if (cancel === null) return Reflect.apply(pool.query, guarded, args)
    const id = Number(cancel[1])
    if (checkedOut.has(id)) {
      doomed.add(id)
      return Reflect.apply(pool.query, guarded, args)
    }
    // The statement has ended and its connection is idle: nothing to cancel.
    if (typeof callback === "function") Reflect.apply(callback, undefined, [undefined])
    return undefined
  }

  const guarded: Pg.Pool = new Proxy(pool, {
    get: (target, property, receiver) =>
      property === "connect" ? connect : property === "query" ? query : Reflect.get(target, property, receiver)
  })
  return guarded
}
