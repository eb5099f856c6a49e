import * as Schema from "effect/Schema"
import { detail, WireErrors } from "./Errors.js"

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  detail: detail(WireErrors.Unauthorized)
}) {}

export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", {
  detail: detail(WireErrors.Forbidden)
}) {}

export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  retry_after: Schema.Int,
  detail: Schema.String
}) {
  static of(retryAfter: number) {
    return new RateLimited({
      retry_after: retryAfter,
      detail: `Rate limit exceeded. Retry after ${retryAfter} seconds.`
    })
  }
}

/** Too many failed authentications from one address: keys cannot be guessed at speed. */
export const tooManyFailures = (retryAfter: number) =>
  new RateLimited({
    retry_after: retryAfter,
    detail: `Too many failed authentication attempts. Retry after ${retryAfter} seconds.`
  })

export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded", {
  retry_after: Schema.Int,
  detail: detail(WireErrors.QuotaExceeded)
}) {}
