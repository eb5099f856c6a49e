import type { ComponentChildren } from "preact"
import { useState } from "preact/hooks"
import { MIN_PASSWORD_LENGTH } from "../../../src/domain/Login.js"
import { doneOrProblem, run } from "../api.js"
import { ConfirmDialog, Fact, PageHeader, Time } from "../components.js"
import { FormError, InputField, SubmitButton, type Submission, useSubmit } from "../forms.js"
import { formatCount, humanize } from "../format.js"
import { useApp } from "../state.js"

/** A form in a panel of its own, titled, with its submit button at the end. */
const PanelForm = (
  { id, title, form, submitLabel, busyLabel, children }: {
    readonly id: string
    readonly title: string
    readonly form: Submission
    readonly submitLabel: string
    readonly busyLabel: string
    readonly children: ComponentChildren
  }
) => (
  <form class="panel form" onSubmit={form.submit} aria-labelledby={`${id}-title`}>
    <h2 id={`${id}-title`} class="panel-title">{title}</h2>
    {children}
    <FormError problem={form.problem} />
    <div class="panel-actions">
      <SubmitButton busy={form.busy} label={submitLabel} busyLabel={busyLabel} />
    </div>
  </form>
)

const NameForm = () => {
  const app = useApp()
  const [name, setName] = useState(app.session.user.name)
  const form = useSubmit(
    () => run((client) => client.dashboard.updateAccount({ payload: { name: name.trim() } })),
    (session) => {
      app.setSession(session)
      app.announce("Name saved")
    }
  )
  return (
    <PanelForm id="name" title="Your name" form={form} submitLabel="Save name" busyLabel="Saving…">
      <InputField
        id="account-name"
        label="Name"
        type="text"
        required
        maxLength={200}
        autoComplete="name"
        value={name}
        onValue={setName}
      />
    </PanelForm>
  )
}

const PasswordForm = () => {
  const app = useApp()
  const [current, setCurrent] = useState("")
  const [next, setNext] = useState("")
  const form = useSubmit(
    () => run((client) => client.dashboard.changePassword({ payload: { current_password: current, new_password: next } })),
    (session) => {
      // The answer is a fresh session: its CSRF token is the one to send from now on.
      app.setSession(session)
      setCurrent("")
      setNext("")
      app.announce("Password changed. Every other session has been signed out.")
    }
  )
  return (
    <PanelForm id="password" title="Password" form={form} submitLabel="Change password" busyLabel="Changing…">
      <InputField
        id="current-password"
        label="Current password"
        type="password"
        required
        autoComplete="current-password"
        value={current}
        onValue={setCurrent}
      />
      <InputField
        id="new-password"
        label="New password"
        type="password"
        required
        minLength={MIN_PASSWORD_LENGTH}
        autoComplete="new-password"
        hint={<>At least {MIN_PASSWORD_LENGTH} characters. Your other sessions are signed out when it changes.</>}
        value={next}
        onValue={setNext}
      />
    </PanelForm>
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
          <Fact label="Email">{email}</Fact>
          <Fact label="Plan">{humanize(user.tier)}</Fact>
          <Fact label="Requests per minute">{formatCount(user.requests_per_minute)}</Fact>
          <Fact label="Live intents per month">{formatCount(user.intents_per_month)}</Fact>
          <Fact label="User id" class="mono">{user.id}</Fact>
          <Fact label="Member since">
            <Time at={user.created_at} />
          </Fact>
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
        onConfirm={() => doneOrProblem(run((client) => client.dashboard.logoutEverywhere()), app.sessionEnded)}
      >
        <p>Every session of your account ends, this one included. API keys are not affected.</p>
      </ConfirmDialog>
    </>
  )
}
