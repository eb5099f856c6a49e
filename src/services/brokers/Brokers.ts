import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import type { BrokerKind } from "../../domain/Account.js"
import * as AlpacaBroker from "./alpaca/AlpacaBroker.js"
import type { AlpacaOptions } from "./alpaca/AlpacaConfig.js"
import type { BrokerGateway } from "./BrokerGateway.js"
import * as MockBroker from "./MockBroker.js"

export interface BrokersOptions {
  readonly alpaca: AlpacaOptions
}

/** The gateway routing uses: each connection goes to the broker of its kind. */
export const make = (options: BrokersOptions) =>
  Effect.gen(function*() {
    const brokers: Record<BrokerKind, BrokerGateway["Type"]> = {
      mock: yield* MockBroker.make,
      alpaca: yield* AlpacaBroker.make(options.alpaca)
    }
    return identity<BrokerGateway["Type"]>({
      submit: (connection, order) => brokers[connection.kind].submit(connection, order),
      lookup: (connection, order) => brokers[connection.kind].lookup(connection, order),
      cancel: (connection, clientOrderId) => brokers[connection.kind].cancel(connection, clientOrderId),
      verify: (kind, environment, credentials) => brokers[kind].verify(kind, environment, credentials),
      streaming: Object.values(brokers).flatMap((broker) => broker.streaming),
      updates: (connection) => brokers[connection.kind].updates(connection)
    })
  })
