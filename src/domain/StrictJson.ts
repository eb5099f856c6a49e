/**
 * Checks on a JSON text that `JSON.parse` does not make: an object that names a key twice (the
 * parser keeps the last silently), a string holding a NUL character, and a number that the parser
 * would round (a double holds about 15 to 17 significant digits; more are dropped silently).
 */

/** The first problem of a JSON text, by field and rule, or `undefined` when it has none (or is no JSON). */
export const problem = (text: string): string | undefined => {
  try {
    JSON.parse(text)
  } catch {
    return undefined
  }
  return problemOfParsed(text)
}

/** {@link problem} of a text `JSON.parse` has just accepted: it is not parsed again. */
export const problemOfParsed = (text: string): string | undefined => new Scanner(text).value([])

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
  // Without an exponent, 15 digits or fewer always come back as sent (a double keeps 15 significant
  // digits in its normal range, which such a token cannot leave): most numbers stop here.
  if (digitsOnly(token) <= 15) return undefined
  const value = Number(token)
  if (!Number.isFinite(value)) return `${fieldName(path)} is too large`
  return normalise(token) === normalise(String(value))
    ? undefined
    : `${fieldName(path)} cannot be represented exactly: send at most 15 significant digits`
}

/** The digits of a number token without an exponent (its sign and point left out); 99 with one. */
const digitsOnly = (token: string): number => {
  let digits = 0
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i)
    if (c >= 48 && c <= 57) digits++
    else if (c !== 45 && c !== 46) return 99
  }
  return digits
}

const TOKEN = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y

const SPACE = 32
const TAB = 9
const LINE_FEED = 10
const RETURN = 13
const QUOTE = 34
const BACKSLASH = 92

/** Deeper nesting is refused rather than followed: no request of the API nests beyond a few levels. */
const MAX_DEPTH = 64

/** A scanner over a text `JSON.parse` accepts: it never meets a syntax error. */
class Scanner {
  private at = 0
  constructor(private readonly text: string) {}

  private skipSpace() {
    for (;;) {
      const c = this.text.charCodeAt(this.at)
      if (c !== SPACE && c !== LINE_FEED && c !== RETURN && c !== TAB) return
      this.at++
    }
  }

  /**
   * Reads the string token at the cursor, returning its value: the text between the quotes, or,
   * when it holds an escape, what `JSON.parse` makes of it (a raw NUL is not valid JSON: only an
   * escaped one can be there).
   */
  private string(): string {
    const start = this.at
    let escaped = false
    this.at++
    for (;;) {
      const c = this.text.charCodeAt(this.at)
      if (c === QUOTE) break
      if (c === BACKSLASH) {
        escaped = true
        this.at += 2
      } else {
        this.at++
      }
    }
    this.at++
    if (!escaped) return this.text.slice(start + 1, this.at - 1)
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
