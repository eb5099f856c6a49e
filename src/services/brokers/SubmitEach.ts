import * as Effect from "effect/Effect"
import type { BrokerGateway } from "./BrokerGateway.js"

/** `submitMany` for a broker that takes one call per order: each submitted alone, all at once. */
export const submitEach = (submit: BrokerGateway["Type"]["submit"]): BrokerGateway["Type"]["submitMany"] => (orders) =>
  Effect.forEach(orders, (order) => Effect.exit(submit(order.connection, order)), { concurrency: "unbounded" })
