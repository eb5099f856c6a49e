import { exampleIntent, isJson, type Json, objectAt } from "./OpenApiDocs.js"

const DECODE_ERROR_REF = "#/components/schemas/HttpApiDecodeError"

const isDecodeErrorRef = (value: unknown) =>
  typeof value === "object" && value !== null && "$ref" in value && value.$ref === DECODE_ERROR_REF

/** A copy of `value` without the decode error: an `anyOf` left with one member becomes that member. */
const withoutDecodeError = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.filter((item) => !isDecodeErrorRef(item)).map(withoutDecodeError)
  if (typeof value !== "object" || value === null) return value
  const entries = Object.entries(value)
    .filter(([key]) => key !== "HttpApiDecodeError")
    .map(([key, item]) => [key, withoutDecodeError(item)] as const)
  const object = Object.fromEntries(entries)
  const anyOf = object["anyOf"]
  if (Array.isArray(anyOf) && anyOf.length === 1 && Object.keys(object).length === 1) return anyOf[0]
  return object
}

/**
 * `HttpApi` declares its own decode error on every endpoint; the server answers those with the
 * `validation_error` body instead, so the document says only that.
 */
export const dropDecodeError = (spec: Record<string, unknown>): Record<string, unknown> => {
  const patched = withoutDecodeError(spec)
  return typeof patched === "object" && patched !== null && !Array.isArray(patched) ? { ...patched } : spec
}

const header = (description: string, schema: Json = { type: "integer" }): Json => ({ description, schema })

/** The response headers the edge and the middlewares set, declared once. */
const headers: Json = {
  "X-Request-Id": header("The request's id, also the `request_id` of an error body: quote it when reporting a problem", {
    type: "string"
  }),
  "X-RateLimit-Limit": header("Requests this API key may make per minute"),
  "X-RateLimit-Remaining": header("Requests left to this API key in the current minute"),
  "X-RateLimit-Reset": header("Unix seconds when the current minute's window ends and the count starts again"),
  "Retry-After": header("Seconds to wait before retrying"),
  "Location": header("The path of the Trade Intent that already holds this intent_id", { type: "string" })
}
const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` })

const errorSchema = (code: string): Json => ({
  type: "object",
  required: ["detail", "error_code", "request_id"],
  properties: {
    detail: { type: "string" },
    error_code: { type: "string", enum: [code] },
    request_id: { type: "string" }
  },
  additionalProperties: false
})

/** The refusals of the edge middleware, answered before any endpoint: not declared on the endpoints. */
const edgeErrors: Json = {
  Error_payload_too_large: errorSchema("payload_too_large"),
  Error_unsupported_media_type: errorSchema("unsupported_media_type")
}
const UNAVAILABLE = "#/components/schemas/Error_service_unavailable"

const errorResponse = (description: string, ref: string): Json => ({
  description,
  content: { "application/json": { schema: { $ref: ref } } }
})

/** Whether an operation reaches the database: all but the liveness probe. */
const touchesDatabase = (path: string) => path !== "/livez"

const refersTo = (response: unknown, ref: string) => JSON.stringify(response ?? {}).includes(`"${ref}"`)

/** The 413, 415 and 503 an operation can get from the edge, added where it can get them. */
const withEdgeErrors = (path: string, op: Json): Json => {
  const responses: Record<string, unknown> = { ...objectAt(op, "responses") }
  if (refersTo(responses["400"], "#/components/schemas/Error_validation_error")) {
    responses["400"] = {
      ...objectAt(responses, "400"),
      description: "The request is malformed: bad JSON, a missing field, a wrong type, an unknown field (`validation_error`)"
    }
  }
  if (op["requestBody"] !== undefined) {
    responses["413"] ??= errorResponse(
      "The body is over 64 KiB (`payload_too_large`)",
      "#/components/schemas/Error_payload_too_large"
    )
    responses["415"] ??= errorResponse(
      "The body is not sent as `Content-Type: application/json` (`unsupported_media_type`)",
      "#/components/schemas/Error_unsupported_media_type"
    )
  }
  if (touchesDatabase(path)) {
    if (responses["503"] === undefined) {
      responses["503"] = errorResponse(
        "The database is not answering (`service_unavailable`): retry after `Retry-After` seconds",
        UNAVAILABLE
      )
    } else if (!refersTo(responses["503"], UNAVAILABLE)) {
      const current = objectAt(responses, "503")
      const schema = objectAt(current, "content", "application/json")["schema"]
      responses["503"] = {
        ...current,
        description: `${String(current["description"])}; or the database is not answering (\`service_unavailable\`)`,
        content: { "application/json": { schema: { anyOf: [schema, { $ref: UNAVAILABLE }] } } }
      }
    }
  }
  return { ...op, responses }
}

const usesApiKey = (op: Json) => {
  const security = op["security"]
  return Array.isArray(security) && security.some((requirement: unknown) => isJson(requirement) && "apiKey" in requirement)
}

/** The headers of each response: the request id always, the rest where the server sets them. */
const withHeaders = (op: Json): Json => {
  const responses: Record<string, unknown> = {}
  for (const [status, response] of Object.entries(objectAt(op, "responses"))) {
    const names = ["X-Request-Id"]
    if (usesApiKey(op) && status !== "401") names.push("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
    if (status === "429" || status === "503") names.push("Retry-After")
    if (status === "409" && refersTo(response, "#/components/schemas/Error_duplicate_intent_id")) names.push("Location")
    responses[status] = {
      ...objectAt(response),
      headers: { ...objectAt(response, "headers"), ...Object.fromEntries(names.map((name) => [name, headerRef(name)])) }
    }
  }
  return { ...op, responses }
}

const signatureHeaders: ReadonlyArray<Json> = [
  {
    name: "sr-signature",
    in: "header",
    required: true,
    description: "`v1=` followed by the lowercase hex HMAC-SHA256, keyed by the hex-decoded endpoint secret, " +
      "of `<sr-timestamp>.<raw body>`; compare in constant time",
    schema: { type: "string", pattern: "^v1=[0-9a-f]{64}$" }
  },
  {
    name: "sr-timestamp",
    in: "header",
    required: true,
    description: "Unix seconds when this attempt was signed (each attempt is signed afresh): refuse one too far from now",
    schema: { type: "string", pattern: "^[0-9]+$" }
  },
  {
    name: "sr-event-id",
    in: "header",
    required: true,
    description: "The event's id, the same as the signed body's `id`",
    schema: { type: "string" }
  }
]

const deliveryResponses: Json = {
  "2XX": { description: "Received: a 2xx answer within 10 s ends the delivery" },
  "410": { description: "Gone: the endpoint is disabled and receives nothing more" },
  default: { description: "Anything else, or no answer in 10 s: the delivery is retried on the retry schedule" }
}

const webhook = (type: string, description: string, schema: Json, example: Json): Json => ({
  post: {
    summary: `The \`${type}\` event`,
    description: `${description} Sent as a signed \`POST\` with \`Content-Type: application/json\` to every enabled ` +
      "endpoint subscribed to it, at least once and not ordered: deduplicate on `id`. See docs/webhooks.md.",
    operationId: `webhook.${type}`,
    tags: ["webhooks"],
    security: [],
    parameters: signatureHeaders,
    requestBody: { required: true, content: { "application/json": { schema, example } } },
    responses: deliveryResponses
  }
})

const eventDescriptions: Record<string, string> = {
  "intent.created": "A Trade Intent was created (status `pending`).",
  "intent.partially_filled": "An intent's order was partly filled.",
  "intent.filled": "An intent's order was completely filled.",
  "intent.canceled": "An intent was canceled, by the client or at the broker.",
  "intent.rejected": "The broker rejected an intent's order.",
  "intent.failed": "An intent could not be routed (the broker unreachable after every retry, say)."
}


/** One entry per delivered type, with the envelope (`WebhookEvent`, `WebhookTestEvent`) and the signature headers. */
const webhooks = (eventTypes: ReadonlyArray<string>): Json => ({
  ...Object.fromEntries(eventTypes.map((type) => [
    type,
    webhook(
      type,
      eventDescriptions[type] ?? "",
      {
        allOf: [
          { $ref: "#/components/schemas/WebhookEvent" },
          { type: "object", properties: { type: { type: "string", enum: [type] } } }
        ]
      },
      {
        id: "evt_9f2c4b7a1e3d5f6081a2b3c4d5e6f708",
        type,
        created_at: "2026-11-21T00:59:26.578Z",
        data: { ...exampleIntent, order_type: "market", limit_price: null, time_in_force: "day", status: type === "intent.created" ? "pending" : type.slice("intent.".length) }
      }
    )
  ])),
  "webhook.test": webhook(
    "webhook.test",
    "A test event, sent from the dashboard to one endpoint only, to check that it receives and verifies deliveries.",
    { $ref: "#/components/schemas/WebhookTestEvent" },
    {
      id: "evt_0a1b2c3d4e5f60718293a4b5c6d7e8f9",
      type: "webhook.test",
      created_at: "2026-11-21T00:59:26.578Z",
      data: { endpoint_id: "3c5d7e9f-2b4d-4f6a-9b8c-1d2e3f4a5b6c", message: "A test event from the Trade Intent Router" }
    }
  )
})

/**
 * Completes the generated document with what the endpoints do not declare: the edge's 413, 415 and
 * 503, the response headers, and the webhooks the service sends (OpenAPI 3.1 `webhooks`).
 */
export const completeDocument = (eventTypes: ReadonlyArray<string>) =>
(spec: Record<string, unknown>): Record<string, unknown> => {
  const paths: Record<string, unknown> = {}
  for (const [path, item] of Object.entries(objectAt(spec, "paths"))) {
    paths[path] = Object.fromEntries(
      Object.entries(objectAt(item)).map(([method, op]) => [method, isJson(op) ? withHeaders(withEdgeErrors(path, op)) : op])
    )
  }
  const components = objectAt(spec, "components")
  const tags: ReadonlyArray<unknown> = Array.isArray(spec["tags"]) ? spec["tags"] : []
  return {
    ...spec,
    paths,
    webhooks: webhooks(eventTypes),
    tags: [...tags, { name: "webhooks", description: "What the service POSTs to your webhook endpoints, signed." }],
    components: {
      ...components,
      schemas: { ...objectAt(components, "schemas"), ...edgeErrors },
      headers: { ...objectAt(components, "headers"), ...headers }
    }
  }
}
