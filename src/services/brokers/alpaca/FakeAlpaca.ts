import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import { type RawData, WebSocket, WebSocketServer } from "ws"
import { decimal } from "./AlpacaClient.js"
import { textOf } from "./AlpacaStream.js"

/**
 * What the fake does with an order it receives. Every order it places is answered `accepted` with
 * nothing filled; what follows happens after the answer, as `trade_updates` events:
 * - `fill`: `new`, then `fill` of the whole quantity;
 * - `partial`: `new`, then `partial_fill` of half, the rest resting;
 * - `rest`: `new`, then nothing until `fill`, `partialFill` or `cancel` is called;
 * - `reject`: 403 "insufficient buying power", nothing placed;
 * - `timeout_after_accept`: placed and filled (`new`, `fill`), then a 504;
 * - `rate_limited`: 429 with `Retry-After: 1`, nothing placed;
 * - `hang_after_accept`: placed and filled as with `fill`, but never answered: the request hangs
 *   until `releaseHungRequests` or the fake stops.
 */
export type Behaviour =
  | "fill"
  | "partial"
  | "rest"
  | "reject"
  | "timeout_after_accept"
  | "rate_limited"
  | "hang_after_accept"

const BEHAVIOURS: ReadonlyArray<Behaviour> = [
  "fill",
  "partial",
  "rest",
  "reject",
  "timeout_after_accept",
  "rate_limited",
  "hang_after_accept"
]

/** A request as the fake received it; header names lower-case, the body parsed when it is JSON. */
export interface ReceivedRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
  /** When it was received, in epoch milliseconds. */
  readonly at: number
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

/**
 * One execution, as the `FILL` account activities show it. Its `id` is `<17 digit timestamp>::<execution
 * id>`, the execution id being the `execution_id` of the execution's `trade_updates` event.
 */
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

/** Stream connections of one account: authenticated now, and the most ever at once. */
export interface StreamConnections {
  readonly current: number
  readonly max: number
}

export interface Options {
  /** The accepted key pairs, each an account; one pair (`fake-key-id`, `fake-secret-key`) unless set. */
  readonly credentials?: ReadonlyArray<{ readonly keyId: string; readonly secretKey: string }>
  /** The price of fills of orders without a limit price; 100 unless set. */
  readonly price?: number
  /** The port to listen on (0, a free one, unless set). */
  readonly port?: number
  /** How long after answering a submission or a cancel the fake carries it out; 0 (at once) unless set. */
  readonly fillDelayMs?: number
  /** How stream messages are framed: binary (as Alpaca's paper endpoint does) unless set. */
  readonly frames?: "binary" | "text"
}

export interface FakeAlpaca {
  /** Where it listens, e.g. `http://127.0.0.1:43210`. */
  readonly url: string
  /** Where the `trade_updates` stream is, e.g. `ws://127.0.0.1:43210/stream`. */
  readonly streamUrl: string
  /** Every request to the Trading API received, oldest first (control requests are not recorded). */
  readonly requests: () => ReadonlyArray<ReceivedRequest>
  /** The orders of one account (by key id), or of all accounts. */
  readonly orders: (keyId?: string) => ReadonlyArray<FakeOrder>
  /** The executions of one account (by key id), or of all accounts, oldest first. */
  readonly fills: (keyId?: string) => ReadonlyArray<FakeFill>
  /**
   * Sets the behaviour for one symbol, or for every symbol without one of its own; with `times`, only
   * for that many submissions, after which that symbol (or every symbol) goes back to `fill`.
   */
  readonly setBehaviour: (behaviour: Behaviour, symbol?: string, times?: number) => void
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
  /** Accepts a key pair as an account (a revoked key id is accepted again, with its orders). */
  readonly addCredentials: (keyId: string, secretKey: string) => void
  /**
   * Refuses a key id from now on: every call answers 401 and new stream authentications are
   * unauthorized. Stream connections already authenticated stay open.
   */
  readonly revokeCredentials: (keyId: string) => void
  /** The next `count` stream events, of any account, are not sent; the orders change all the same. */
  readonly dropEvents: (count: number) => void
  /** Closes every open stream connection at once, as a network failure would. */
  readonly dropConnections: () => void
  /** The stream connections of an account (the default pair's unless a key id is given). */
  readonly streamConnections: (keyId?: string) => StreamConnections
  /** Breaks off the submissions left unanswered by `hang_after_accept`. */
  readonly releaseHungRequests: () => void
  /**
   * While held, order lookups (`GET /v2/orders/{id}`, `GET /v2/orders:by_client_order_id`) are
   * received but answered only once released, in the order received, as a slow Alpaca would.
   */
  readonly holdLookups: (held: boolean) => void
  /**
   * Forgets orders, fills, requests, behaviours, dropped-event counts and added credentials (their
   * stream connections are closed); stream connection maxima restart from the current counts.
   */
  readonly reset: () => void
  readonly stop: () => Promise<void>
}

/** Statuses after which an order neither fills nor can be canceled; every other one is open. */
const FINAL = new Set(["filled", "canceled", "expired", "done_for_day", "rejected", "replaced"])

const DEFAULT_KEY_ID = "fake-key-id"

const json = (response: Http.ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}) => {
  if (body === undefined) {
    response.writeHead(status, headers).end()
    return
  }
  const text = JSON.stringify(body)
  response.writeHead(status, { "content-type": "application/json; charset=UTF-8", ...headers }).end(text)
}

const str = (value: unknown): string | null => typeof value === "string" ? value : null

const fieldsOf = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? Object.fromEntries(Object.entries(value)) : {}

interface Account {
  readonly keyId: string
  secretKey: string
  revoked: boolean
  readonly id: string
  readonly number: string
  readonly positions: Map<string, number>
}

interface Connection {
  account: string | null
  listening: boolean
}

/**
 * A fake of Alpaca's Trading API v2: the REST subset routing uses (account, orders: submit, by id, by
 * client order id, cancel; the `FILL` account activities) and the `trade_updates` WebSocket stream at
 * `/stream`, per account (one account per key pair), with switches for the outcomes and faults
 * routing must handle, and an HTTP control API under `/_fake/`. It listens on 127.0.0.1 only.
 */
export const start = (options: Options = {}): Promise<FakeAlpaca> => {
  const initialKeys = options.credentials ?? [{ keyId: DEFAULT_KEY_ID, secretKey: "fake-secret-key" }]
  const price = options.price ?? 100
  const fillDelayMs = options.fillDelayMs ?? 0
  const binary = (options.frames ?? "binary") === "binary"
  let requests: Array<ReceivedRequest> = []
  let orders = new Map<string, { readonly account: string; readonly order: FakeOrder }>()
  /** The orders by account and client order id, so that a submission's check costs the same however many there are. */
  let byClientId = new Map<string, FakeOrder>()
  const clientIdKey = (account: string, clientOrderId: string) => `${account}\u0000${clientOrderId}`
  let fills: Array<{ readonly account: string; readonly fill: FakeFill }> = []
  let behaviours = new Map<string, { readonly behaviour: Behaviour; remaining: number | null }>()
  let refusalStatus: 401 | 403 = 401
  let dropping = 0
  let lookupsHeld = false
  let heldLookups: Array<() => void> = []
  let stopped = false
  const accounts = new Map<string, Account>()
  const connections = new Map<WebSocket, Connection>()
  const streamCounts = new Map<string, { current: number; max: number }>()
  const hung = new Set<Http.ServerResponse>()
  /** How to cancel each task scheduled and not yet run. */
  const pending = new Set<() => void>()

  const addAccount = (keyId: string, secretKey: string) => {
    const existing = accounts.get(keyId)
    if (existing !== undefined) {
      existing.secretKey = secretKey
      existing.revoked = false
      return
    }
    accounts.set(keyId, {
      keyId,
      secretKey,
      revoked: false,
      id: randomUUID(),
      number: `PA3FAKE${String(accounts.size + 1).padStart(5, "0")}`,
      positions: new Map()
    })
  }
  for (const key of initialKeys) addAccount(key.keyId, key.secretKey)

  const now = () => new Date().toISOString()
  const later = (task: () => void) => {
    const run = () => {
      pending.delete(cancel)
      if (!stopped) task()
    }
    let cancel: () => void
    if (fillDelayMs <= 0) {
      const immediate = setImmediate(run)
      cancel = () => clearImmediate(immediate)
    } else {
      const timer = setTimeout(run, fillDelayMs)
      cancel = () => clearTimeout(timer)
    }
    pending.add(cancel)
  }

  const countsOf = (keyId: string) => {
    const found = streamCounts.get(keyId)
    if (found !== undefined) return found
    const counts = { current: 0, max: 0 }
    streamCounts.set(keyId, counts)
    return counts
  }

  const send = (socket: WebSocket, message: unknown) => {
    if (socket.readyState !== WebSocket.OPEN) return
    const text = JSON.stringify(message)
    if (binary) socket.send(Buffer.from(text, "utf8"), { binary: true })
    else socket.send(text, { binary: false })
  }

  /** Pushes one `trade_updates` event to the account's listening connections, unless it is to be dropped. */
  const push = (
    account: string,
    event: string,
    order: FakeOrder,
    execution?: { readonly id: string; readonly price: string; readonly qty: string; readonly at: string }
  ) => {
    if (dropping > 0) {
      dropping--
      return
    }
    const position = accounts.get(account)?.positions.get(order.symbol) ?? 0
    const data = execution === undefined
      ? { event, timestamp: order.updated_at, order: { ...order } }
      : {
        event,
        execution_id: execution.id,
        price: execution.price,
        qty: execution.qty,
        position_qty: decimal(position),
        timestamp: execution.at,
        order: { ...order }
      }
    for (const [socket, connection] of connections) {
      if (connection.account === account && connection.listening) send(socket, { stream: "trade_updates", data })
    }
  }

  const behaviourOf = (symbol: string): Behaviour => {
    const key = behaviours.has(symbol) ? symbol : behaviours.has("*") ? "*" : null
    const entry = key === null ? undefined : behaviours.get(key)
    if (key === null || entry === undefined) return "fill"
    if (entry.remaining !== null) {
      entry.remaining--
      if (entry.remaining <= 0) behaviours.set(key, { behaviour: "fill", remaining: null })
    }
    return entry.behaviour
  }

  const execute = (account: string, order: FakeOrder, quantity: number) => {
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
    const positions = accounts.get(account)?.positions
    if (positions !== undefined) {
      const signed = order.side === "sell" ? -quantity : quantity
      positions.set(order.symbol, (positions.get(order.symbol) ?? 0) + signed)
    }
    const executionId = randomUUID()
    const type = done ? "fill" : "partial_fill"
    fills.push({
      account,
      fill: {
        id: `${at.replace(/\D/g, "").slice(0, 17)}::${executionId}`,
        activity_type: "FILL",
        transaction_time: at,
        type,
        price: decimal(fillPrice),
        qty: decimal(quantity),
        side: order.side,
        symbol: order.symbol,
        leaves_qty: decimal(qty - cumulative),
        order_id: order.id,
        cum_qty: decimal(cumulative),
        order_status: order.status
      }
    })
    push(account, type, order, { id: executionId, price: decimal(fillPrice), qty: decimal(quantity), at })
  }

  const end = (account: string, order: FakeOrder, status: string) => {
    order.status = status
    order.updated_at = now()
    if (status === "canceled") order.canceled_at = order.updated_at
    else order.expired_at = order.updated_at
    push(account, status, order)
  }

  const open = (orderId: string): { readonly account: string; readonly order: FakeOrder } => {
    const found = orders.get(orderId)
    if (found === undefined || FINAL.has(found.order.status)) throw new Error(`No open order ${orderId}`)
    return found
  }
  const left = (order: FakeOrder) => Number(order.qty) - Number(order.filled_qty)
  const half = (quantity: number) => Math.max(Math.floor(quantity / 2), Math.min(quantity, 1))

  const place = (account: string, body: Record<string, unknown>): FakeOrder => {
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
      status: "accepted",
      extended_hours: body.extended_hours === true,
      legs: null,
      trail_percent: null,
      trail_price: null,
      hwm: null
    }
    orders.set(order.id, { account, order })
    byClientId.set(clientIdKey(account, order.client_order_id), order)
    return order
  }

  /** What follows an accepted order: `new`, then the behaviour's executions. */
  const proceed = (account: string, order: FakeOrder, behaviour: Behaviour) => {
    if (order.status !== "accepted") return
    order.status = "new"
    order.updated_at = now()
    push(account, "new", order)
    if (behaviour === "fill" || behaviour === "timeout_after_accept" || behaviour === "hang_after_accept") {
      execute(account, order, left(order))
    }
    if (behaviour === "partial") execute(account, order, half(left(order)))
  }

  const findByClientId = (account: string, clientOrderId: string) => byClientId.get(clientIdKey(account, clientOrderId))

  const holdLookups = (held: boolean) => {
    lookupsHeld = held
    if (held) return
    const waiting = heldLookups
    heldLookups = []
    for (const answer of waiting) answer()
  }

  const releaseHung = () => {
    for (const response of hung) response.destroy()
    hung.clear()
  }

  const closeConnectionsOf = (keyIds: ReadonlySet<string> | null) => {
    for (const [socket, connection] of connections) {
      if (keyIds === null || (connection.account !== null && keyIds.has(connection.account))) socket.terminate()
    }
  }

  const streamsByKey = () => Object.fromEntries([...streamCounts.entries()].map(([key, counts]) => [key, { ...counts }]))

  const control = {
    setBehaviour: (behaviour: Behaviour, symbol?: string, times?: number) => {
      behaviours.set(symbol ?? "*", { behaviour, remaining: times === undefined ? null : times })
    },
    fill: (orderId: string) => {
      const { account, order } = open(orderId)
      execute(account, order, left(order))
    },
    partialFill: (orderId: string) => {
      const { account, order } = open(orderId)
      execute(account, order, half(left(order)))
    },
    cancel: (orderId: string, status: "canceled" | "expired" | "done_for_day" = "canceled") => {
      const { account, order } = open(orderId)
      end(account, order, status)
    },
    addCredentials: addAccount,
    revokeCredentials: (keyId: string) => {
      const account = accounts.get(keyId)
      if (account !== undefined) account.revoked = true
    },
    dropEvents: (count: number) => {
      dropping = Math.max(0, Math.floor(count))
    },
    dropConnections: () => closeConnectionsOf(null),
    streamConnections: (keyId: string = DEFAULT_KEY_ID): StreamConnections => ({ ...countsOf(keyId) }),
    releaseHungRequests: releaseHung,
    holdLookups,
    reset: () => {
      holdLookups(false)
      requests = []
      orders = new Map()
      byClientId = new Map()
      fills = []
      behaviours = new Map()
      refusalStatus = 401
      dropping = 0
      releaseHung()
      const removed = new Set([...accounts.keys()].filter((keyId) => !initialKeys.some((key) => key.keyId === keyId)))
      closeConnectionsOf(removed)
      for (const keyId of removed) accounts.delete(keyId)
      for (const key of initialKeys) addAccount(key.keyId, key.secretKey)
      for (const account of accounts.values()) account.positions.clear()
      for (const counts of streamCounts.values()) counts.max = counts.current
    }
  }

  /** The control API: `/_fake/...`, without credentials, not recorded. */
  const handleControl = (method: string, path: string, body: unknown, response: Http.ServerResponse) => {
    const fields = fieldsOf(body)
    const ok = () => json(response, 200, { ok: true })
    const bad = (message: string) => json(response, 400, { message })
    try {
      if (method === "POST" && path === "/_fake/behaviour") {
        const behaviour = BEHAVIOURS.find((known) => known === fields.behaviour)
        if (behaviour === undefined) return bad(`behaviour must be one of ${BEHAVIOURS.join(", ")}`)
        const symbol = str(fields.symbol) ?? undefined
        const times = typeof fields.times === "number" ? fields.times : undefined
        control.setBehaviour(behaviour, symbol, times)
        return ok()
      }
      const onOrder = /^\/_fake\/orders\/([^/]+)\/(fill|partial_fill|cancel)$/.exec(path)
      if (method === "POST" && onOrder !== null) {
        const orderId = decodeURIComponent(onOrder[1] ?? "")
        const found = orders.get(orderId)
        if (found === undefined) return json(response, 404, { message: `no order ${orderId}` })
        if (FINAL.has(found.order.status)) return json(response, 422, { message: `order is ${found.order.status}` })
        if (onOrder[2] === "fill") control.fill(orderId)
        else if (onOrder[2] === "partial_fill") control.partialFill(orderId)
        else {
          const status = fields.status === "expired" || fields.status === "done_for_day" ? fields.status : "canceled"
          control.cancel(orderId, status)
        }
        return json(response, 200, { account: found.account, ...found.order })
      }
      if (method === "POST" && path === "/_fake/drop-events") {
        if (typeof fields.count !== "number") return bad("count must be a number")
        control.dropEvents(fields.count)
        return ok()
      }
      if (method === "POST" && path === "/_fake/hold-lookups") {
        if (typeof fields.held !== "boolean") return bad("held must be true or false")
        control.holdLookups(fields.held)
        return ok()
      }
      if (method === "POST" && path === "/_fake/drop-connections") {
        control.dropConnections()
        return ok()
      }
      if (method === "POST" && path === "/_fake/credentials") {
        const keyId = str(fields.key_id)
        const secretKey = str(fields.secret_key)
        if (keyId === null || secretKey === null) return bad("key_id and secret_key must be strings")
        control.addCredentials(keyId, secretKey)
        return ok()
      }
      const credential = /^\/_fake\/credentials\/([^/]+)$/.exec(path)
      if (method === "DELETE" && credential !== null) {
        control.revokeCredentials(decodeURIComponent(credential[1] ?? ""))
        return ok()
      }
      if (method === "GET" && path === "/_fake/orders") {
        return json(response, 200, [...orders.values()].map(({ account, order }) => ({ account, ...order })))
      }
      if (method === "GET" && path === "/_fake/requests") return json(response, 200, requests)
      if (method === "GET" && path === "/_fake/streams") return json(response, 200, streamsByKey())
      if (method === "POST" && path === "/_fake/release-hung") {
        control.releaseHungRequests()
        return ok()
      }
      if (method === "POST" && path === "/_fake/reset") {
        control.reset()
        return ok()
      }
      return json(response, 404, { message: "no such control call" })
    } catch (error) {
      return json(response, 422, { message: error instanceof Error ? error.message : String(error) })
    }
  }

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
    const method = request.method ?? ""
    const path = url.pathname
    if (path.startsWith("/_fake/")) return handleControl(method, path, body, response)
    requests.push({ method, path: `${url.pathname}${url.search}`, headers, body, at: Date.now() })

    const keyId = headers["apca-api-key-id"] ?? ""
    const found = accounts.get(keyId)
    if (found !== undefined && found.revoked) {
      return json(response, 401, { code: 40110000, message: "request is not authorized" })
    }
    if (found === undefined || found.secretKey !== headers["apca-api-secret-key"]) {
      return json(response, refusalStatus, {
        code: refusalStatus === 401 ? 40110000 : 40310000,
        message: "request is not authorized"
      })
    }
    if (lookupsHeld && method === "GET" && (path === "/v2/orders:by_client_order_id" || /^\/v2\/orders\/[^/]+$/.test(path))) {
      heldLookups.push(() => answer(method, path, url, body, found, response))
      return
    }
    return answer(method, path, url, body, found, response)
  }

  /** Answers a request to the Trading API by the account `found`, its credentials checked. */
  const answer = (method: string, path: string, url: URL, body: unknown, found: Account, response: Http.ServerResponse) => {
    const account = found.keyId
    if (method === "GET" && path === "/v2/account") {
      return json(response, 200, {
        id: found.id,
        account_number: found.number,
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
      const fields = fieldsOf(body)
      const clientOrderId = str(fields.client_order_id)
      if (clientOrderId !== null && findByClientId(account, clientOrderId) !== undefined) {
        return json(response, 422, { code: 40010001, message: "client_order_id must be unique" })
      }
      const behaviour = behaviourOf(str(fields.symbol) ?? "")
      if (behaviour === "reject") return json(response, 403, { code: 40310000, message: "insufficient buying power" })
      if (behaviour === "rate_limited") {
        return json(response, 429, { code: 42910000, message: "rate limit exceeded" }, { "retry-after": "1" })
      }
      const order = place(account, fields)
      if (behaviour === "timeout_after_accept") {
        proceed(account, order, behaviour)
        return json(response, 504, { message: "Gateway Timeout" })
      }
      if (behaviour === "hang_after_accept") {
        hung.add(response)
        response.on("close", () => hung.delete(response))
        later(() => proceed(account, order, behaviour))
        return
      }
      json(response, 200, order)
      later(() => proceed(account, order, behaviour))
      return
    }
    if (method === "GET" && path === "/v2/orders:by_client_order_id") {
      const order = findByClientId(account, url.searchParams.get("client_order_id") ?? "")
      return order === undefined
        ? json(response, 404, { code: 40410000, message: "order not found" })
        : json(response, 200, order)
    }
    const byId = /^\/v2\/orders\/([^/]+)$/.exec(path)
    if (byId !== null) {
      const entry = orders.get(decodeURIComponent(byId[1] ?? ""))
      if (entry === undefined || entry.account !== account) {
        return json(response, 404, { code: 40410000, message: "order not found" })
      }
      const order = entry.order
      if (method === "GET") return json(response, 200, order)
      if (method === "DELETE") {
        if (FINAL.has(order.status) || order.status === "pending_cancel") {
          return json(response, 422, { code: 42210000, message: `order is not cancelable (status ${order.status})` })
        }
        order.status = "pending_cancel"
        order.updated_at = now()
        json(response, 204)
        later(() => {
          if (order.status === "pending_cancel") end(account, order, "canceled")
        })
        return
      }
    }
    if (method === "GET" && path === "/v2/account/activities/FILL") {
      const after = url.searchParams.get("after")
      const own = fills.filter((entry) => entry.account === account).map((entry) => entry.fill)
      const ordered = (url.searchParams.get("direction") ?? "desc") === "asc" ? own : own.reverse()
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

  /** The `trade_updates` stream: authenticate, listen, then events of the account. */
  const onStreamMessage = (socket: WebSocket, connection: Connection, data: RawData) => {
    let message: unknown
    try {
      message = JSON.parse(textOf(data))
    } catch {
      send(socket, { stream: "error", data: { error: "invalid syntax" } })
      return
    }
    const fields = fieldsOf(message)
    const payload = fieldsOf(fields.data)
    if (fields.action === "authenticate" || fields.action === "auth") {
      const keyId = fields.action === "auth" ? str(fields.key) : str(payload.key_id)
      const secretKey = fields.action === "auth" ? str(fields.secret) : str(payload.secret_key)
      const account = keyId === null ? undefined : accounts.get(keyId)
      if (account === undefined || account.revoked || account.secretKey !== secretKey) {
        send(socket, { stream: "authorization", data: { action: "authenticate", status: "unauthorized" } })
        socket.close(1008, "unauthorized")
        return
      }
      if (connection.account === null) {
        const counts = countsOf(account.keyId)
        counts.current++
        counts.max = Math.max(counts.max, counts.current)
      }
      connection.account = account.keyId
      send(socket, { stream: "authorization", data: { action: "authenticate", status: "authorized" } })
      return
    }
    if (fields.action === "listen") {
      if (connection.account === null) {
        send(socket, { stream: "authorization", data: { action: "listen", status: "unauthorized" } })
        return
      }
      const streams = Array.isArray(payload.streams) ? payload.streams.filter((name) => name === "trade_updates") : []
      connection.listening = streams.length > 0
      send(socket, { stream: "listening", data: { streams } })
      return
    }
    send(socket, { stream: "error", data: { error: "unrecognized action" } })
  }

  const wss = new WebSocketServer({ noServer: true })
  wss.on("connection", (socket: WebSocket) => {
    const connection: Connection = { account: null, listening: false }
    connections.set(socket, connection)
    socket.on("message", (data: RawData) => onStreamMessage(socket, connection, data))
    socket.on("error", () => {
      // A broken connection ends with "close".
    })
    socket.on("close", () => {
      connections.delete(socket)
      if (connection.account !== null) countsOf(connection.account).current--
    })
  })

  const server = Http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => handle(request, Buffer.concat(chunks).toString("utf8"), response))
  })
  server.on("upgrade", (request, socket, head) => {
    if (new URL(request.url ?? "/", "http://fake").pathname !== "/stream") {
      socket.destroy()
      return
    }
    wss.handleUpgrade(request, socket, head, (upgraded) => wss.emit("connection", upgraded, request))
  })

  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      const address = server.address()
      if (address === null || typeof address === "string") return reject(new Error("Not listening on a TCP port"))
      resolve({
        url: `http://127.0.0.1:${address.port}`,
        streamUrl: `ws://127.0.0.1:${address.port}/stream`,
        requests: () => requests,
        orders: (keyId) =>
          [...orders.values()].filter((entry) => keyId === undefined || entry.account === keyId).map((entry) =>
            entry.order
          ),
        fills: (keyId) =>
          fills.filter((entry) => keyId === undefined || entry.account === keyId).map((entry) => entry.fill),
        ...control,
        setRefusalStatus: (status) => {
          refusalStatus = status
        },
        setStatus: (orderId, status) => {
          const found = orders.get(orderId)
          if (found === undefined) throw new Error(`No order ${orderId}`)
          found.order.status = status
        },
        stop: () =>
          new Promise<void>((done) => {
            stopped = true
            for (const cancel of pending) cancel()
            pending.clear()
            releaseHung()
            closeConnectionsOf(null)
            wss.close()
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
