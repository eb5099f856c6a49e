import * as Either from "effect/Either"
import type { ComponentChildren, JSX } from "preact"
import { useEffect, useState } from "preact/hooks"
import { MIN_PASSWORD_LENGTH, type Session } from "../../../src/domain/Login.js"
import { type Problem, run } from "../api.js"
import { FormError, Link } from "../components.js"

const AuthLayout = ({ title, children }: { readonly title: string; readonly children: ComponentChildren }) => {
  useEffect(() => {
    document.title = `${title} · Trade Intent Router`
  }, [title])
  return (
    <main class="auth" id="main">
      <div class="auth-card">
        <p class="auth-brand">Trade Intent Router</p>
        <h1 id="page-title" tabIndex={-1}>{title}</h1>
        {children}
      </div>
    </main>
  )
}

/** The query of the other page's link: where to go once signed in survives the switch. */
const carry = (next: string | null) => (next === null ? "" : `?next=${encodeURIComponent(next)}`)

export const SignInPage = (
  { next, onSignedIn }: { readonly next: string | null; readonly onSignedIn: (session: Session) => void }
) => {
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  const submit = async (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault()
    setBusy(true)
    setProblem(null)
    const result = await run((client) => client.dashboardLogin.login({ payload: { email, password } }))
    setBusy(false)
    Either.match(result, { onLeft: setProblem, onRight: onSignedIn })
  }
  return (
    <AuthLayout title="Sign in">
      <form class="form" onSubmit={submit}>
        <div class="field">
          <label class="label" for="signin-email">Email</label>
          <input
            id="signin-email"
            class="input"
            type="email"
            autoComplete="username"
            required
            value={email}
            onInput={(event) => setEmail(event.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label class="label" for="signin-password">Password</label>
          <input
            id="signin-password"
            class="input"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onInput={(event) => setPassword(event.currentTarget.value)}
          />
        </div>
        <FormError problem={problem} />
        <button type="submit" class="button button-primary button-block" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
      <p class="auth-switch">
        New here? <Link to={`/signup${carry(next)}`}>Create an account</Link>
      </p>
    </AuthLayout>
  )
}

export const SignUpPage = (
  { next, onSignedUp }: { readonly next: string | null; readonly onSignedUp: (session: Session) => void }
) => {
  const [email, setEmail] = useState("")
  const [name, setName] = useState("")
  const [password, setPassword] = useState("")
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  const submit = async (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault()
    setBusy(true)
    setProblem(null)
    const result = await run((client) => client.dashboardLogin.signup({ payload: { email, name, password } }))
    setBusy(false)
    Either.match(result, { onLeft: setProblem, onRight: onSignedUp })
  }
  return (
    <AuthLayout title="Create your account">
      <form class="form" onSubmit={submit}>
        <div class="field">
          <label class="label" for="signup-email">Email</label>
          <input
            id="signup-email"
            class="input"
            type="email"
            autoComplete="email"
            required
            value={email}
            onInput={(event) => setEmail(event.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label class="label" for="signup-name">Name</label>
          <input
            id="signup-name"
            class="input"
            type="text"
            autoComplete="name"
            required
            maxLength={200}
            value={name}
            onInput={(event) => setName(event.currentTarget.value)}
          />
        </div>
        <div class="field">
          <label class="label" for="signup-password">Password</label>
          <input
            id="signup-password"
            class="input"
            type="password"
            autoComplete="new-password"
            required
            minLength={MIN_PASSWORD_LENGTH}
            aria-describedby="signup-password-hint"
            value={password}
            onInput={(event) => setPassword(event.currentTarget.value)}
          />
          <p class="hint" id="signup-password-hint">At least {MIN_PASSWORD_LENGTH} characters.</p>
        </div>
        <FormError problem={problem} />
        <button type="submit" class="button button-primary button-block" disabled={busy}>
          {busy ? "Creating your account…" : "Create account"}
        </button>
      </form>
      <p class="auth-switch">
        Already have an account? <Link to={`/signin${carry(next)}`}>Sign in</Link>
      </p>
    </AuthLayout>
  )
}
