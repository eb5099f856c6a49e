import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import type { BrokerKind } from "../../domain/Account.js"
import { BrokerUnavailable } from "../../domain/Broker.js"
import type { BrokerGateway } from "./BrokerGateway.js"
import * as MockBroker from "./MockBroker.js"

/** A broker this version cannot reach: every submission fails certainly, so the intent fails with the reason. */
const unsupported = (name: string): BrokerGateway["Type"] => ({
  submit: () => Effect.fail(new BrokerUnavailable({ detail: `Routing to ${name} is not available in this version` })),
  lookup: () => Effect.succeed(Option.none()),
  cancel: () => Effect.succeed(Option.none())
})

/** The gateway routing uses: each connection goes to the broker of its kind. */
export const make = Effect.gen(function*() {
  const brokers: Record<BrokerKind, BrokerGateway["Type"]> = {
    mock: yield* MockBroker.make,
    alpaca: unsupported("Alpaca")
  }
  return identity<Context.Tag.Service<typeof BrokerGateway>>({
    submit: (connection, order) => brokers[connection.kind].submit(connection, order),
    lookup: (connection, clientOrderId) => brokers[connection.kind].lookup(connection, clientOrderId),
    cancel: (connection, clientOrderId) => brokers[connection.kind].cancel(connection, clientOrderId)
  })
})
