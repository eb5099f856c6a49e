import { describe, expect, it } from "@effect/vitest"
import { apiKeyHint, apiKeyMode, hashApiKey } from "../../src/domain/ApiKeyFormat.js"

describe("API keys", () => {
  it("are stored as the lowercase hex SHA-256 of the whole key, so that keys made by earlier versions still match", () => {
    const key = "sk_test_0123456789abcdefABCDEF0123456789"
    // The digest of the key's UTF-8 bytes, as `sha256sum` prints it.
    expect(hashApiKey(key)).toBe("de7e0be36e3052d3bccd391de6b8880cb037015b59a4229241460479ecbd962a")
    expect(hashApiKey(`${key.slice(0, -1)}8`)).not.toBe(hashApiKey(key))
    expect(apiKeyMode(key)).toBe("test")
    expect(apiKeyHint(key)).toBe("sk_test_…6789")
  })
})
