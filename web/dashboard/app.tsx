import * as Either from "effect/Either"
import type { ComponentChildren } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import type { Mode } from "../../src/domain/Ids.js"
import type { Session } from "../../src/domain/Login.js"
import { run, setCsrfToken, whenSessionLost } from "./api.js"
import { Link } from "./components.js"
import { ApiKeysPage } from "./pages/ApiKeys.js"
import { SignInPage, SignUpPage } from "./pages/Auth.js"
import { BrokersPage } from "./pages/Brokers.js"
import { IntentPage, IntentsPage } from "./pages/Intents.js"
import { NotFoundPage } from "./pages/NotFound.js"
import { OverviewPage } from "./pages/Overview.js"
import { SettingsPage } from "./pages/Settings.js"
import { WebhookEndpointPage, WebhooksPage } from "./pages/Webhooks.js"
import { type Location, navigate, useLocation } from "./router.js"
import { type App, AppContext, storedMode, storeMode, type StreamStatus, useEventStream } from "./state.js"

type Auth =
  | { readonly _tag: "Checking" }
  | { readonly _tag: "SignedOut" }
  | { readonly _tag: "SignedIn"; readonly session: Session }

const nav: ReadonlyArray<{ readonly to: string; readonly label: string }> = [
  { to: "/", label: "Overview" },
  { to: "/intents", label: "Intents" },
  { to: "/api-keys", label: "API keys" },
  { to: "/brokers", label: "Broker connections" },
  { to: "/webhooks", label: "Webhooks" },
  { to: "/settings", label: "Settings" }
]

const isPublic = (path: string) => path === "/signin" || path === "/signup"

const sectionOf = (path: string) => nav.find((item) => item.to !== "/" && path.startsWith(item.to))?.to ?? "/"

const page = (location: Location) => {
  const segments = location.path.split("/").filter((segment) => segment !== "")
  const [section, id, ...rest] = segments
  if (rest.length > 0) return <NotFoundPage />
  switch (section) {
    case undefined:
      return <OverviewPage />
    case "api-keys":
      return id === undefined ? <ApiKeysPage /> : <NotFoundPage />
    case "brokers":
      return id === undefined ? <BrokersPage /> : <NotFoundPage />
    case "webhooks":
      return id === undefined ? <WebhooksPage /> : <WebhookEndpointPage id={id} />
    case "intents":
      return id === undefined ? <IntentsPage query={location.query} /> : <IntentPage id={id} />
    case "settings":
      return id === undefined ? <SettingsPage /> : <NotFoundPage />
    default:
      return <NotFoundPage />
  }
}

/** Only a path of the dashboard itself, never another site. */
const safeNext = (next: string | null) => next !== null && next.startsWith("/") && !next.startsWith("//") ? next : "/"

const Redirect = ({ to }: { readonly to: string }) => {
  useEffect(() => navigate(to, { replace: true }), [to])
  return null
}

const Logo = () => (
  <svg class="logo" viewBox="0 0 32 32" aria-hidden="true" focusable="false">
    <rect width="32" height="32" rx="7" class="logo-bg" />
    <path d="M7 21l6-6 4 4 8-9" class="logo-line" />
    <circle cx="25" cy="10" r="2" class="logo-dot" />
  </svg>
)

const streamLabels: Record<StreamStatus, string> = {
  connecting: "Connecting…",
  live: "Real-time updates on",
  reconnecting: "Reconnecting…"
}

const Shell = (
  { app, location, children }: { readonly app: App; readonly location: Location; readonly children: ComponentChildren }
) => {
  const [menuOpen, setMenuOpen] = useState(false)
  const current = sectionOf(location.path)
  useEffect(() => setMenuOpen(false), [location.path])
  return (
    <div class={`app mode-${app.mode}`}>
      <a class="skip-link" href="#main">Skip to content</a>
      {app.mode === "test" && (
        <div class="test-banner" role="note">
          <span class="test-banner-label">Test mode</span>
          <span>You are viewing test data: intents go to the mock broker and nothing is traded.</span>
        </div>
      )}
      <div class="layout">
        <aside class="sidebar">
          <div class="sidebar-top">
            <Link to="/" class="brand">
              <Logo />
              <span>Trade Intent Router</span>
            </Link>
            <button
              type="button"
              class="button menu-toggle"
              aria-expanded={menuOpen}
              aria-controls="main-nav"
              onClick={() => setMenuOpen(!menuOpen)}
            >
              Menu
            </button>
          </div>
          <nav id="main-nav" class={menuOpen ? "nav nav-open" : "nav"} aria-label="Main">
            <ul>
              {nav.map((item) => (
                <li key={item.to}>
                  <a
                    href={`/dashboard${item.to}`}
                    class="nav-link"
                    aria-current={current === item.to ? "page" : undefined}
                    onClick={(event) => {
                      if (event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey) {
                        event.preventDefault()
                        navigate(item.to)
                      }
                    }}
                  >
                    {item.label}
                  </a>
                </li>
              ))}
            </ul>
            <div class="nav-account">
              <span class="nav-email" title={app.session.email}>{app.session.email}</span>
              <button type="button" class="button button-small" onClick={app.signOut}>Sign out</button>
            </div>
          </nav>
        </aside>
        <div class="main-column">
          <div class="topbar">
            <span class="stream-status" data-status={app.streamStatus} title="Pages update as your intents change">
              <span class="stream-dot" aria-hidden="true" />
              {streamLabels[app.streamStatus]}
            </span>
            <button
              type="button"
              role="switch"
              class="mode-switch"
              aria-checked={app.mode === "test"}
              onClick={() => app.setMode(app.mode === "test" ? "live" : "test")}
            >
              <span class="mode-switch-track" aria-hidden="true">
                <span class="mode-switch-thumb" />
              </span>
              <span class="mode-switch-label">Test mode</span>
            </button>
          </div>
          <main id="main" tabIndex={-1}>
            {children}
          </main>
        </div>
      </div>
    </div>
  )
}

export const Root = () => {
  const location = useLocation()
  const [auth, setAuth] = useState<Auth>({ _tag: "Checking" })
  const [mode, setModeState] = useState<Mode>(storedMode)
  const [message, setMessage] = useState<{ readonly text: string; readonly n: number } | null>(null)
  const messages = useRef(0)

  const setSession = (session: Session) => {
    setCsrfToken(session.csrf_token)
    setAuth({ _tag: "SignedIn", session })
  }
  const signedOut = () => {
    setCsrfToken("")
    setAuth({ _tag: "SignedOut" })
  }

  useEffect(() => {
    whenSessionLost(() => {
      signedOut()
      const here = `${window.location.pathname}${window.location.search}`.replace(/^\/dashboard/, "")
      if (!isPublic(here.split("?")[0] ?? "")) navigate(`/signin?next=${encodeURIComponent(here)}`, { replace: true })
    })
    run((client) => client.dashboard.session()).then(
      Either.match({ onLeft: signedOut, onRight: setSession })
    )
  }, [])

  const stream = useEventStream(mode, auth._tag === "SignedIn", () => {
    // A stream refused outright may mean the session ended: asking sends the browser to sign in if so.
    run((client) => client.dashboard.session())
  })

  // Each page's title names the page; after a navigation, focus moves to the new page's heading
  // (or its main region while it loads) so that a screen reader starts there.
  const navigated = useRef(false)
  useEffect(() => {
    document.title = `${document.getElementById("page-title")?.textContent ?? "Dashboard"} · Trade Intent Router`
  })
  useEffect(() => {
    if (!navigated.current) {
      navigated.current = true
      return
    }
    const target = document.getElementById("page-title") ?? document.getElementById("main")
    target?.focus({ preventScroll: true })
    window.scrollTo(0, 0)
  }, [location.path])

  useEffect(() => {
    if (message === null) return
    const timer = setTimeout(() => setMessage(null), 5000)
    return () => clearTimeout(timer)
  }, [message])

  const announce = (text: string) => {
    messages.current += 1
    setMessage({ text, n: messages.current })
  }

  const status = (
    <div class="toast-region" role="status" aria-live="polite">
      {message !== null && <div class="toast" key={message.n}>{message.text}</div>}
    </div>
  )

  if (isPublic(location.path)) {
    if (auth._tag === "SignedIn") return <Redirect to={safeNext(location.query.get("next"))} />
    const after = (session: Session) => {
      setSession(session)
      navigate(safeNext(location.query.get("next")), { replace: true })
    }
    return (
      <>
        {location.path === "/signin"
          ? <SignInPage next={location.query.get("next")} onSignedIn={after} />
          : <SignUpPage next={location.query.get("next")} onSignedUp={after} />}
        {status}
      </>
    )
  }

  switch (auth._tag) {
    case "Checking":
      return <p class="loading splash" aria-busy="true">Loading…</p>
    case "SignedOut": {
      const query = location.query.toString()
      const here = `${location.path}${query === "" ? "" : `?${query}`}`
      return <Redirect to={`/signin?next=${encodeURIComponent(here)}`} />
    }
    case "SignedIn": {
      const app: App = {
        session: auth.session,
        setSession,
        mode,
        setMode: (next) => {
          storeMode(next)
          setModeState(next)
          announce(next === "test" ? "Switched to test mode: showing test data" : "Switched to live mode: showing live data")
        },
        announce,
        signOut: () => {
          run((client) => client.dashboard.logout()).then(() => {
            signedOut()
            navigate("/signin", { replace: true })
          })
        },
        sessionEnded: () => {
          signedOut()
          navigate("/signin", { replace: true })
        },
        subscribe: stream.subscribe,
        streamStatus: stream.status
      }
      return (
        <AppContext.Provider value={app}>
          <Shell app={app} location={location}>
            {page(location)}
          </Shell>
          {status}
        </AppContext.Provider>
      )
    }
  }
}
