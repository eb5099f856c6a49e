import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { isFinal } from "../../domain/Routing.js"
import { ROUTING_CHANNEL } from "../../sql/Channels.js"
import type * as Outbox from "../../sql/Outbox.js"
import * as Tables from "../../sql/Tables.js"
import type { Job } from "./RoutingRepository.js"

/** One claim of a job: what fences a worker that lost its lease, or whose job was enqueued again. */
export const JobClaim = Tables.RoutingJobs.row.pick("intent_id", "kind", "claims", "version")
const JOB_CLAIM_RECORDSET = Tables.recordsetTypes(JobClaim, Tables.RoutingJobs.types)

/** The claim of a job, as its row holds it. */
export const claimOf = (job: Job): typeof JobClaim.Type => ({
  intent_id: job.intentId,
  kind: job.kind,
  claims: job.claims,
  version: job.version
})

/** The statements' parts that end routing jobs: written into the statements that record what the jobs did. */
export const make = (sql: SqlClient.SqlClient) => {
  /** `WHERE column IN (among)` when `among` (a query of intent ids) is given: the rows of those intents only. */
  const amongIntents = (column: string, among: Statement.Fragment | undefined) =>
    among === undefined ? sql`` : sql`WHERE ${sql.literal(column)} IN (${among})`

  /**
   * Jobs' ends, as common table expressions: each deleted if this worker still holds it (no other
   * claim since) and it was not enqueued again meanwhile; if it was, handed back (and the workers
   * woken) to run again. With `among`, only the jobs of those intents.
   */
  const finishJobs = (jobs: ReadonlyArray<typeof JobClaim.Encoded>, among?: Statement.Fragment) => {
    const held = sql`j.intent_id = d.intent_id AND j.kind = d.kind AND j.claims = d.claims AND j.locked_until IS NOT NULL`
    return sql`job_claims AS (
        SELECT * FROM json_to_recordset(${JSON.stringify(jobs)}::json) AS d(${sql.literal(JOB_CLAIM_RECORDSET)})
        ${amongIntents("d.intent_id", among)}
      ), job_done AS (
        DELETE FROM routing_jobs j USING job_claims d WHERE ${held} AND j.version = d.version
      ), job_again AS (
        UPDATE routing_jobs j SET locked_until = NULL FROM job_claims d WHERE ${held} AND j.version <> d.version
        RETURNING pg_notify(${ROUTING_CHANNEL}, j.kind)
      )`
  }

  /**
   * What transitions end, as common table expressions: the jobs the worker ran, if any; for each
   * intent now final, its other jobs no worker holds (a check at the end of the day, a sync after
   * a cancel), which have nothing left to do; and `also`, the caller's own.
   */
  const endings = (
    ends: ReadonlyArray<Outbox.Change & { readonly done: Job | undefined }>,
    also: ReadonlyArray<Statement.Fragment> = []
  ) => {
    const done = ends.flatMap(({ done }) => done === undefined ? [] : [claimOf(done)])
    const moot = ends.filter(({ transition }) => transition.changed && isFinal(transition.status)).map(({ intentId }) => intentId)
    const parts = [
      ...(done.length === 0 ? [] : [finishJobs(done)]),
      ...(moot.length === 0
        ? []
        : [sql`jobs_moot AS (DELETE FROM routing_jobs WHERE intent_id IN ${sql.in(moot)} AND locked_until IS NULL)`]),
      ...also
    ]
    return parts.length === 0 ? undefined : sql.csv(parts)
  }

  return { amongIntents, finishJobs, endings }
}

/** The parts of statements that end routing jobs (see `make`). */
export type JobEnds = ReturnType<typeof make>
