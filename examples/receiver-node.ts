import { createServer } from "node:http"
import { verifyWebhook, type WebhookVerificationError } from "trade-intent-router/receiver"

// A webhook receiver on Node's own http module. The raw body is verified before it is parsed.
export const makeReceiver = (secret: string, onEvent: (event: { id: string; type: string; data: unknown }) => void) => {
  const seen = new Set<string>() // deliveries are at least once: the signed event id deduplicates
  return createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      verifyWebhook({ headers: req.headers, body: Buffer.concat(chunks), secret }).then(
        (delivery) => {
          if (!seen.has(delivery.eventId)) {
            seen.add(delivery.eventId)
            onEvent(JSON.parse(delivery.body))
          }
          res.writeHead(204).end()
        },
        (error: WebhookVerificationError) => {
          res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ reason: error.reason }))
        }
      )
    })
  })
}
