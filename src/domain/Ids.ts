import * as Schema from "effect/Schema"

/** Internal identifier of a Trade Intent. */
export const IntentId = Schema.UUID.pipe(Schema.brand("IntentId"))
export type IntentId = typeof IntentId.Type

export const UserId = Schema.UUID.pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type

export const ApiKeyId = Schema.UUID.pipe(Schema.brand("ApiKeyId"))
export type ApiKeyId = typeof ApiKeyId.Type

/** The id of a broker connection: the `broker_id` of an intent. */
export const BrokerId = Schema.UUID.pipe(Schema.brand("BrokerId"))
export type BrokerId = typeof BrokerId.Type

export const OrderId = Schema.UUID.pipe(Schema.brand("OrderId"))
export type OrderId = typeof OrderId.Type

/** Test data and live data never mix: every key, connection and intent has a mode. */
export const Mode = Schema.Literal("test", "live")
export type Mode = typeof Mode.Type

/** Whose data a request may see: one user, in one mode. */
export interface Owner {
  readonly userId: UserId
  readonly mode: Mode
}

export const WebhookEndpointId = Schema.UUID.pipe(Schema.brand("WebhookEndpointId"))
export type WebhookEndpointId = typeof WebhookEndpointId.Type

export const DeliveryId = Schema.UUID.pipe(Schema.brand("DeliveryId"))
export type DeliveryId = typeof DeliveryId.Type
