/**
 * `npm run events -- <command>`: a user's events from the command line, the `events` commands of
 * `tir` (src/cli/Events.ts), with an API key (`API_KEY`) at `ROUTER_URL` (default http://127.0.0.1:8080).
 *
 *   list    [--after CURSOR] [--type TYPE] [--intent ID] [--limit N]   one page of the feed, as JSON
 *   listen  [--after CURSOR] [--forward-to URL] [--secret HEX]        events as they commit, one line
 *           each; with --forward-to, each is also POSTed to URL signed exactly as a webhook would be
 *           (a secret is made up and printed unless given), so a local receiver needs no public endpoint
 *   trigger TYPE --broker BROKER_ID                                     a test intent that ends in an
 *           event of TYPE (intent.created, .filled, .partially_filled, .canceled, .rejected, .failed)
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cli from "../src/cli/Cli.js"

const [runtime = "node", script = "scripts/events.ts", ...args] = process.argv

NodeRuntime.runMain(Cli.run([runtime, script, "events", ...args], { usagePrefix: "npm run events --" }), {
  disablePrettyLogger: true
})
