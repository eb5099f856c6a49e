/**
 * Checks on a JSON text that `JSON.parse` does not make: an object that names a key twice (the
 * parser keeps the last silently), a string holding a NUL character, and a number that the parser
 * would round (a double holds about 15 to 17 significant digits; more are dropped silently).
 */

/** The first problem of a JSON text, by field and rule, or `undefined` when it has none. */
export const problem = (text: string): string | undefined => {
  try {
    JSON.parse(text)
  } catch {
    return undefined
  }
  return new Scanner(text).value([])
}

/** `123.4500e1` and `1234.5` alike: sign, significant digits without outer zeros, and the exponent of the last digit. */
const normalise = (number: string): string => {
  const match = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(number)
  if (match === null) return number
  const [, sign = "", whole = "", fraction = "", exponent = "0"] = match
  const digits = `${whole}${fraction}`.replace(/^0+/, "")
  if (digits === "") return "0"
  const significant = digits.replace(/0+$/, "")
  const scale = Number(exponent) - fraction.length + (digits.length - significant.length)
  return `${sign}${significant}e${scale}`
}

const fieldName = (path: ReadonlyArray<string | number>) =>
  path.length === 0 ? "Request body" : path.map(String).join(".")

/** The problem of a number token, when `JSON.parse` would not keep it exactly as sent. */
const numberProblem = (token: string, path: ReadonlyArray<string | number>): string | undefined => {
  const value = Number(token)
  if (!Number.isFinite(value)) return `${fieldName(path)} is too large`
  return normalise(token) === normalise(String(value))
    ? undefined
    : `${fieldName(path)} cannot be represented exactly: send at most 15 significant digits`
}

const TOKEN = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y

/** Deeper nesting is refused rather than followed: no request of the API nests beyond a few levels. */
const MAX_DEPTH = 64

/** A scanner over a text `JSON.parse` accepts: it never meets a syntax error. */
class Scanner {
  private at = 0
  constructor(private readonly text: string) {}

  private skipSpace() {
    while (this.at < this.text.length && " \t\n\r".includes(this.text.charAt(this.at))) this.at++
  }

  /** Reads the string token at the cursor, returning its value. */
  private string(): string {
    const start = this.at
    this.at++
    while (this.text.charAt(this.at) !== "\"") this.at += this.text.charAt(this.at) === "\\" ? 2 : 1
    this.at++
    const value: unknown = JSON.parse(this.text.slice(start, this.at))
    return typeof value === "string" ? value : ""
  }

  /** Checks the value at the cursor and moves past it. */
  value(path: ReadonlyArray<string | number>): string | undefined {
    if (path.length > MAX_DEPTH) return `Request body must not nest deeper than ${MAX_DEPTH} levels`
    this.skipSpace()
    const c = this.text.charAt(this.at)
    if (c === "{") return this.object(path)
    if (c === "[") return this.array(path)
    if (c === "\"") {
      return this.string().includes("\u0000") ? `${fieldName(path)} must not contain a NUL character` : undefined
    }
    TOKEN.lastIndex = this.at
    const token = TOKEN.exec(this.text)?.[0] ?? ""
    this.at += token.length
    return /^[a-z]/.test(token) ? undefined : numberProblem(token, path)
  }

  private object(path: ReadonlyArray<string | number>): string | undefined {
    this.at++
    const seen = new Set<string>()
    this.skipSpace()
    if (this.text.charAt(this.at) === "}") {
      this.at++
      return undefined
    }
    for (;;) {
      this.skipSpace()
      const key = this.string()
      const field = [...path, key]
      if (key.includes("\u0000")) return `${fieldName(path)} has a key with a NUL character`
      if (seen.has(key)) return `${fieldName(field)} is given more than once`
      seen.add(key)
      this.skipSpace()
      this.at++ // the colon
      const found = this.value(field)
      if (found !== undefined) return found
      this.skipSpace()
      if (this.text.charAt(this.at++) === "}") return undefined
    }
  }

  private array(path: ReadonlyArray<string | number>): string | undefined {
    this.at++
    this.skipSpace()
    if (this.text.charAt(this.at) === "]") {
      this.at++
      return undefined
    }
    for (let index = 0;; index++) {
      const found = this.value([...path, index])
      if (found !== undefined) return found
      this.skipSpace()
      if (this.text.charAt(this.at++) === "]") return undefined
    }
  }
}
