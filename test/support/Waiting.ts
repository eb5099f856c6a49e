import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { send } from "./TestServer.js"

export interface IntentBody {
  readonly id: string
  readonly status: string
  readonly status_reason: string | null
  readonly updated_at: string
  readonly orders: ReadonlyArray<{
    readonly id: string
    readonly broker_order_id: string
    readonly status: string
    readonly fills: ReadonlyArray<{ readonly quantity: number; readonly price: number; readonly filled_at: string }>
  }>
}

/** GET the intent until `done` holds (routing runs in the background), for at most 10 s. */
export const waitFor = (key: string, id: string, done: (intent: IntentBody) => boolean) =>
  send("GET", `/api/v1/intents/${id}`, { key }).pipe(
    Effect.map((reply) => reply.body as IntentBody),
    Effect.repeat(
      Schedule.spaced("20 millis").pipe(Schedule.whileInput((intent: IntentBody) => !done(intent)), Schedule.passthrough)
    ),
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`intent ${id} did not settle`) }),
    Effect.orDie
  )
