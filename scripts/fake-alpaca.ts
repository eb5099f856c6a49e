/**
 * `npm run fake-alpaca [-- --port N]`: runs the fake Alpaca (Trading API REST subset, the
 * `trade_updates` stream and the `/_fake/` control API) on 127.0.0.1, port 4010 unless set, until
 * SIGINT or SIGTERM.
 */
import { parseArgs } from "node:util"
import * as FakeAlpaca from "../src/services/brokers/alpaca/FakeAlpaca.js"

const KEY_ID = "fake-key-id"
const SECRET_KEY = "fake-secret-key"

const main = async () => {
  const { values } = parseArgs({ options: { port: { type: "string", default: "4010" } } })
  const port = Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`--port must be a port number, not ${values.port}`)
    process.exitCode = 2
    return
  }
  const fake = await FakeAlpaca.start({ port, credentials: [{ keyId: KEY_ID, secretKey: SECRET_KEY }] })
  const url = fake.url
  console.log(`Fake Alpaca listening
  REST:    ${url}
  stream:  ${fake.streamUrl}
  key id:  ${KEY_ID}
  secret:  ${SECRET_KEY}

Point the router at it:
  export ALPACA_PAPER_API_URL=${url}
  export ALPACA_PAPER_STREAM_URL=${fake.streamUrl}
  export ALPACA_LIVE_API_URL=${url}
  export ALPACA_LIVE_STREAM_URL=${fake.streamUrl}

Control (no credentials; not recorded among the requests):
  behaviour of submissions (fill, partial, rest, reject, timeout_after_accept, rate_limited, hang_after_accept):
    curl -X POST ${url}/_fake/behaviour -d '{"behaviour":"rest","symbol":"AAPL","times":1}'
  fill, half-fill or cancel an open order:
    curl -X POST ${url}/_fake/orders/ORDER_ID/fill
    curl -X POST ${url}/_fake/orders/ORDER_ID/partial_fill
    curl -X POST ${url}/_fake/orders/ORDER_ID/cancel -d '{"status":"expired"}'
  drop the next stream events, or every stream connection:
    curl -X POST ${url}/_fake/drop-events -d '{"count":1}'
    curl -X POST ${url}/_fake/drop-connections
  hold order lookups unanswered (a slow Alpaca), then answer them:
    curl -X POST ${url}/_fake/hold-lookups -d '{"held":true}'
    curl -X POST ${url}/_fake/hold-lookups -d '{"held":false}'
  add or revoke a key pair (each pair is an account):
    curl -X POST ${url}/_fake/credentials -d '{"key_id":"key-b","secret_key":"secret-b"}'
    curl -X DELETE ${url}/_fake/credentials/key-b
  look:
    curl ${url}/_fake/orders
    curl ${url}/_fake/requests
    curl ${url}/_fake/streams
  answer the submissions hung by hang_after_accept (their connections are broken off), or start over:
    curl -X POST ${url}/_fake/release-hung
    curl -X POST ${url}/_fake/reset
`)
  const stop = (signal: string) => {
    console.log(`${signal}: stopping`)
    fake.stop().then(() => process.exit(0), (error: unknown) => {
      console.error(error)
      process.exit(1)
    })
  }
  process.once("SIGINT", () => stop("SIGINT"))
  process.once("SIGTERM", () => stop("SIGTERM"))
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error))
  process.exitCode = 1
})
