import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { TradeIntent } from "../../src/domain/Intent.js"
import { client } from "./TestServer.js"
import type { IntentId } from "../../src/domain/Ids.js"

/** GET the intent through the typed client until `done` holds (routing runs in the background), for at most 10 s. */
export const waitFor = (key: string, id: IntentId, done: (intent: TradeIntent) => boolean) =>
  Effect.flatMap(client(key), ({ intents }) => intents.getIntent({ path: { id } })).pipe(
    Effect.repeat(
      Schedule.spaced("20 millis").pipe(Schedule.whileInput((intent: TradeIntent) => !done(intent)), Schedule.passthrough)
    ),
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`intent ${id} did not settle`) }),
    Effect.orDie
  )
