import { createHash } from "node:crypto"
import Pg from "pg"
import { PREPARED } from "./Prepared.js"

/** `@effect/sql-pg`'s cancel of an interrupted statement, sent through the pool. */
const CANCEL = /^SELECT pg_cancel_backend\((\d+)\)$/

/** The backend process of a client, which pg's declarations leave out. */
const processIdOf = (client: Pg.PoolClient): number | undefined => {
  const id: unknown = Reflect.get(client, "processID")
  return typeof id === "number" ? id : undefined
}

/** The most statement texts sent as named statements; beyond, a marked text is sent unnamed. */
const MAX_PREPARED = 64

/**
 * A pg pool on which statements marked {@link PREPARED} are sent as named statements, and on which
 * a statement cut short (a client gone, a timeout, shutdown) never cancels
 * another one. `@effect/sql-pg` cancels an interrupted statement with `pg_cancel_backend(pid)`
 * sent through the pool. By the time that arrives, the statement may have finished and its
 * connection been given back and handed to another request, whose statement it then cancelled
 * (a 500 for someone else). Here the connection of a statement being cancelled is closed when it
 * is given back, never reused, so a late cancel can only reach its own session; a cancel for a
 * connection that is no longer checked out is not sent at all.
 *
 * `setup`, when given, is run on each new connection before it is first handed out (session
 * settings): whoever asked for the connection gets it once the statement is done, whether it
 * succeeded or not (a server that refuses a setting runs without it).
 */
export const make = (config: Pg.PoolConfig, setup?: string): Pg.Pool => {
  const pool = new Pg.Pool(config)
  // Pool errors surface on the statements that meet them; unhandled, they would end the process.
  pool.on("error", () => undefined)
  const checkedOut = new Set<number>()
  const doomed = new Set<number>()
  // A statement's name comes from its text: pg refuses one name for two texts on a connection.
  const names = new Map<string, string>()
  const nameOf = (text: string) => {
    const known = names.get(text)
    if (known !== undefined || names.size >= MAX_PREPARED) return known
    const name = `tir_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`
    names.set(text, name)
    return name
  }
  const named = new WeakSet<Pg.PoolClient>()

  /** Sends `client`'s marked statements (text, values, callback: how `@effect/sql-pg` calls) named. */
  const nameStatements = (client: Pg.PoolClient) => {
    if (named.has(client)) return
    named.add(client)
    const query = client.query
    Reflect.set(client, "query", (...args: Array<unknown>): unknown => {
      const [text, values, callback] = args
      const name = typeof text === "string" && text.startsWith(PREPARED) && Array.isArray(values) &&
          typeof callback === "function"
        ? nameOf(text)
        : undefined
      return Reflect.apply(query, client, name === undefined ? args : [{ name, text, values }, callback])
    })
  }

  const connect = (...args: Array<unknown>): unknown => {
    const [callback] = args
    if (typeof callback !== "function") return Reflect.apply(pool.connect, guarded, args)
    return pool.connect((error, client, done) => {
      if (client === undefined) return Reflect.apply(callback, undefined, [error, client, done])
      const fresh = !named.has(client)
      nameStatements(client)
      const id = processIdOf(client)
      if (id !== undefined) checkedOut.add(id)
      const release = client.release
      const giveBack = (cause?: Error | boolean) => {
        if (id !== undefined) checkedOut.delete(id)
        release(id !== undefined && doomed.delete(id) ? (cause || new Error("a statement was cut short")) : cause)
      }
      client.release = giveBack
      const handOver = () => Reflect.apply(callback, undefined, [error, client, giveBack])
      if (!fresh || setup === undefined) return handOver()
      client.query(setup, () => handOver())
      return undefined
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
