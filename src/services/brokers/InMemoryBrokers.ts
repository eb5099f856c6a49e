import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Stream from "effect/Stream"
import { BrokerUnavailable } from "../../domain/Broker.js"
import * as AlpacaBroker from "./alpaca/AlpacaBroker.js"
import type { BrokerGateway, Connection } from "./BrokerGateway.js"
import type { BrokersOptions } from "./Brokers.js"
import { submitEach } from "./SubmitEach.js"

/** The mock broker keeps its orders in the database: without one, every order call fails as unavailable. */
const noMockBroker = (connection: Connection) =>
  new BrokerUnavailable({ detail: `The mock broker needs a database; none holds connection ${connection.id}` })

/**
 * The gateway beside the in-memory repositories: Alpaca as configured (verification, and orders
 * when something routes), and no mock broker, whose orders live in the database. Checking a mock
 * connection's credentials succeeds, as it does with the database: it has none.
 */
export const make = (options: BrokersOptions) =>
  Effect.map(AlpacaBroker.make(options.alpaca), (alpaca) => {
    const submit: BrokerGateway["Type"]["submit"] = (connection, order) =>
      connection.kind === "alpaca" ? alpaca.submit(connection, order) : Effect.fail(noMockBroker(connection))
    return identity<BrokerGateway["Type"]>({
      submit,
      submitMany: submitEach(submit),
      lookup: (connection, order) =>
        connection.kind === "alpaca"
          ? alpaca.lookup(connection, order)
          : Effect.fail(noMockBroker(connection)),
      cancel: (connection, clientOrderId) =>
        connection.kind === "alpaca" ? alpaca.cancel(connection, clientOrderId) : Effect.fail(noMockBroker(connection)),
      verify: (kind, environment, credentials) =>
        kind === "alpaca" ? alpaca.verify(kind, environment, credentials) : Effect.void,
      streaming: alpaca.streaming,
      updates: (connection) => connection.kind === "alpaca" ? alpaca.updates(connection) : Stream.empty
    })
  })
