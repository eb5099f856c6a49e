/**
 * `npm run events -- <command>`: a user's events from the command line, with an API key
 * (`API_KEY`) at `ROUTER_URL` (default http://127.0.0.1:8080).
 *
 *   list    [--after CURSOR] [--type TYPE] [--intent ID] [--limit N]   one page of the feed, as JSON
 *   listen  [--after CURSOR] [--forward-to URL] [--secret HEX]        events as they commit, one line
 *           each; with --forward-to, each is also POSTed to URL signed exactly as a webhook would be
 *           (a secret is made up and printed unless given), so a local receiver needs no public endpoint
 *   trigger TYPE --broker BROKER_ID                                     a test intent that ends in an
 *           event of TYPE (intent.created, .filled, .partially_filled, .canceled, .rejected, .failed)
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import { parseArgs } from "node:util"
import { IntentEvent } from "../src/domain/Event.js"
import { IntentId } from "../src/domain/Ids.js"
import { sign } from "../src/domain/WebhookSignature.js"
import { EventType } from "../src/domain/Webhook.js"

const usage = `Usage: npm run events -- <command> [flags]

  list    [--after CURSOR] [--type TYPE] [--intent ID] [--limit N]
  listen  [--after CURSOR] [--forward-to URL] [--secret HEX]
  trigger TYPE --broker BROKER_ID     TYPE: ${EventType.literals.join(", ")}

Environment: API_KEY (required), ROUTER_URL (default http://127.0.0.1:8080).`

const fail = (message: string): never => {
  console.error(message)
  process.exit(2)
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    after: { type: "string" },
    type: { type: "string" },
    intent: { type: "string" },
    limit: { type: "string" },
    "forward-to": { type: "string" },
    secret: { type: "string" },
    broker: { type: "string" }
  }
})

const baseUrl = (process.env.ROUTER_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "")
const key = process.env.API_KEY ?? fail("API_KEY must be set to one of your API keys (sk_test_… or sk_live_…)")
const auth = { authorization: `Bearer ${key}` }

/** The API's answer as JSON; its error body's detail when it is not a 2xx. */
const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }).catch((error: unknown) => fail(`${baseUrl} cannot be reached: ${error instanceof Error ? error.cause ?? error.message : error}`))
  const json: unknown = await response.json().catch(() => null)
  if (!response.ok) {
    const detail = typeof json === "object" && json !== null && "detail" in json ? String(json.detail) : response.statusText
    return fail(`${method} ${path}: ${response.status} ${detail}`)
  }
  return json
}

const list = async () => {
  const query = new URLSearchParams()
  if (values.after !== undefined) query.set("after", values.after)
  if (values.type !== undefined) query.set("type", values.type)
  if (values.intent !== undefined) query.set("intent_id", values.intent)
  if (values.limit !== undefined) query.set("limit", values.limit)
  console.log(JSON.stringify(await call("GET", `/api/v1/events?${query}`), null, 2))
}

const decodeEvent = Schema.decodeUnknownSync(Schema.parseJson(IntentEvent))

/** POSTs one event to `url` as a webhook delivery: the same body, headers and signature. */
const forward = async (url: string, secret: string, body: string, eventId: string) => {
  const timestamp = Math.floor(Date.now() / 1000)
  const answer = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "sr-signature": sign(secret, timestamp, body),
      "sr-timestamp": String(timestamp),
      "sr-event-id": eventId
    },
    body,
    signal: AbortSignal.timeout(10_000)
  }).then((response) => String(response.status), (error: unknown) => `not delivered (${String(error)})`)
  console.log(`  -> ${url}: ${answer}`)
}

/** Follows the stream, reconnecting after the last event seen (Last-Event-ID) until interrupted. */
const listen = async () => {
  const target = values["forward-to"]
  const secret = values.secret ?? Crypto.randomBytes(32).toString("hex")
  if (target !== undefined) {
    if (!/^[0-9a-f]{64}$/i.test(secret)) fail("--secret must be 64 hex characters")
    console.log(`Forwarding events to ${target}, signed with the secret ${secret}`)
  }
  let cursor = values.after
  let delay = 250
  for (;;) {
    const response = await fetch(`${baseUrl}/api/v1/events/stream`, {
      headers: { ...auth, ...(cursor === undefined ? {} : { "last-event-id": cursor }) }
    }).catch(() => undefined)
    if (response !== undefined && !response.ok) {
      const body: unknown = await response.json().catch(() => null)
      const detail = typeof body === "object" && body !== null && "detail" in body ? String(body.detail) : ""
      if (response.status !== 429 && response.status < 500) fail(`the event stream: ${response.status} ${detail}`)
      console.error(`the event stream: ${response.status} ${detail}; trying again`)
    }
    if (response?.ok === true && response.body !== null) {
      console.error(`Listening for events at ${baseUrl} (Ctrl-C to stop)`)
      delay = 250
      const decoder = new TextDecoder()
      let buffer = ""
      try {
        for await (const chunk of response.body) {
          buffer += decoder.decode(chunk, { stream: true })
          let end = buffer.indexOf("\n\n")
          while (end !== -1) {
            const block = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            end = buffer.indexOf("\n\n")
            const id = /^id: (.*)$/m.exec(block)?.[1]
            const data = /^data: (.*)$/m.exec(block)?.[1]
            if (id === undefined || data === undefined) continue
            const event = decodeEvent(data)
            console.log(
              `${event.created_at.toJSON()}  ${event.type.padEnd(23)} ${event.data.intent_id} (${event.data.id}) ${event.data.status}`
            )
            if (target !== undefined) await forward(target, secret, data, event.id)
            cursor = id
          }
        }
      } catch {
        // The connection broke: reconnect after the last event seen.
      }
    }
    await new Promise((resolve) => setTimeout(resolve, delay))
    delay = Math.min(delay * 2, 10_000)
  }
}

/** What makes the mock broker end an intent in each event type. */
const triggers: Record<EventType, { readonly symbol: string; readonly cancel: boolean }> = {
  "intent.created": { symbol: "HOLD", cancel: false },
  "intent.filled": { symbol: "AAPL", cancel: false },
  "intent.partially_filled": { symbol: "PARTIAL", cancel: false },
  "intent.canceled": { symbol: "HOLD", cancel: true },
  "intent.rejected": { symbol: "REJECT", cancel: false },
  "intent.failed": { symbol: "FAIL", cancel: false }
}

const trigger = async (type: string | undefined) => {
  const parsed = Schema.decodeUnknownOption(EventType)(type)
  if (parsed._tag === "None") return fail(`trigger needs an event type: ${EventType.literals.join(", ")}`)
  if (values.broker === undefined) return fail("trigger needs --broker BROKER_ID (a mock connection of yours)")
  const { cancel, symbol } = triggers[parsed.value]
  const created = await call("POST", "/api/v1/intents", {
    intent_id: `trigger-${Crypto.randomUUID()}`,
    symbol,
    side: "buy",
    quantity: 2,
    order_type: "market",
    broker_id: values.broker
  })
  const id = Schema.decodeUnknownSync(Schema.Struct({ id: IntentId }))(created).id
  if (cancel) {
    // Canceled once its order rests at the broker.
    await Effect.runPromise(Effect.sleep("300 millis"))
    await call("POST", `/api/v1/intents/${id}/cancel`)
  }
  console.log(`Created intent ${id}: it ends in ${parsed.value}${parsed.value === "intent.failed" ? " after the routing retries" : ""}`)
}

const main = async () => {
  const [command, ...rest] = positionals
  switch (command) {
    case "list":
      return list()
    case "listen":
      return listen()
    case "trigger":
      return trigger(rest[0])
    default:
      console.error(usage)
      process.exitCode = command === undefined ? 0 : 2
  }
}

main().catch((error: unknown) => fail(error instanceof Error ? error.message : String(error)))
