import * as Schema from "effect/Schema"

/** The channel a commit that adds routing work notifies, so that workers wake at once. */
export const ROUTING_CHANNEL = "routing_jobs"

/** The channel a commit that writes events notifies, with `<user id>:<mode>` of each. */
export const EVENTS_CHANNEL = "intent_events"

/** The channel a commit that makes a webhook delivery due notifies. */
export const WEBHOOK_CHANNEL = "webhook_deliveries"

/**
 * A key's creation and its revocation notify this channel at commit, so that every instance knows
 * the keys that exist: a revocation with the key's id, a creation with {@link KeyCreated} as JSON.
 */
export const API_KEYS_CHANNEL = "api_keys_revoked"

/** The payload of a key's creation: its id, its hash and when it expires (Unix milliseconds). */
export const KeyCreated = Schema.parseJson(Schema.Struct({
  created: Schema.String,
  key_hash: Schema.String,
  expires_at: Schema.NullOr(Schema.Number)
}))
