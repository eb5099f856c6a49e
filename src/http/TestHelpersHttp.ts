import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { Api } from "../api/Api.js"
import { CurrentPrincipal, type Principal } from "../api/Security.js"
import { Forbidden } from "../domain/Auth.js"
import { MockPriceList } from "../domain/MockPrice.js"
import { MockMarket } from "../services/brokers/mock/MockMarket.js"

/** A test key's user: the helpers act on the mock broker, which only test mode reaches. */
const testUser = Effect.flatMap(
  CurrentPrincipal,
  (principal: Principal) => principal.mode === "test" ? Effect.succeed(principal.user.id) : Effect.fail(new Forbidden())
)

export const TestHelpersHttpLive = HttpApiBuilder.group(Api, "testHelpers", (handlers) =>
  Effect.gen(function*() {
    const market = yield* MockMarket
    return handlers
      .handle("setMockPrice", ({ payload }) => Effect.flatMap(testUser, (userId) => market.setPrice(userId, payload)))
      .handle("listMockPrices", () =>
        Effect.flatMap(testUser, (userId) => Effect.map(market.prices(userId), (items) => new MockPriceList({ items }))))
  }))
