import * as OpenApi from "@effect/platform/OpenApi"
import type * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { TradeIntent } from "../domain/Intent.js"
import { EventType, TestEventData } from "../domain/Webhook.js"

/** A JSON object of the OpenAPI document, read without trusting its shape. */
export type Json = { readonly [key: string]: unknown }

export const isJson = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The object at `path` under `value`, or an empty one where there is none. */
export const objectAt = (value: unknown, ...path: ReadonlyArray<string>): Json => {
  let current = value
  for (const key of path) current = isJson(current) ? current[key] : undefined
  return isJson(current) ? current : {}
}

/** What the document says of one operation beyond its schemas. */
export interface OperationDoc {
  readonly summary: string
  readonly description: string
  /** Readable descriptions of the responses, by status (the schemas' identifiers otherwise). */
  readonly responses?: Readonly<Record<number, string>>
  /** An example of the JSON request body. */
  readonly request?: unknown
  /** Examples of the JSON response bodies, by status. */
  readonly examples?: Readonly<Record<number, unknown>>
}

const withJsonExample = (target: unknown, example: unknown): unknown => {
  const content = objectAt(target, "content")
  const media = content["application/json"]
  return isJson(target) && isJson(media)
    ? { ...target, content: { ...content, "application/json": { ...media, example } } }
    : target
}

/** The OpenAPI annotations of an endpoint: `.annotateContext(operation({ … }))`. */
export const operation = (doc: OperationDoc): Context.Context<never> =>
  OpenApi.annotations({
    summary: doc.summary,
    description: doc.description,
    transform: (op) => {
      const responses: Record<string, unknown> = { ...objectAt(op, "responses") }
      for (const [status, description] of Object.entries(doc.responses ?? {})) {
        if (responses[status] !== undefined) responses[status] = { ...objectAt(responses, status), description }
      }
      for (const [status, example] of Object.entries(doc.examples ?? {})) {
        responses[status] = withJsonExample(responses[status], example)
      }
      const requestBody = doc.request === undefined ? op["requestBody"] : withJsonExample(op["requestBody"], doc.request)
      return { ...op, responses, ...(requestBody === undefined ? {} : { requestBody }) }
    }
  })

const INTENT_ID = "6f1c2a4e-8b3d-4c5e-9f70-1a2b3c4d5e6f"
const BROKER_ID = "2b4e6d8f-1a3c-4e5f-8a9b-0c1d2e3f4a5b"

export const exampleCreateIntent = {
  intent_id: "order-42",
  symbol: "AAPL",
  side: "buy",
  quantity: 10,
  order_type: "limit",
  limit_price: 99.5,
  time_in_force: "gtc",
  broker_id: BROKER_ID
}

export const exampleIntent = {
  id: INTENT_ID,
  intent_id: "order-42",
  symbol: "AAPL",
  side: "buy",
  quantity: 10,
  order_type: "limit",
  limit_price: 99.5,
  stop_price: null,
  time_in_force: "gtc",
  extended_hours: false,
  status: "pending",
  status_reason: null,
  broker_id: BROKER_ID,
  orders: [],
  created_at: "2026-11-21T00:59:26.578Z",
  updated_at: "2026-11-21T00:59:26.578Z"
}

export const exampleCanceledIntent = {
  ...exampleIntent,
  status: "canceled",
  status_reason: "Canceled by the client before submission",
  updated_at: "2026-11-21T01:02:03.004Z"
}

export const exampleIntentPage = { items: [exampleIntent], page: 1, page_size: 20, total_items: 1, total_pages: 1 }

export const exampleEvent = {
  id: "evt_9f2c4b7a1e3d5f6081a2b3c4d5e6f708",
  type: "intent.created",
  created_at: "2026-11-21T00:59:26.578Z",
  data: exampleIntent
}

export const exampleEventPage = { items: [exampleEvent], next_cursor: "48213_1", has_more: false }

/** The body of a webhook delivery of an intent's event, as `src/Receiver.ts` decodes it. */
export const WebhookEvent = Schema.Struct({
  id: Schema.String.annotations({ description: "The event's id, the same as the `sr-event-id` header: deduplicate on it" }),
  type: EventType,
  created_at: Schema.DateTimeUtc,
  data: TradeIntent
}).annotations({
  identifier: "WebhookEvent",
  description: "A webhook delivery: an intent's event, `data` the intent exactly as GET showed it then"
})

/** The body of a `webhook.test` delivery: about no intent. */
export const WebhookTestEvent = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("webhook.test"),
  created_at: Schema.DateTimeUtc,
  data: TestEventData
}).annotations({
  identifier: "WebhookTestEvent",
  description: "A test delivery, sent from the dashboard to one endpoint to check that it receives and verifies deliveries"
})
