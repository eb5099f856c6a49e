/**
 * The bench's reference: a bare `node:http` + `pg` server with a 10-connection pool, doing one
 * INSERT per creation (`POST /intents`), one SELECT by primary key per lookup
 * (`GET /intents/:id`) and one SELECT of a page of 100 rows (`GET /intents?page`), with no
 * framework, validation, authentication or limiter. It shows what the platform itself can do on
 * this machine. Run as a child process by scripts/bench.ts:
 * `node --import tsx scripts/bench/Reference.ts <database url> <port>`.
 */
import { createServer } from "node:http"
import pg from "pg"
import { BARE_TABLE, createTable } from "./ReferenceTable.js"

const [databaseUrl, port] = process.argv.slice(2)
if (databaseUrl === undefined || port === undefined) throw new Error("usage: Reference.ts <database url> <port>")

const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 })

await pool.query(createTable(BARE_TABLE))

const send = (res: import("node:http").ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

const server = createServer((req, res) => {
  const fail = (error: unknown) => send(res, 500, { error: String(error) })
  if (req.method === "POST" && req.url === "/intents") {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body: Record<string, unknown> = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      pool.query(
        `INSERT INTO reference_intents (intent_id, symbol, side, quantity, order_type, broker_id)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
        [body.intent_id, body.symbol, body.side, body.quantity, body.order_type, body.broker_id]
      ).then((result) => send(res, 201, result.rows[0]), fail)
    })
    return
  }
  if (req.method === "GET" && req.url === "/intents?page") {
    pool.query("SELECT * FROM reference_intents ORDER BY created_at, id LIMIT 100").then(
      (result) => send(res, 200, { items: result.rows }),
      fail
    )
    return
  }
  const lookup = req.method === "GET" ? /^\/intents\/([0-9a-f-]{36})$/.exec(req.url ?? "") : null
  if (lookup !== null) {
    pool.query("SELECT * FROM reference_intents WHERE id = $1", [lookup[1]]).then(
      (result) => result.rows.length === 0 ? send(res, 404, { error: "not found" }) : send(res, 200, result.rows[0]),
      fail
    )
    return
  }
  send(res, 404, { error: "not found" })
})

server.listen(Number(port), "127.0.0.1", () => console.log("listening"))
process.on("SIGTERM", () => server.close(() => pool.end().then(() => process.exit(0))))
