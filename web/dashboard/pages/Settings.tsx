import * as Either from "effect/Either"
import type { JSX } from "preact"
import { useState } from "preact/hooks"
import { MIN_PASSWORD_LENGTH } from "../../../src/domain/Login.js"
import { type Problem, run } from "../api.js"
import { ConfirmDialog, FormError, PageHeader, Time } from "../components.js"
import { formatCount, humanize } from "../format.js"
import { useApp } from "../state.js"

const NameForm = () => {
  const app = useApp()
  const [name, setName] = useState(app.session.user.name)
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  const submit = async (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault()
    setBusy(true)
    setProblem(null)
    const result = await run((client) => client.dashboard.updateAccount({ payload: { name: name.trim() } }))
    setBusy(false)
    Either.match(result, {
      onLeft: setProblem,
      onRight: (session) => {
        app.setSession(session)
        app.announce("Name saved")
      }
    })
  }
  return (
    <form class="panel form" onSubmit={submit} aria-labelledby="name-title">
      <h2 id="name-title" class="panel-title">Your name</h2>
      <div class="field">
        <label class="label" for="account-name">Name</label>
        <input
          id="account-name"
          class="input"
          type="text"
          required
          maxLength={200}
          autoComplete="name"
          value={name}
          onInput={(event) => setName(event.currentTarget.value)}
        />
      </div>
      <FormError problem={problem} />
      <div class="panel-actions">
        <button type="submit" class="button button-primary" disabled={busy}>
          {busy ? "Saving…" : "Save name"}
        </button>
      </div>
    </form>
  )
}

const PasswordForm = () => {
  const app = useApp()
  const [current, setCurrent] = useState("")
  const [next, setNext] = useState("")
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  const submit = async (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault()
    setBusy(true)
    setProblem(null)
    const result = await run((client) =>
      client.dashboard.changePassword({ payload: { current_password: current, new_password: next } })
    )
    setBusy(false)
    Either.match(result, {
      onLeft: setProblem,
      onRight: (session) => {
        // The answer is a fresh session: its CSRF token is the one to send from now on.
        app.setSession(session)
        setCurrent("")
        setNext("")
        app.announce("Password changed. Every other session has been signed out.")
      }
    })
  }
  return (
    <form class="panel form" onSubmit={submit} aria-labelledby="password-title">
      <h2 id="password-title" class="panel-title">Password</h2>
      <div class="field">
        <label class="label" for="current-password">Current password</label>
        <input
          id="current-password"
          class="input"
          type="password"
          required
          autoComplete="current-password"
          value={current}
          onInput={(event) => setCurrent(event.currentTarget.value)}
        />
      </div>
      <div class="field">
        <label class="label" for="new-password">New password</label>
        <input
          id="new-password"
          class="input"
          type="password"
          required
          minLength={MIN_PASSWORD_LENGTH}
          autoComplete="new-password"
          aria-describedby="new-password-hint"
          value={next}
          onInput={(event) => setNext(event.currentTarget.value)}
        />
        <p class="hint" id="new-password-hint">
          At least {MIN_PASSWORD_LENGTH} characters. Your other sessions are signed out when it changes.
        </p>
      </div>
      <FormError problem={problem} />
      <div class="panel-actions">
        <button type="submit" class="button button-primary" disabled={busy}>
          {busy ? "Changing…" : "Change password"}
        </button>
      </div>
    </form>
  )
}

export const SettingsPage = () => {
  const app = useApp()
  const { user, email } = app.session
  const [confirming, setConfirming] = useState(false)
  return (
    <>
      <PageHeader title="Account settings" description="Your profile, your password and your sessions." />
      <section class="panel" aria-labelledby="account-title">
        <h2 id="account-title" class="panel-title">Account</h2>
        <dl class="facts">
          <div>
            <dt>Email</dt>
            <dd>{email}</dd>
          </div>
          <div>
            <dt>Plan</dt>
            <dd>{humanize(user.tier)}</dd>
          </div>
          <div>
            <dt>Requests per minute</dt>
            <dd>{formatCount(user.requests_per_minute)}</dd>
          </div>
          <div>
            <dt>Live intents per month</dt>
            <dd>{formatCount(user.intents_per_month)}</dd>
          </div>
          <div>
            <dt>User id</dt>
            <dd class="mono">{user.id}</dd>
          </div>
          <div>
            <dt>Member since</dt>
            <dd>
              <Time at={user.created_at} />
            </dd>
          </div>
        </dl>
      </section>
      <div class="panels">
        <NameForm />
        <PasswordForm />
      </div>
      <section class="panel" aria-labelledby="sessions-title">
        <h2 id="sessions-title" class="panel-title">Sessions</h2>
        <p>Signed in on a computer you no longer use? Sign out of every browser at once, this one included.</p>
        <div class="panel-actions">
          <button type="button" class="button button-danger-outline" onClick={() => setConfirming(true)}>
            Sign out everywhere
          </button>
        </div>
      </section>
      <ConfirmDialog
        open={confirming}
        title="Sign out everywhere?"
        confirmLabel="Sign out everywhere"
        danger
        onClose={() => setConfirming(false)}
        onConfirm={async () => {
          const result = await run((client) => client.dashboard.logoutEverywhere())
          if (Either.isLeft(result)) return result.left
          app.sessionEnded()
          return null
        }}
      >
        <p>Every session of your account ends, this one included. API keys are not affected.</p>
      </ConfirmDialog>
    </>
  )
}
