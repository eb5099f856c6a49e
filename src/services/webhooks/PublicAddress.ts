import * as Effect from "effect/Effect"
import * as Dns from "node:dns/promises"
import * as Net from "node:net"
import { isPublicAddress } from "../../domain/Webhook.js"

/**
 * Refuses a URL whose host is, or resolves to, anything but public addresses: a live endpoint may
 * not point the service at its own network. Checked when the endpoint is created and again before
 * every live delivery, so a name re-pointed later is caught too.
 */
export const requirePublic = (url: URL): Effect.Effect<void, string> =>
  Effect.gen(function*() {
    const host = url.hostname.replace(/^\[|\]$/g, "")
    const addresses = Net.isIP(host) !== 0
      ? [host]
      : yield* Effect.tryPromise({
        try: () => Dns.lookup(host, { all: true, verbatim: true }),
        catch: () => `host ${host} could not be resolved`
      }).pipe(Effect.map((found) => found.map((entry) => entry.address)))
    if (addresses.length === 0) return yield* Effect.fail(`host ${host} could not be resolved`)
    const local = addresses.find((address) => !isPublicAddress(address))
    if (local !== undefined) {
      return yield* Effect.fail(`url must resolve to public addresses only (${host} is ${local})`)
    }
  })
