import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import { IntentEvent } from "../domain/Event.js"
import { IntentId } from "../domain/Ids.js"
import { EventType } from "../domain/Webhook.js"
import { sign } from "../domain/WebhookSignature.js"
import { failure, printError, printJson, routerUrl, unreachable, usage } from "./Failure.js"

const optional = (name: string, value: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName(value),
    Options.withDescription(description),
    Options.optional,
    Options.map(Option.getOrUndefined)
  )

/** Where and who: ROUTER_URL and API_KEY. */
const caller = Effect.gen(function*() {
  const baseUrl = yield* routerUrl
  const key = yield* Config.string("API_KEY").pipe(
    Effect.mapError(() => failure("API_KEY is not set: one of your API keys (sk_test_… or sk_live_…)"))
  )
  return { baseUrl, auth: { authorization: `Bearer ${key}` } }
})

const detailOf = (body: unknown) =>
  typeof body === "object" && body !== null && "detail" in body ? String(body.detail) : ""

/** The API's answer as JSON; a 4xx/5xx as one line with its detail (a 400, the flags' fault, exits 2). */
const call = (method: string, path: string, body?: unknown) =>
  Effect.gen(function*() {
    const { auth, baseUrl } = yield* caller
    const response = yield* Effect.tryPromise({
      try: (signal) =>
        fetch(`${baseUrl}${path}`, {
          method,
          signal,
          headers: { ...auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        }),
      catch: (error) => unreachable(baseUrl, error)
    })
    const json: unknown = yield* Effect.promise(() => response.json().catch(() => null))
    if (!response.ok) {
      const line = `${method} ${path}: ${response.status} ${detailOf(json) || response.statusText}`
      return yield* Effect.fail(response.status === 400 ? usage(line) : failure(line))
    }
    return json
  })

const list = Command.make("list", {
  after: optional("after", "CURSOR", "the cursor to list after"),
  type: optional("type", "TYPE", `an event type: ${EventType.literals.join(", ")}`),
  intent: optional("intent", "INTENT_ID", "an intent's id"),
  limit: optional("limit", "N", "at most this many")
}, (flags) =>
  Effect.gen(function*() {
    const query = new URLSearchParams()
    if (flags.after !== undefined) query.set("after", flags.after)
    if (flags.type !== undefined) query.set("type", flags.type)
    if (flags.intent !== undefined) query.set("intent_id", flags.intent)
    if (flags.limit !== undefined) query.set("limit", flags.limit)
    yield* printJson(yield* call("GET", `/api/v1/events?${query}`))
  })).pipe(Command.withDescription("One page of the event feed, as JSON"))

const decodeEvent = Schema.decodeUnknown(Schema.parseJson(IntentEvent))

/** POSTs one event to `url` as a webhook delivery: the same body, headers and signature. */
const forward = (url: string, secret: string, body: string, eventId: string) =>
  Effect.gen(function*() {
    const timestamp = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    const answer = yield* Effect.tryPromise({
      try: (signal) =>
        fetch(url, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "sr-signature": sign(secret, timestamp, body),
            "sr-timestamp": String(timestamp),
            "sr-event-id": eventId
          },
          body,
          signal: AbortSignal.any([signal, AbortSignal.timeout(10_000)])
        }),
      catch: (error) => `not delivered (${String(error)})`
    }).pipe(Effect.map((response) => String(response.status)), Effect.merge)
    yield* Console.log(`  -> ${url}: ${answer}`)
  })

/** One Server-Sent Event as its `id:` and `data:` fields. */
interface Frame {
  readonly id?: string | undefined
  readonly data?: string | undefined
}

const noFrame: Frame = {}

/** Adds one line of the stream to the frame being read; a blank line ends the frame. */
const readLine = (frame: Frame, line: string): [Frame, Option.Option<Frame>] => {
  if (line === "") return [{}, Option.some(frame)]
  if (line.startsWith("id: ")) return [{ ...frame, id: line.slice(4) }, Option.none()]
  if (line.startsWith("data: ")) return [{ ...frame, data: line.slice(6) }, Option.none()]
  return [frame, Option.none()]
}

/** Reads one connection of the stream to its end; the cursor of the last event seen. */
const follow = (body: ReadableStream<Uint8Array>, from: string | undefined, target: string | undefined, secret: string) =>
  Effect.gen(function*() {
    const cursor = yield* Ref.make(from)
    yield* Stream.fromReadableStream(() => body, identity).pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.mapAccum(noFrame, readLine),
      Stream.filterMap(identity),
      Stream.runForEach(({ data, id }) =>
        id === undefined || data === undefined ? Effect.void : Effect.gen(function*() {
          const event = yield* decodeEvent(data)
          yield* Console.log(
            `${event.created_at.toJSON()}  ${event.type.padEnd(23)} ${event.data.intent_id} (${event.data.id}) ${event.data.status}`
          )
          if (target !== undefined) yield* forward(target, secret, data, event.id)
          yield* Ref.set(cursor, id)
        })
      ),
      // The connection broke: the caller reconnects after the last event seen.
      Effect.ignore
    )
    return yield* Ref.get(cursor)
  })

const listen = Command.make("listen", {
  after: optional("after", "CURSOR", "the cursor to start after (else from now on)"),
  forwardTo: optional("forward-to", "URL", "also POST each event to this URL, signed as a webhook"),
  secret: optional("secret", "HEX", "the signing secret, 64 hex characters (else made up and printed)")
}, (flags) =>
  Effect.gen(function*() {
    const { auth, baseUrl } = yield* caller
    const target = flags.forwardTo
    const secret = flags.secret ?? Crypto.randomBytes(32).toString("hex")
    if (target !== undefined) {
      if (!/^[0-9a-f]{64}$/i.test(secret)) return yield* Effect.fail(usage("--secret must be 64 hex characters"))
      yield* Console.log(`Forwarding events to ${target}, signed with the secret ${secret}`)
    }
    let cursor = flags.after
    let delay = 250
    // Follows the stream, reconnecting after the last event seen (Last-Event-ID) until interrupted.
    for (;;) {
      const response = yield* Effect.promise((signal) =>
        fetch(`${baseUrl}/api/v1/events/stream`, {
          signal,
          headers: { ...auth, ...(cursor === undefined ? {} : { "last-event-id": cursor }) }
        }).catch(() => undefined)
      )
      if (response !== undefined && !response.ok) {
        const detail = detailOf(yield* Effect.promise(() => response.json().catch(() => null)))
        const line = `the event stream: ${response.status} ${detail}`
        if (response.status === 400) return yield* Effect.fail(usage(line))
        if (response.status !== 429 && response.status < 500) return yield* Effect.fail(failure(line))
        yield* printError(`${line}; trying again`)
      }
      if (response?.ok === true && response.body !== null) {
        yield* printError(`Listening for events at ${baseUrl} (Ctrl-C to stop)`)
        delay = 250
        const body = response.body
        const from = cursor
        cursor = yield* follow(body, from, target, secret)
      }
      yield* Effect.sleep(Duration.millis(delay))
      delay = Math.min(delay * 2, 10_000)
    }
  })).pipe(Command.withDescription("Events as they commit, one line each; --forward-to POSTs each one, signed"))

/** What makes the mock broker end an intent in each event type. */
const triggers: Record<EventType, { readonly symbol: string; readonly cancel: boolean }> = {
  "intent.created": { symbol: "HOLD", cancel: false },
  "intent.filled": { symbol: "AAPL", cancel: false },
  "intent.partially_filled": { symbol: "PARTIAL", cancel: false },
  "intent.canceled": { symbol: "HOLD", cancel: true },
  "intent.rejected": { symbol: "REJECT", cancel: false },
  "intent.failed": { symbol: "FAIL", cancel: false }
}

const trigger = Command.make("trigger", {
  type: Args.text({ name: "TYPE" }).pipe(Args.withDescription(`the event to end in: ${EventType.literals.join(", ")}`)),
  broker: Options.text("broker").pipe(Options.withPseudoName("BROKER_ID"), Options.withDescription("a mock connection of yours"))
}, (flags) =>
  Effect.gen(function*() {
    const type = yield* Schema.decodeUnknown(EventType)(flags.type).pipe(
      Effect.mapError(() => usage(`TYPE must be one of: ${EventType.literals.join(", ")}`))
    )
    const { cancel, symbol } = triggers[type]
    const created = yield* call("POST", "/api/v1/intents", {
      intent_id: `trigger-${Crypto.randomUUID()}`,
      symbol,
      side: "buy",
      quantity: 2,
      order_type: "market",
      broker_id: flags.broker
    })
    const { id } = yield* Schema.decodeUnknown(Schema.Struct({ id: IntentId }))(created).pipe(
      Effect.mapError(() => failure("the API answered the intent without its id"))
    )
    if (cancel) {
      // Canceled once its order rests at the broker.
      yield* Effect.sleep(Duration.millis(300))
      yield* call("POST", `/api/v1/intents/${id}/cancel`)
    }
    yield* Console.log(
      `Created intent ${id}: it ends in ${type}${type === "intent.failed" ? " after the routing retries" : ""}`
    )
  })).pipe(Command.withDescription("A test intent on the mock broker that ends in an event of TYPE"))

export const subcommands = [list, listen, trigger] as const

/** `tir events …`: the caller's events, at ROUTER_URL with API_KEY. */
export const command = Command.make("events", {}, (): Effect.Effect<never, ValidationError.ValidationError> =>
  // Without a command: the group's help.
  Effect.fail(ValidationError.helpRequested(command.descriptor))).pipe(
  Command.withDescription("Your events, with an API key (API_KEY; ROUTER_URL, default http://127.0.0.1:8080)"),
  Command.withSubcommands(subcommands)
)
