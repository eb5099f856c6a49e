import * as Either from "effect/Either"
import type { ComponentChildren, JSX } from "preact"
import { useState } from "preact/hooks"
import type { Problem } from "./api.js"

/** The API's `detail` next to the form that caused it; announced at once to screen readers. */
export const FormError = ({ problem }: { readonly problem: Problem | null }) =>
  problem === null ? null : (
    <p class="form-error" role="alert">
      {problem.detail}
    </p>
  )

/** A form's state while it is sent: busy until the call answers, then the problem to show if any. */
export interface Submission {
  readonly busy: boolean
  readonly problem: Problem | null
  readonly submit: (event: JSX.TargetedEvent<HTMLFormElement>) => Promise<void>
}

/**
 * Sends a form: `send` answers the call, or the problem that keeps the form from being sent (shown
 * without calling); `onDone` gets the call's value once it succeeds.
 */
export const useSubmit = <A,>(
  send: () => Promise<Either.Either<A, Problem>> | Problem,
  onDone: (value: A) => void
): Submission => {
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  const submit = async (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault()
    const sent = send()
    if (!(sent instanceof Promise)) {
      setProblem(sent)
      return
    }
    setBusy(true)
    setProblem(null)
    const result = await sent
    setBusy(false)
    Either.match(result, { onLeft: setProblem, onRight: onDone })
  }
  return { busy, problem, submit }
}

export const SubmitButton = (
  { busy, label, busyLabel, class: className = "button button-primary" }: {
    readonly busy: boolean
    readonly label: ComponentChildren
    readonly busyLabel: string
    readonly class?: string
  }
) => (
  <button type="submit" class={className} disabled={busy}>
    {busy ? busyLabel : label}
  </button>
)

/** A labelled control; its hint, if any, has the id `${id}-hint` for the control to be described by. */
export const Field = (
  { id, label, hint, children }: {
    readonly id: string
    readonly label: string
    readonly hint?: ComponentChildren
    readonly children: ComponentChildren
  }
) => (
  <div class="field">
    <label class="label" for={id}>{label}</label>
    {children}
    {hint !== undefined && <p class="hint" id={`${id}-hint`}>{hint}</p>}
  </div>
)

/** A labelled text-like input (text, email, password, url, date) holding a string of the caller's state. */
export const InputField = (
  { id, label, hint, mono = false, value, onValue, ...attributes }:
    & {
      readonly id: string
      readonly label: string
      readonly hint?: ComponentChildren
      readonly mono?: boolean
      readonly value: string
      readonly onValue: (value: string) => void
    }
    & Omit<JSX.InputHTMLAttributes<HTMLInputElement>, "id" | "class" | "value" | "onInput" | "aria-describedby">
) => (
  <Field id={id} label={label} hint={hint}>
    <input
      id={id}
      class={mono ? "input input-mono" : "input"}
      aria-describedby={hint === undefined ? undefined : `${id}-hint`}
      value={value}
      onInput={(event) => onValue(event.currentTarget.value)}
      {...attributes}
    />
  </Field>
)
