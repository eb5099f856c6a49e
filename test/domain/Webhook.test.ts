import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import { checkEndpointUrl, isPublicAddress } from "../../src/domain/Webhook.js"

describe("webhook URL rules", () => {
  it("classifies addresses: loopback, private, link-local, shared, reserved and IPv6 locals are not public", () => {
    for (const local of [
      "127.0.0.1", "10.0.0.1", "172.16.5.4", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1",
      "0.0.0.0", "224.0.0.1", "255.255.255.255", "192.0.2.1", "::1", "::", "fe80::1", "fd12:3456::1", "fc00::1",
      "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "2001:db8::1", "not-an-ip"
    ]) expect(isPublicAddress(local), local).toBe(false)
    for (const open of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      expect(isPublicAddress(open), open).toBe(true)
    }
  })

  it("item 9: NAT64, 6to4, Teredo, site-local, discard-only and the 6to4 relay are not public addresses", () => {
    for (const refused of [
      "64:ff9b::7f00:1", "64:ff9b::127.0.0.1", "64:ff9b::a00:1", "64:ff9b::808:808", "64:ff9b:1::1",
      "2002:7f00:1::1", "2002:c0a8:101::1", "2002::1",
      "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:0000::abcd",
      "fec0::1", "feff:ffff::1",
      "100::", "100::1", "100::ffff:ffff:ffff:ffff",
      "192.88.99.1", "192.88.99.255",
      "::ffff:7f00:1", "::ffff:a00:1", "0:0:0:0:0:ffff:127.0.0.1", "::127.0.0.1", "fe80::1%eth0", "[::1]",
      "2001:db8:1::1", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::1"
    ]) expect(isPublicAddress(refused), refused).toBe(false)
    for (const open of [
      "2001:4860:4860::8888", "2001:1::1", "2003::1", "100:0:0:1::1", "64:ff9a::1", "192.88.98.1", "192.88.100.1",
      "::ffff:808:808", "[2606:4700:4700::1111]"
    ]) expect(isPublicAddress(open), open).toBe(true)
  })

  it("live endpoints must be https; no endpoint may carry credentials or another scheme", () => {
    expect(Either.isRight(checkEndpointUrl("http://localhost:3000/hooks", "test"))).toBe(true)
    expect(checkEndpointUrl("http://example.com/hooks", "live")).toEqual(Either.left("url of a live endpoint must be https"))
    expect(Either.isLeft(checkEndpointUrl("https://a:b@example.com/", "test"))).toBe(true)
    expect(Either.isLeft(checkEndpointUrl("file:///etc/passwd", "test"))).toBe(true)
    expect(Either.isLeft(checkEndpointUrl("/relative", "test"))).toBe(true)
  })
})
