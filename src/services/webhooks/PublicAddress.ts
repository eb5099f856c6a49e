import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Dns from "node:dns"
import * as DnsPromises from "node:dns/promises"
import * as Net from "node:net"
import { isPublicAddress } from "../../domain/Webhook.js"

/** A host's addresses, as `dns.lookup` with `all: true` gives them. */
export type Resolve = (host: string) => Promise<ReadonlyArray<Dns.LookupAddress>>

/** The operating system's resolver. */
export const systemResolve: Resolve = (host) => DnsPromises.lookup(host, { all: true, verbatim: true })

/** Which addresses a live endpoint may be reached at. */
export type AddressPolicy = (address: string) => boolean

/** A host that may not be connected to: it does not resolve, or not to allowed addresses only. */
export class HostRefused extends Data.TaggedError("HostRefused")<{
  readonly code: "ENOTFOUND" | "ENOTPUBLIC"
  readonly message: string
}> {}

const unresolved = (host: string) => new HostRefused({ code: "ENOTFOUND", message: `host ${host} could not be resolved` })
const refused = (host: string, address: string) =>
  new HostRefused({ code: "ENOTPUBLIC", message: `url must resolve to public addresses only (${host} is ${address})` })

/**
 * The addresses a host may be connected to: every one it resolves to (an IP literal is its own
 * address), or the reason it is refused when any of them fails the policy.
 */
export const allowedAddresses = (
  host: string,
  options: { readonly resolve?: Resolve | undefined; readonly allow?: AddressPolicy | undefined } = {}
): Effect.Effect<ReadonlyArray<Dns.LookupAddress>, HostRefused> =>
  Effect.gen(function*() {
    const bare = host.replace(/^\[|\]$/g, "")
    const family = Net.isIP(bare)
    const resolve = options.resolve ?? systemResolve
    const addresses = family !== 0 ? [{ address: bare, family }] : yield* Effect.tryPromise({
      try: () => resolve(bare),
      catch: () => unresolved(bare)
    })
    if (addresses.length === 0) return yield* Effect.fail(unresolved(bare))
    const local = addresses.find((entry) => !(options.allow ?? isPublicAddress)(entry.address))
    if (local !== undefined) return yield* Effect.fail(refused(bare, local.address))
    return addresses
  })

/**
 * Refuses a URL whose host is, or resolves to, anything but public addresses: a live endpoint may
 * not point the service at its own network.
 */
export const requirePublic = (url: URL, resolve?: Resolve): Effect.Effect<void, string> =>
  allowedAddresses(url.hostname, { resolve }).pipe(Effect.asVoid, Effect.mapError((refusal) => refusal.message))

/**
 * A `lookup` for `net.connect` that resolves once, checks every address against the policy and
 * hands exactly those checked addresses to the connection: a name re-pointed between a check and
 * the connect (DNS rebinding) cannot slip a private address in. A refused host fails the connection
 * with the code `ENOTPUBLIC`.
 */
export const checkedLookup = (options: { readonly resolve?: Resolve | undefined; readonly allow?: AddressPolicy | undefined }): Net.LookupFunction =>
(hostname, lookupOptions, callback) => {
  const fail = (refusal: HostRefused) =>
    callback(Object.assign(new Error(refusal.message), { code: refusal.code, hostname }), "", 0)
  Effect.runCallback(allowedAddresses(hostname, options), {
    onExit: Exit.match({
      onFailure: (cause) => fail(Option.getOrElse(Cause.failureOption(cause), () => unresolved(hostname))),
      onSuccess: (all) => {
        const family = lookupOptions.family
        const wanted = family === 4 || family === "IPv4" ? 4 : family === 6 || family === "IPv6" ? 6 : 0
        const addresses = all.filter((entry) => wanted === 0 || entry.family === wanted)
        const [first] = addresses
        if (first === undefined) return fail(unresolved(hostname))
        if (lookupOptions.all === true) return callback(null, addresses.map((entry) => ({ ...entry })))
        callback(null, first.address, first.family)
      }
    })
  })
}
