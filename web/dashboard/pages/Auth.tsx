import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"
import { MIN_PASSWORD_LENGTH, type Session } from "../../../src/domain/Login.js"
import { run } from "../api.js"
import { Link } from "../components.js"
import { FormError, InputField, SubmitButton, type Submission, useSubmit } from "../forms.js"

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

/** The form of either page: its fields, the problem of the last try, and the full-width submit button. */
const AuthForm = (
  { form, submitLabel, busyLabel, children }: {
    readonly form: Submission
    readonly submitLabel: string
    readonly busyLabel: string
    readonly children: ComponentChildren
  }
) => (
  <form class="form" onSubmit={form.submit}>
    {children}
    <FormError problem={form.problem} />
    <SubmitButton
      busy={form.busy}
      label={submitLabel}
      busyLabel={busyLabel}
      class="button button-primary button-block"
    />
  </form>
)

export const SignInPage = (
  { next, onSignedIn }: { readonly next: string | null; readonly onSignedIn: (session: Session) => void }
) => {
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const form = useSubmit(
    () => run((client) => client.dashboardLogin.login({ payload: { email, password } })),
    onSignedIn
  )
  return (
    <AuthLayout title="Sign in">
      <AuthForm form={form} submitLabel="Sign in" busyLabel="Signing in…">
        <InputField
          id="signin-email"
          label="Email"
          type="email"
          autoComplete="username"
          required
          value={email}
          onValue={setEmail}
        />
        <InputField
          id="signin-password"
          label="Password"
          type="password"
          autoComplete="current-password"
          required
          value={password}
          onValue={setPassword}
        />
      </AuthForm>
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
  const form = useSubmit(
    () => run((client) => client.dashboardLogin.signup({ payload: { email, name, password } })),
    onSignedUp
  )
  return (
    <AuthLayout title="Create your account">
      <AuthForm form={form} submitLabel="Create account" busyLabel="Creating your account…">
        <InputField
          id="signup-email"
          label="Email"
          type="email"
          autoComplete="email"
          required
          value={email}
          onValue={setEmail}
        />
        <InputField
          id="signup-name"
          label="Name"
          type="text"
          autoComplete="name"
          required
          maxLength={200}
          value={name}
          onValue={setName}
        />
        <InputField
          id="signup-password"
          label="Password"
          type="password"
          autoComplete="new-password"
          required
          minLength={MIN_PASSWORD_LENGTH}
          hint={<>At least {MIN_PASSWORD_LENGTH} characters.</>}
          value={password}
          onValue={setPassword}
        />
      </AuthForm>
      <p class="auth-switch">
        Already have an account? <Link to={`/signin${carry(next)}`}>Sign in</Link>
      </p>
    </AuthLayout>
  )
}
