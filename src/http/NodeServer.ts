import * as Crypto from "node:crypto"
import * as Http from "node:http"
import { WireErrors } from "../domain/Errors.js"
import type { Refusal } from "./ErrorResponse.js"
import { errorBody } from "./ErrorResponse.js"

/**
 * How long a shutdown lets requests in flight finish before their connections are closed: an
 * event stream never finishes by itself, and a request arriving once the API has stopped taking
 * requests is never answered, so either would otherwise hold the exit for ever.
 */
const SHUTDOWN_GRACE_MS = 1_000

/** Request headers beyond this many bytes are refused with 431 before anything reads them. */
export const MAX_HEADER_BYTES = 16 * 1024

const refuse = (socket: NodeJS.WritableStream & { destroy: () => void }, refusal: Refusal) => {
  const requestId = `req_${Crypto.randomUUID().replaceAll("-", "")}`
  const body = JSON.stringify(errorBody(refusal, requestId))
  socket.end(
    `HTTP/1.1 ${refusal.status} ${Http.STATUS_CODES[refusal.status] ?? ""}\r\nContent-Type: application/json\r\n` +
      `X-Request-Id: ${requestId}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

/** Whether the socket is in the middle of an answer (an event stream): its request was received whole. */
const answering = (socket: object) => {
  const response: unknown = Reflect.get(socket, "_httpMessage")
  return response instanceof Http.ServerResponse && response.headersSent && !response.writableEnded
}

/**
 * The Node server under the API, hardened against clients that would exhaust it: bounded headers
 * (431 with the error body), a deadline for headers and for the whole request, and malformed
 * requests answered 400 and closed.
 */
export const make = () => {
  const server = Http.createServer({ maxHeaderSize: MAX_HEADER_BYTES, headersTimeout: 10_000, requestTimeout: 30_000 })
  server.keepAliveTimeout = 5_000
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy()
    if (error.code === "HPE_HEADER_OVERFLOW") return refuse(socket, WireErrors.HeadersTooLarge)
    if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
      // The deadline is for receiving a request: an answer already under way (an event stream that
      // stays open) is never cut by a 408 written into it.
      if (answering(socket)) return
      return refuse(socket, WireErrors.RequestTimeout)
    }
    refuse(socket, WireErrors.BadRequest)
  })
  const close = server.close.bind(server)
  server.close = (callback) => {
    close(callback)
    setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref()
    return server
  }
  return server
}
