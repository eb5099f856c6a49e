import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import { Unprocessable } from "../domain/Errors.js"

/** Encrypts broker credentials at rest with AES-256-GCM under `CREDENTIALS_KEY`. */
export class CredentialsCipher extends Context.Tag("CredentialsCipher")<CredentialsCipher, {
  readonly encrypt: (plaintext: string) => Effect.Effect<string, Unprocessable>
  readonly decrypt: (ciphertext: string) => Effect.Effect<string, Unprocessable>
}>() {
  /** With no key, nothing can be stored encrypted: live connections are refused with a clear reason. */
  static readonly layer = (key: Option.Option<Redacted.Redacted<string>>) =>
    Layer.succeed(this, Option.match(key, { onNone: () => unavailable, onSome: make }))
}

const missingKey = new Unprocessable({
  detail: "Live broker credentials cannot be stored: the server has no CREDENTIALS_KEY"
})
const unavailable = { encrypt: () => Effect.fail(missingKey), decrypt: () => Effect.fail(missingKey) }

const make = (secret: Redacted.Redacted<string>): Context.Tag.Service<CredentialsCipher> => {
  const key = Buffer.from(Redacted.value(secret), "hex")
  return {
    encrypt: (plaintext) =>
      Effect.sync(() => {
        const iv = Crypto.randomBytes(12)
        const cipher = Crypto.createCipheriv("aes-256-gcm", key, iv)
        const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
        return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`
      }),
    decrypt: (ciphertext) =>
      Effect.try({
        try: () => {
          const raw = Buffer.from(ciphertext.replace(/^v1:/, ""), "base64")
          const decipher = Crypto.createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
          decipher.setAuthTag(raw.subarray(12, 28))
          return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")
        },
        catch: () => new Unprocessable({ detail: "Broker credentials cannot be decrypted with this CREDENTIALS_KEY" })
      })
  }
}
