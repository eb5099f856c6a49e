import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** One POST as a webhook receiver saw it: raw body bytes, headers, path. */
export interface Received {
  readonly path: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
  readonly at: number
}

/** What the receiver answers to the n-th request (from 1): a status, or `hang` to never answer. */
export type Responder = (request: Received, n: number) => number | "hang"

export interface Receiver {
  readonly url: string
  readonly received: ReadonlyArray<Received>
  /** Changes the answer from now on. */
  readonly respond: (responder: Responder) => void
}

/** A real HTTP receiver on loopback, closed with the scope. */
export const receiver = (responder: Responder = () => 200) =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: Http.Server; readonly receiver: Receiver }>((resume) => {
      const received: Array<Received> = []
      let respond = responder
      const server = Http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const request = { path: req.url ?? "/", headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() }
          received.push(request)
          const answer = respond(request, received.length)
          if (answer === "hang") return
          res.writeHead(answer, answer >= 300 && answer < 400 ? { location: "/redirected" } : {}).end("ok")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({
          server,
          receiver: { url: `http://127.0.0.1:${port}/hooks`, received, respond: (next) => { respond = next } }
        }))
      })
    }),
    ({ server }) => Effect.sync(() => server.closeAllConnections()).pipe(Effect.zipRight(Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })))
  ).pipe(Effect.map(({ receiver }) => receiver))

/** The webhook signature, computed here with `node:crypto` alone, independently of the service's code. */
export const expectedSignature = (secret: string, timestamp: string, body: string) =>
  `v1=${Crypto.createHmac("sha256", Buffer.from(secret, "hex")).update(`${timestamp}.${body}`).digest("hex")}`

/** Whether a received request is signed with `secret` as the webhook scheme says, and its event id matches the body. */
export const isGenuine = (request: Received, secret: string) => {
  const timestamp = String(request.headers["sr-timestamp"])
  const body = JSON.parse(request.body) as { readonly id: string }
  return request.headers["sr-signature"] === expectedSignature(secret, timestamp, request.body) &&
    /^\d+$/.test(timestamp) && Math.abs(Number(timestamp) - Date.now() / 1000) <= 300 &&
    request.headers["sr-event-id"] === body.id &&
    request.headers["content-type"] === "application/json"
}

/** Waits until `check` holds (deliveries run in the background), for at most `seconds`. */
export const until = (check: () => boolean, seconds = 10) =>
  Effect.gen(function*() {
    const deadline = Date.now() + seconds * 1000
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.dieMessage("condition not met in time")
      yield* Effect.sleep("20 millis")
    }
  })
