/**
 * `npm run drill [-- name...]`: runs the fault drills (all, or those named) against real service
 * processes on PostgreSQL and prints PASS or FAIL for each; exits 1 if any failed. Only faults the
 * process tests (test/process) do not reproduce are drills: a PostgreSQL restart and a receiver
 * whose port is closed for a while.
 */
import type { Drill } from "./drills/Drill.js"
import { pgRestart } from "./drills/pgRestart.js"
import { receiverDown } from "./drills/receiverDown.js"

const DRILLS: ReadonlyArray<Drill> = [pgRestart, receiverDown]

const main = async () => {
  const names = process.argv.slice(2)
  const unknown = names.filter((name) => !DRILLS.some((drill) => drill.name === name))
  if (unknown.length > 0) {
    console.error(`unknown drill: ${unknown.join(", ")}; known: ${DRILLS.map((drill) => drill.name).join(", ")}`)
    process.exitCode = 2
    return
  }
  const selected = names.length === 0 ? DRILLS : DRILLS.filter((drill) => names.includes(drill.name))
  const results: Array<{ readonly name: string; readonly passed: boolean; readonly seconds: number }> = []
  for (const drill of selected) {
    console.log(`\n== ${drill.name}: ${drill.description}`)
    const started = performance.now()
    let passed = true
    try {
      await drill.run((line) => console.log(`   ${line}`))
    } catch (error) {
      passed = false
      console.log(`   failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`)
    }
    const seconds = (performance.now() - started) / 1000
    results.push({ name: drill.name, passed, seconds })
    console.log(`${passed ? "PASS" : "FAIL"} ${drill.name} (${seconds.toFixed(1)} s)`)
  }
  console.log()
  for (const result of results) console.log(`${result.passed ? "PASS" : "FAIL"}  ${result.name}`)
  const failed = results.filter((result) => !result.passed).length
  console.log(`${results.length - failed} passed, ${failed} failed`)
  if (failed > 0) process.exitCode = 1
}

main().catch((error: unknown) => {
  console.error("drill runner failed:", error)
  process.exitCode = 1
})
