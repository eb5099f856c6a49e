const DECODE_ERROR_REF = "#/components/schemas/HttpApiDecodeError"

const isDecodeErrorRef = (value: unknown) =>
  typeof value === "object" && value !== null && "$ref" in value && value.$ref === DECODE_ERROR_REF

/** A copy of `value` without the decode error: an `anyOf` left with one member becomes that member. */
const withoutDecodeError = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.filter((item) => !isDecodeErrorRef(item)).map(withoutDecodeError)
  if (typeof value !== "object" || value === null) return value
  const entries = Object.entries(value)
    .filter(([key]) => key !== "HttpApiDecodeError")
    .map(([key, item]) => [key, withoutDecodeError(item)] as const)
  const object = Object.fromEntries(entries)
  const anyOf = object["anyOf"]
  if (Array.isArray(anyOf) && anyOf.length === 1 && Object.keys(object).length === 1) return anyOf[0]
  return object
}

/**
 * `HttpApi` declares its own decode error on every endpoint; the server answers those with the
 * `validation_error` body instead, so the document says only that.
 */
export const dropDecodeError = (spec: Record<string, unknown>): Record<string, unknown> => {
  const patched = withoutDecodeError(spec)
  return typeof patched === "object" && patched !== null && !Array.isArray(patched) ? { ...patched } : spec
}
