import { useEffect, useState } from "preact/hooks"

/** Every page lives under this path; the server answers index.html for any of them. */
export const BASE = "/dashboard"

export interface Location {
  /** The path after `/dashboard`, always starting with `/`. */
  readonly path: string
  readonly query: URLSearchParams
}

const NAVIGATED = "dashboard:navigated"

const current = (): Location => {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : "/"
  return { path: path === "" ? "/" : path, query: new URLSearchParams(location.search) }
}

/** Goes to a page of the dashboard (`to` is relative to `/dashboard`, query included). */
export const navigate = (to: string, options: { readonly replace?: boolean } = {}) => {
  const url = `${BASE}${to}`
  if (options.replace === true) history.replaceState(null, "", url)
  else history.pushState(null, "", url)
  window.dispatchEvent(new Event(NAVIGATED))
}

export const href = (to: string) => `${BASE}${to}`

/** The current page, updated on navigation and on the browser's back and forward buttons. */
export const useLocation = (): Location => {
  const [location, setLocation] = useState(current)
  useEffect(() => {
    const update = () => setLocation(current())
    window.addEventListener("popstate", update)
    window.addEventListener(NAVIGATED, update)
    return () => {
      window.removeEventListener("popstate", update)
      window.removeEventListener(NAVIGATED, update)
    }
  }, [])
  return location
}

/** A link's click, handled in the page unless the user asked for a new tab or window. */
export const followLink = (event: MouseEvent, to: string) => {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
    return
  }
  event.preventDefault()
  navigate(to)
}
