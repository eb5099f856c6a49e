import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Redacted from "effect/Redacted"
import { Api } from "./api/Api.js"

/**
 * A typed client derived from the API definition: `client.intents.createIntent(...)`,
 * `client.admin.createUser(...)`, each failing with the endpoint's typed errors. `token` is an API
 * key for the v1 endpoints, or `ADMIN_TOKEN` for the operator API.
 */
export const make = (options: { readonly baseUrl: string; readonly token: string | Redacted.Redacted<string> }) =>
  HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest(
      HttpClientRequest.bearerToken(
        Redacted.isRedacted(options.token) ? Redacted.value(options.token) : options.token
      )
    )
  })
