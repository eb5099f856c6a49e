import * as FiberRef from "effect/FiberRef"
import * as GlobalValue from "effect/GlobalValue"

/** The id of the request being served; set by the edge middleware, read when errors are encoded. */
export const CurrentRequestId: FiberRef.FiberRef<string> = GlobalValue.globalValue(
  Symbol.for("trade-intent-router/CurrentRequestId"),
  () => FiberRef.unsafeMake("")
)
