import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import { decimal } from "./AlpacaClient.js"

/**
 * What the fake does with an order it receives:
 * - `fill`: filled at once;
 * - `partial`: half filled, the rest resting;
 * - `rest`: accepted, resting until `fill`, `partialFill` or `cancel` is called;
 * - `reject`: 403 "insufficient buying power", nothing placed;
 * - `timeout_after_accept`: placed (and filled), then a 504;
 * - `rate_limited`: 429, nothing placed.
 */
export type Behaviour = "fill" | "partial" | "rest" | "reject" | "timeout_after_accept" | "rate_limited"

/** A request as the fake received it; header names lower-case, the body parsed when it is JSON. */
export interface ReceivedRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
}

/** An order in Alpaca's JSON: decimals as strings. */
export interface FakeOrder {
  id: string
  client_order_id: string
  created_at: string
  updated_at: string
  submitted_at: string
  filled_at: string | null
  expired_at: string | null
  canceled_at: string | null
  failed_at: string | null
  replaced_at: string | null
  replaced_by: string | null
  replaces: string | null
  asset_id: string
  symbol: string
  asset_class: string
  notional: string | null
  qty: string
  filled_qty: string
  filled_avg_price: string | null
  order_class: string
  order_type: string
  type: string
  side: string
  time_in_force: string
  limit_price: string | null
  stop_price: string | null
  status: string
  extended_hours: boolean
  legs: null
  trail_percent: string | null
  trail_price: string | null
  hwm: string | null
}

/** One execution, as the `FILL` account activities show it. */
export interface FakeFill {
  readonly id: string
  readonly activity_type: "FILL"
  readonly transaction_time: string
  readonly type: "fill" | "partial_fill"
  readonly price: string
  readonly qty: string
  readonly side: string
  readonly symbol: string
  readonly leaves_qty: string
  readonly order_id: string
  readonly cum_qty: string
  readonly order_status: string
}

export interface Options {
  /** The accepted key pairs; one pair (`fake-key-id`, `fake-secret-key`) unless set. */
  readonly credentials?: ReadonlyArray<{ readonly keyId: string; readonly secretKey: string }>
  /** The price of fills of orders without a limit price; 100 unless set. */
  readonly price?: number
  /** The port to listen on (0, a free one, unless set). */
  readonly port?: number
}

export interface FakeAlpaca {
  /** Where it listens, e.g. `http://127.0.0.1:43210`. */
  readonly url: string
  /** Every request received, oldest first. */
  readonly requests: () => ReadonlyArray<ReceivedRequest>
  readonly orders: () => ReadonlyArray<FakeOrder>
  readonly fills: () => ReadonlyArray<FakeFill>
  /** Sets the behaviour for one symbol, or for every symbol without one of its own. */
  readonly setBehaviour: (behaviour: Behaviour, symbol?: string) => void
  /** Fills what is left of an open order. */
  readonly fill: (orderId: string) => void
  /** Fills half of what is left of an open order. */
  readonly partialFill: (orderId: string) => void
  /** Cancels an open order (as Alpaca would after a cancel request or at expiry). */
  readonly cancel: (orderId: string, status?: "canceled" | "expired" | "done_for_day") => void
  /** The status answered to credentials the fake does not know: 401 (as Alpaca mostly does) or 403. */
  readonly setRefusalStatus: (status: 401 | 403) => void
  /** Sets an order's status as is, e.g. to an unknown one. */
  readonly setStatus: (orderId: string, status: string) => void
  /** Forgets orders, fills, requests and behaviours. */
  readonly reset: () => void
  readonly stop: () => Promise<void>
}

/** Statuses after which an order neither fills nor can be canceled; every other one is open. */
const FINAL = new Set(["filled", "canceled", "expired", "done_for_day", "rejected", "replaced"])


const json = (response: Http.ServerResponse, status: number, body?: unknown) => {
  if (body === undefined) {
    response.writeHead(status).end()
    return
  }
  const text = JSON.stringify(body)
  response.writeHead(status, { "content-type": "application/json; charset=UTF-8" }).end(text)
}

const str = (value: unknown): string | null => typeof value === "string" ? value : null

/**
 * A fake of Alpaca's Trading API v2, REST subset: account, orders (submit, by id, by client order
 * id, cancel) and the `FILL` account activities, with switches for the outcomes routing must handle.
 * It listens on 127.0.0.1 only.
 */
export const start = (options: Options = {}): Promise<FakeAlpaca> => {
  const keys = options.credentials ?? [{ keyId: "fake-key-id", secretKey: "fake-secret-key" }]
  const price = options.price ?? 100
  let requests: Array<ReceivedRequest> = []
  let orders = new Map<string, FakeOrder>()
  let fills: Array<FakeFill> = []
  let behaviours = new Map<string, Behaviour>()
  let refusalStatus: 401 | 403 = 401

  const now = () => new Date().toISOString()
  const behaviourOf = (symbol: string): Behaviour => behaviours.get(symbol) ?? behaviours.get("*") ?? "fill"

  const execute = (order: FakeOrder, quantity: number) => {
    const qty = Number(order.qty)
    const filled = Number(order.filled_qty)
    const at = now()
    const fillPrice = order.limit_price !== null ? Number(order.limit_price) : price
    const cumulative = filled + quantity
    const done = cumulative >= qty
    order.filled_avg_price = decimal(
      ((order.filled_avg_price === null ? 0 : Number(order.filled_avg_price)) * filled + fillPrice * quantity) / cumulative
    )
    order.filled_qty = decimal(cumulative)
    order.status = done ? "filled" : "partially_filled"
    order.updated_at = at
    if (done) order.filled_at = at
    fills.push({
      id: `${at.replace(/\D/g, "").slice(0, 17)}::${randomUUID()}`,
      activity_type: "FILL",
      transaction_time: at,
      type: done ? "fill" : "partial_fill",
      price: decimal(fillPrice),
      qty: decimal(quantity),
      side: order.side,
      symbol: order.symbol,
      leaves_qty: decimal(qty - cumulative),
      order_id: order.id,
      cum_qty: decimal(cumulative),
      order_status: order.status
    })
  }

  const open = (orderId: string): FakeOrder => {
    const order = orders.get(orderId)
    if (order === undefined || FINAL.has(order.status)) throw new Error(`No open order ${orderId}`)
    return order
  }
  const left = (order: FakeOrder) => Number(order.qty) - Number(order.filled_qty)
  const half = (quantity: number) => Math.max(Math.floor(quantity / 2), Math.min(quantity, 1))

  const place = (body: Record<string, unknown>): FakeOrder => {
    const at = now()
    const type = str(body.type) ?? "market"
    const order: FakeOrder = {
      id: randomUUID(),
      client_order_id: str(body.client_order_id) ?? randomUUID(),
      created_at: at,
      updated_at: at,
      submitted_at: at,
      filled_at: null,
      expired_at: null,
      canceled_at: null,
      failed_at: null,
      replaced_at: null,
      replaced_by: null,
      replaces: null,
      asset_id: randomUUID(),
      symbol: str(body.symbol) ?? "",
      asset_class: "us_equity",
      notional: null,
      qty: str(body.qty) ?? "0",
      filled_qty: "0",
      filled_avg_price: null,
      order_class: "",
      order_type: type,
      type,
      side: str(body.side) ?? "buy",
      time_in_force: str(body.time_in_force) ?? "day",
      limit_price: str(body.limit_price),
      stop_price: str(body.stop_price),
      status: "new",
      extended_hours: body.extended_hours === true,
      legs: null,
      trail_percent: null,
      trail_price: null,
      hwm: null
    }
    orders.set(order.id, order)
    return order
  }

  const findByClientId = (clientOrderId: string) => [...orders.values()].find((o) => o.client_order_id === clientOrderId)

  const handle = (request: Http.IncomingMessage, raw: string, response: Http.ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://fake")
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(request.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value
    }
    let body: unknown = raw === "" ? undefined : raw
    try {
      body = raw === "" ? undefined : JSON.parse(raw)
    } catch {
      // Kept as text: a test may want to see what was sent.
    }
    requests.push({ method: request.method ?? "", path: `${url.pathname}${url.search}`, headers, body })

    const keyId = headers["apca-api-key-id"]
    const secret = headers["apca-api-secret-key"]
    if (!keys.some((key) => key.keyId === keyId && key.secretKey === secret)) {
      return json(response, refusalStatus, { code: refusalStatus === 401 ? 40110000 : 40310000, message: "request is not authorized" })
    }
    const method = request.method
    const path = url.pathname

    if (method === "GET" && path === "/v2/account") {
      return json(response, 200, {
        id: "2b1ec4ce-0b6b-4c73-9a4c-1bd6a1c0e5d4",
        account_number: "PA3FAKE00001",
        status: "ACTIVE",
        currency: "USD",
        buying_power: "400000",
        cash: "100000",
        portfolio_value: "100000",
        pattern_day_trader: false,
        trading_blocked: false,
        created_at: "2026-01-01T00:00:00Z"
      })
    }
    if (method === "POST" && path === "/v2/orders") {
      const fields = typeof body === "object" && body !== null ? Object.fromEntries(Object.entries(body)) : {}
      const clientOrderId = str(fields.client_order_id)
      if (clientOrderId !== null && findByClientId(clientOrderId) !== undefined) {
        return json(response, 422, { code: 40010001, message: "client_order_id must be unique" })
      }
      const behaviour = behaviourOf(str(fields.symbol) ?? "")
      if (behaviour === "reject") return json(response, 403, { code: 40310000, message: "insufficient buying power" })
      if (behaviour === "rate_limited") return json(response, 429, { code: 42910000, message: "rate limit exceeded" })
      const order = place(fields)
      if (behaviour === "fill" || behaviour === "timeout_after_accept") execute(order, left(order))
      if (behaviour === "partial") execute(order, half(left(order)))
      if (behaviour === "timeout_after_accept") return json(response, 504, { message: "Gateway Timeout" })
      return json(response, 200, order)
    }
    if (method === "GET" && path === "/v2/orders:by_client_order_id") {
      const order = findByClientId(url.searchParams.get("client_order_id") ?? "")
      return order === undefined
        ? json(response, 404, { code: 40410000, message: "order not found" })
        : json(response, 200, order)
    }
    const byId = /^\/v2\/orders\/([^/]+)$/.exec(path)
    if (byId !== null) {
      const order = orders.get(decodeURIComponent(byId[1] ?? ""))
      if (order === undefined) return json(response, 404, { code: 40410000, message: "order not found" })
      if (method === "GET") return json(response, 200, order)
      if (method === "DELETE") {
        if (FINAL.has(order.status)) {
          return json(response, 422, { code: 42210000, message: `order is not cancelable (status ${order.status})` })
        }
        order.status = "canceled"
        order.canceled_at = order.updated_at = now()
        return json(response, 204)
      }
    }
    if (method === "GET" && path === "/v2/account/activities/FILL") {
      const after = url.searchParams.get("after")
      const ordered = (url.searchParams.get("direction") ?? "desc") === "asc" ? [...fills] : [...fills].reverse()
      const token = url.searchParams.get("page_token")
      const from = token === null ? 0 : ordered.findIndex((fill) => fill.id === token) + 1
      const size = Math.min(Number(url.searchParams.get("page_size") ?? 100), 100)
      return json(
        response,
        200,
        ordered.slice(from)
          .filter((fill) => after === null || Date.parse(fill.transaction_time) > Date.parse(after))
          .slice(0, size)
      )
    }
    return json(response, 404, { code: 40400000, message: "endpoint not found" })
  }

  const server = Http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => handle(request, Buffer.concat(chunks).toString("utf8"), response))
  })

  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      const address = server.address()
      if (address === null || typeof address === "string") return reject(new Error("Not listening on a TCP port"))
      resolve({
        url: `http://127.0.0.1:${address.port}`,
        requests: () => requests,
        orders: () => [...orders.values()],
        fills: () => fills,
        setBehaviour: (behaviour, symbol) => {
          behaviours.set(symbol ?? "*", behaviour)
        },
        fill: (orderId) => {
          const order = open(orderId)
          execute(order, left(order))
        },
        partialFill: (orderId) => {
          const order = open(orderId)
          execute(order, half(left(order)))
        },
        cancel: (orderId, status = "canceled") => {
          const order = open(orderId)
          order.status = status
          order.updated_at = now()
          if (status === "canceled") order.canceled_at = order.updated_at
          else order.expired_at = order.updated_at
        },
        setRefusalStatus: (status) => {
          refusalStatus = status
        },
        setStatus: (orderId, status) => {
          const order = orders.get(orderId)
          if (order === undefined) throw new Error(`No order ${orderId}`)
          order.status = status
        },
        reset: () => {
          requests = []
          orders = new Map()
          fills = []
          behaviours = new Map()
          refusalStatus = 401
        },
        stop: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}

/** The fake, started for a scope and stopped with it. */
export const make = (options: Options = {}): Effect.Effect<FakeAlpaca, never, Scope.Scope> =>
  Effect.acquireRelease(Effect.promise(() => start(options)), (fake) => Effect.promise(() => fake.stop()))

/** The fake as a service, for tests that share one across a suite. */
export class FakeAlpacaServer extends Context.Tag("FakeAlpacaServer")<FakeAlpacaServer, FakeAlpaca>() {
  static readonly layer = (options: Options = {}) => Layer.scoped(this, make(options))
}
