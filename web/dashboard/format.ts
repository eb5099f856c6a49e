import * as DateTime from "effect/DateTime"

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" })
const thisYear = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "numeric", minute: "2-digit" })
const otherYear = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric", hour: "numeric", minute: "2-digit" })
const amount = new Intl.NumberFormat(undefined, { maximumFractionDigits: 9 })
const whole = new Intl.NumberFormat(undefined)

export const iso = (at: DateTime.Utc) => DateTime.formatIso(at)

/** A moment in the reader's time zone; the exact UTC time is the `<time>` element's title. */
export const formatDateTime = (at: DateTime.Utc) => dateTime.format(DateTime.toDateUtc(at))

/** A moment in a table cell: the year only when it is not this one. */
export const formatCompact = (at: DateTime.Utc) => {
  const date = DateTime.toDateUtc(at)
  return (date.getFullYear() === new Date().getFullYear() ? thisYear : otherYear).format(date)
}

/** A quantity or price as the intent holds it, up to its 9 decimal places. */
export const formatAmount = (n: number) => amount.format(n)

export const formatCount = (n: number) => whole.format(n)

/** `partially_filled` as "Partially filled". */
export const humanize = (text: string) => {
  const words = text.replaceAll("_", " ")
  return words.charAt(0).toUpperCase() + words.slice(1)
}
