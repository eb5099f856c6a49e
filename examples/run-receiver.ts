import { parseArgs } from "node:util"
import { makeReceiver } from "./receiver-node.js"

// `npm run example:receiver -- --secret <64 hex> [--port 4000]`: prints each verified event.
const { values } = parseArgs({ options: { secret: { type: "string" }, port: { type: "string", default: "4000" } } })
if (values.secret === undefined || !/^[0-9a-fA-F]{64}$/.test(values.secret)) {
  process.stderr.write("usage: npm run example:receiver -- --secret <the endpoint's 64-hex signing secret> [--port 4000]\n")
  process.exit(2)
}
const port = Number(values.port)
makeReceiver(values.secret, (event) => {
  const data = event.data as { readonly status?: string; readonly intent_id?: string }
  process.stdout.write(`${event.type} ${event.id} intent_id=${data.intent_id ?? "?"} status=${data.status ?? "?"}\n`)
}).listen(port, "127.0.0.1", () => process.stdout.write(`receiving webhooks on http://127.0.0.1:${port}/hooks\n`))
