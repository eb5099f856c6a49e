import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { createContext } from "preact"
import { useContext, useEffect, useRef, useState } from "preact/hooks"
import { IntentEvent } from "../../src/domain/Event.js"
import type { Mode } from "../../src/domain/Ids.js"
import type { Session } from "../../src/domain/Login.js"
import type { Problem } from "./api.js"

const MODE_KEY = "tir.dashboard.mode"

/** The test/live switch as this browser last left it; test mode unless it chose live. */
export const storedMode = (): Mode => {
  try {
    return localStorage.getItem(MODE_KEY) === "live" ? "live" : "test"
  } catch {
    return "test"
  }
}

export const storeMode = (mode: Mode) => {
  try {
    localStorage.setItem(MODE_KEY, mode)
  } catch {
    // storage refused (private mode): the switch still holds for this tab
  }
}

export type StreamStatus = "connecting" | "live" | "reconnecting"

/** What every signed-in page shares. */
export interface App {
  readonly session: Session
  readonly setSession: (session: Session) => void
  readonly mode: Mode
  readonly setMode: (mode: Mode) => void
  /** Says something in the polite live region (saved, copied, revoked, …). */
  readonly announce: (message: string) => void
  /** Signs this browser out. */
  readonly signOut: () => void
  /** The session ended elsewhere (signed out everywhere): back to the sign-in page. */
  readonly sessionEnded: () => void
  readonly subscribe: (f: (event: IntentEvent) => void) => () => void
  readonly streamStatus: StreamStatus
}

export const AppContext = createContext<App | null>(null)

export const useApp = (): App => {
  const app = useContext(AppContext)
  if (app === null) throw new Error("useApp outside a signed-in page")
  return app
}

export type Load<A> =
  | { readonly _tag: "Loading" }
  | { readonly _tag: "Failed"; readonly problem: Problem }
  | { readonly _tag: "Loaded"; readonly value: A }

/**
 * Loads what a page shows, again whenever `deps` change (showing "loading" meanwhile) or `reload`
 * is called (keeping what is shown until the new answer arrives).
 */
export const useLoad = <A>(
  load: () => Promise<Either.Either<A, Problem>>,
  deps: ReadonlyArray<unknown>
): readonly [Load<A>, () => void] => {
  const key = JSON.stringify(deps)
  const [state, setState] = useState<{ readonly key: string; readonly load: Load<A> }>({ key, load: { _tag: "Loading" } })
  const [version, setVersion] = useState(0)
  useEffect(() => {
    let current = true
    load().then((result) => {
      if (!current) return
      setState({
        key,
        load: Either.match(result, {
          onLeft: (problem): Load<A> => ({ _tag: "Failed", problem }),
          onRight: (value): Load<A> => ({ _tag: "Loaded", value })
        })
      })
    })
    return () => {
      current = false
    }
  }, [key, version])
  return [state.key === key ? state.load : { _tag: "Loading" }, () => setVersion((n) => n + 1)]
}

const decodeEvent = Schema.decodeUnknownEither(Schema.parseJson(IntentEvent))

/**
 * The mode's event stream (Server-Sent Events, on the session cookie) for as long as the app is
 * signed in: one connection per tab, shared by the pages through `subscribe`.
 */
export const useEventStream = (mode: Mode, enabled: boolean, onClosed: () => void) => {
  const listeners = useRef(new Set<(event: IntentEvent) => void>())
  const [status, setStatus] = useState<StreamStatus>("connecting")
  const [attempt, setAttempt] = useState(0)
  useEffect(() => {
    if (!enabled) return
    setStatus("connecting")
    const source = new EventSource(`/dashboard/api/v1/events/stream?mode=${mode}`)
    let retry: ReturnType<typeof setTimeout> | undefined
    source.onopen = () => setStatus("live")
    source.onmessage = (message) => {
      const decoded = decodeEvent(message.data)
      if (Either.isRight(decoded)) for (const listener of listeners.current) listener(decoded.right)
    }
    source.onerror = () => {
      setStatus("reconnecting")
      // The browser reconnects by itself unless the answer was not a stream (a 401, a 429, …).
      if (source.readyState === EventSource.CLOSED) {
        onClosed()
        retry = setTimeout(() => setAttempt((n) => n + 1), 5000)
      }
    }
    return () => {
      source.close()
      if (retry !== undefined) clearTimeout(retry)
    }
  }, [mode, enabled, attempt])
  const subscribe = (f: (event: IntentEvent) => void) => {
    listeners.current.add(f)
    return () => {
      listeners.current.delete(f)
    }
  }
  return { status, subscribe }
}

/** Calls `f` with each event of the mode's stream while the page is shown. */
export const useEvents = (f: (event: IntentEvent) => void) => {
  const { subscribe } = useApp()
  const handler = useRef(f)
  handler.current = f
  useEffect(() => subscribe((event) => handler.current(event)), [])
}

/** Reloads at most once per `ms`, however many events arrive together. */
export const useThrottledReload = (reload: () => void, ms = 300) => {
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null)
  useEffect(() => () => {
    if (timer.current !== null) clearTimeout(timer.current)
  }, [])
  return () => {
    if (timer.current !== null) return
    timer.current = setTimeout(() => {
      timer.current = null
      reload()
    }, ms)
  }
}
