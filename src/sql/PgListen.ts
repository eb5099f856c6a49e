import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as RcRef from "effect/RcRef"
import * as Stream from "effect/Stream"
import Pg from "pg"

/**
 * `LISTEN` on a PostgreSQL connection of its own, shared by every channel. The driver's client runs
 * one command at a time and warns when asked for another meanwhile (it queues it, and will stop
 * doing so): the LISTEN and UNLISTEN commands take turns here. A channel is listened to while any
 * stream follows it, so one stream ending never deafens another on the same channel. The
 * connection opens with the first stream and closes after the last; a lost connection is not
 * reported by the driver, which is why the streams are supervised by probes.
 */
export const make = (config: Pg.ClientConfig) =>
  Effect.gen(function*() {
    const turn = yield* Effect.makeSemaphore(1)
    const connection = yield* RcRef.make({
      acquire: Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            const client = new Pg.Client(config)
            // Errors surface as silence, which the probes detect; unhandled, they would end the process.
            client.on("error", () => undefined)
            await client.connect()
            return { client, followers: new Map<string, number>() }
          },
          catch: (cause) => new SqlError({ cause, message: "Failed to connect for LISTEN" })
        }),
        ({ client }) => Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption(1000))
      )
    })

    const command = (client: Pg.Client, text: string) =>
      Effect.tryPromise({ try: () => client.query(text), catch: (cause) => new SqlError({ cause, message: `${text} failed` }) })

    return (channel: string): Stream.Stream<string, SqlError> =>
      Stream.asyncPush<string, SqlError>((emit) =>
        Effect.gen(function*() {
          const { client, followers } = yield* RcRef.get(connection)
          const onNotification = (message: Pg.Notification) => {
            if (message.channel === channel && message.payload !== undefined && message.payload !== "") {
              emit.single(message.payload)
            }
          }
          yield* Effect.addFinalizer(() =>
            turn.withPermits(1)(Effect.suspend(() => {
              client.off("notification", onNotification)
              const left = (followers.get(channel) ?? 1) - 1
              if (left > 0) return Effect.sync(() => followers.set(channel, left))
              followers.delete(channel)
              return Effect.ignore(command(client, `UNLISTEN ${client.escapeIdentifier(channel)}`))
            }))
          )
          yield* turn.withPermits(1)(Effect.gen(function*() {
            const count = followers.get(channel) ?? 0
            if (count === 0) yield* command(client, `LISTEN ${client.escapeIdentifier(channel)}`)
            followers.set(channel, count + 1)
            client.on("notification", onNotification)
          }))
        })
      )
  })
