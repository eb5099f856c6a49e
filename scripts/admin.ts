/**
 * The operator CLI: `npm run admin -- <command> [--flags]`, the `admin` commands of `tir`
 * (src/cli/Admin.ts). ROUTER_URL (default http://127.0.0.1:8080) and ADMIN_TOKEN say where and who.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cli from "../src/cli/Cli.js"

const [runtime = "node", script = "scripts/admin.ts", ...args] = process.argv

NodeRuntime.runMain(Cli.run([runtime, script, "admin", ...args], { usagePrefix: "npm run admin --" }), {
  disablePrettyLogger: true
})
