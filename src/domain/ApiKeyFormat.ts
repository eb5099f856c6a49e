import * as Crypto from "node:crypto"
import type { Mode } from "./Ids.js"

const KEY = /^sk_(test|live)_[A-Za-z0-9]{32}$/

/** The mode of a well-formed key (`sk_test_` or `sk_live_` and 32 base62 characters), or undefined. */
export const apiKeyMode = (key: string): Mode | undefined => {
  const match = KEY.exec(key)
  return match?.[1] === "test" || match?.[1] === "live" ? match[1] : undefined
}

/** What the operator sees of a key: its prefix and last four characters. */
export const apiKeyHint = (key: string): string => `${key.slice(0, 8)}…${key.slice(-4)}`

/** The key is never stored: only its SHA-256. */
export const hashApiKey = (key: string): string => Crypto.hash("sha256", key, "hex")
