/** A local webhook receiver for the bench and the drills. */
import { once } from "node:events"
import { createServer } from "node:http"
import { isRecord, stringField } from "./Service.js"

export interface Arrival {
  /** The event's `id`. */
  readonly id: string
  /** The event's `type`. */
  readonly type: string
  /** The id of the intent the event is about (`data.id`). */
  readonly intentId: string
  /** The event's `created_at`, in epoch milliseconds. */
  readonly createdAt: number
  /** When it arrived, in epoch milliseconds. */
  readonly at: number
}

/**
 * Answers 204 to every POST and notes when each event arrived. `setDown(true)` makes it answer 503
 * (after reading the body) until `setDown(false)`: a receiver that is down but reachable.
 * `stop()` closes the port (connections are refused) and `start()` opens the same port again.
 */
export const startReceiver = async (port = 0) => {
  const arrivals: Array<Arrival> = []
  let down = false
  let refused = 0
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      if (down) {
        refused++
        res.writeHead(503).end()
        return
      }
      const at = Date.now()
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      arrivals.push({
        id: stringField(body, "id"),
        type: stringField(body, "type"),
        intentId: stringField(isRecord(body) ? body.data : undefined, "id"),
        createdAt: Date.parse(stringField(body, "created_at")),
        at
      })
      res.writeHead(204).end()
    })
  })
  const listen = async (on: number) => {
    server.listen(on, "127.0.0.1")
    await once(server, "listening")
  }
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  await listen(port)
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("receiver has no port")
  const bound = address.port
  return {
    url: `http://127.0.0.1:${bound}/hooks`,
    port: bound,
    arrivals,
    /** The distinct event ids received so far. */
    received: () => new Set(arrivals.map((arrival) => arrival.id)),
    refused: () => refused,
    setDown: (value: boolean) => {
      down = value
    },
    stop: close,
    start: () => listen(bound),
    close: () => (server.listening ? close() : Promise.resolve())
  }
}
