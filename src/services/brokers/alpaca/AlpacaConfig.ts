import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import type { BrokerEnvironment } from "../../../domain/Account.js"

/** Where one Alpaca environment is reached: its REST API and its `trade_updates` stream. */
export interface Endpoints {
  readonly api: string
  readonly stream: string
}

export interface AlpacaOptions {
  /** Set by the deployment, never by a user. */
  readonly endpoints: Readonly<Record<BrokerEnvironment, Endpoints>>
  /** How long one REST call may take; 10 seconds unless set. */
  readonly timeout?: Duration.DurationInput | undefined
}

/** Alpaca's own endpoints. */
export const defaults: AlpacaOptions = {
  endpoints: {
    paper: { api: "https://paper-api.alpaca.markets", stream: "wss://paper-api.alpaca.markets/stream" },
    live: { api: "https://api.alpaca.markets", stream: "wss://api.alpaca.markets/stream" }
  }
}

const url = (name: string, fallback: string) => Config.withDefault(Config.string(name), fallback)

/** `ALPACA_PAPER_API_URL`, `ALPACA_LIVE_API_URL`, `ALPACA_PAPER_STREAM_URL`, `ALPACA_LIVE_STREAM_URL`. */
export const config: Config.Config<AlpacaOptions> = Config.all({
  endpoints: Config.all({
    paper: Config.all({
      api: url("ALPACA_PAPER_API_URL", defaults.endpoints.paper.api),
      stream: url("ALPACA_PAPER_STREAM_URL", defaults.endpoints.paper.stream)
    }),
    live: Config.all({
      api: url("ALPACA_LIVE_API_URL", defaults.endpoints.live.api),
      stream: url("ALPACA_LIVE_STREAM_URL", defaults.endpoints.live.stream)
    })
  })
})
