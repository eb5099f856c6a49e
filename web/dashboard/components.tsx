import type * as DateTime from "effect/DateTime"
import type { ComponentChildren, JSX } from "preact"
import { useEffect, useId, useRef, useState } from "preact/hooks"
import type { IntentStatus } from "../../src/domain/Intent.js"
import type { Problem } from "./api.js"
import { FormError, SubmitButton, type Submission } from "./forms.js"
import { formatCompact, formatDateTime, humanize, iso } from "./format.js"
import { followLink, href } from "./router.js"
import { type Load, useApp } from "./state.js"

export type Tone = "neutral" | "success" | "warning" | "danger" | "info"

export const Badge = ({ tone, children }: { readonly tone: Tone; readonly children: ComponentChildren }) => (
  <span class={`badge badge-${tone}`}>{children}</span>
)

const statusTones: Record<IntentStatus, Tone> = {
  pending: "info",
  partially_filled: "warning",
  filled: "success",
  canceled: "neutral",
  rejected: "danger",
  failed: "danger"
}

export const IntentStatusBadge = ({ status }: { readonly status: IntentStatus }) => (
  <Badge tone={statusTones[status]}>{humanize(status)}</Badge>
)

/** A moment; `compact` in tables. The exact UTC time is its title. */
export const Time = ({ at, compact = false }: { readonly at: DateTime.Utc | null; readonly compact?: boolean }) =>
  at === null
    ? <span class="muted">—</span>
    : <time dateTime={iso(at)} title={iso(at)}>{compact ? formatCompact(at) : formatDateTime(at)}</time>

/** A link to a page of the dashboard, followed without reloading the app. */
export const Link = (
  { to, children, class: className }: { readonly to: string; readonly children: ComponentChildren; readonly class?: string }
) => (
  <a href={href(to)} class={className} onClick={(event) => followLink(event, to)}>
    {children}
  </a>
)

export const PageHeader = (
  { title, description, actions }: {
    readonly title: string
    readonly description?: ComponentChildren
    readonly actions?: ComponentChildren
  }
) => (
  <header class="page-header">
    <div>
      <h1 id="page-title" tabIndex={-1}>{title}</h1>
      {description !== undefined && <p class="page-description">{description}</p>}
    </div>
    {actions !== undefined && <div class="page-actions">{actions}</div>}
  </header>
)

/** A table that scrolls sideways on narrow screens, reachable by keyboard. */
export const TableScroll = ({ label, children }: { readonly label: string; readonly children: ComponentChildren }) => (
  <div class="table-scroll" role="region" aria-label={label} tabIndex={0}>
    {children}
  </div>
)

/** One entry of a `<dl class="facts">`. */
export const Fact = (
  { label, children, class: className }: {
    readonly label: string
    readonly children: ComponentChildren
    readonly class?: string
  }
) => (
  <div>
    <dt>{label}</dt>
    <dd class={className}>{children}</dd>
  </div>
)

export const Empty = ({ children }: { readonly children: ComponentChildren }) => <div class="empty">{children}</div>

/** A page's data: a loading line, the problem with a retry, or the page. */
export const Loaded = <A,>(
  { load, retry, children }: {
    readonly load: Load<A>
    readonly retry: () => void
    readonly children: (value: A) => ComponentChildren
  }
) => {
  switch (load._tag) {
    case "Loading":
      return <p class="loading" aria-busy="true">Loading…</p>
    case "Failed":
      return (
        <div class="panel panel-danger" role="alert">
          <p>{load.problem.detail}</p>
          <button type="button" class="button" onClick={retry}>Try again</button>
        </div>
      )
    case "Loaded":
      return <>{children(load.value)}</>
  }
}

/**
 * A page's list: loading, the problem with a retry, a note while it is empty, or a table of one row
 * per item (`row` answers the `<tr>`); `actions` adds a last, visually unlabelled column for buttons.
 */
export const ItemsTable = <A,>(
  { load, retry, label, columns, actions = false, empty, row }: {
    readonly load: Load<{ readonly items: ReadonlyArray<A> }>
    readonly retry: () => void
    readonly label: string
    readonly columns: ReadonlyArray<string>
    readonly actions?: boolean
    readonly empty: ComponentChildren
    readonly row: (item: A) => ComponentChildren
  }
) => (
  <Loaded load={load} retry={retry}>
    {({ items }) =>
      items.length === 0
        ? <Empty>{empty}</Empty>
        : (
          <TableScroll label={label}>
            <table class="table table-stack">
              <thead>
                <tr>
                  {columns.map((column) => <th key={column} scope="col">{column}</th>)}
                  {actions && <th scope="col"><span class="sr-only">Actions</span></th>}
                </tr>
              </thead>
              <tbody>{items.map(row)}</tbody>
            </table>
          </TableScroll>
        )}
  </Loaded>
)

/**
 * A modal dialog on the native `<dialog>`: focus moves into it (to the element marked autofocus),
 * stays in it, Escape closes it, and focus returns to what opened it.
 */
export const Dialog = (
  { open, title, onClose, children, class: className }: {
    readonly open: boolean
    readonly title: string
    readonly onClose: () => void
    readonly children: ComponentChildren
    readonly class?: string
  }
) => {
  const ref = useRef<HTMLDialogElement>(null)
  const opener = useRef<Element | null>(null)
  const titleId = useId()
  useEffect(() => {
    const dialog = ref.current
    if (dialog === null) return
    if (open && !dialog.open) {
      opener.current = document.activeElement
      dialog.showModal()
    } else if (!open && dialog.open) {
      dialog.close()
    }
  }, [open])
  const closed = () => {
    onClose()
    const previous = opener.current
    if (previous instanceof HTMLElement && previous.isConnected) previous.focus()
  }
  return (
    <dialog ref={ref} class={`dialog ${className ?? ""}`} aria-labelledby={titleId} onClose={closed}>
      {open && (
        <>
          <h2 id={titleId} class="dialog-title">{title}</h2>
          {children}
        </>
      )}
    </dialog>
  )
}

/**
 * Asks before doing something that cannot be undone. `onConfirm` answers the problem to show in
 * the dialog, or null once done (the dialog then closes).
 */
export const ConfirmDialog = (
  { open, title, children, confirmLabel, cancelLabel = "Cancel", danger = false, onConfirm, onClose }: {
    readonly open: boolean
    readonly title: string
    readonly children: ComponentChildren
    readonly confirmLabel: string
    readonly cancelLabel?: string
    readonly danger?: boolean
    readonly onConfirm: () => Promise<Problem | null>
    readonly onClose: () => void
  }
) => {
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  useEffect(() => {
    if (open) setProblem(null)
  }, [open])
  const confirm = async (event: JSX.TargetedEvent<HTMLFormElement>) => {
    event.preventDefault()
    setBusy(true)
    const result = await onConfirm()
    setBusy(false)
    setProblem(result)
    if (result === null) onClose()
  }
  return (
    <Dialog open={open} title={title} onClose={onClose}>
      <form onSubmit={confirm}>
        <div class="dialog-body">{children}</div>
        <FormError problem={problem} />
        <div class="dialog-actions">
          <button type="button" class="button" onClick={onClose} autoFocus>
            {cancelLabel}
          </button>
          <SubmitButton
            busy={busy}
            label={confirmLabel}
            busyLabel="Working…"
            class={danger ? "button button-danger" : "button button-primary"}
          />
        </div>
      </form>
    </Dialog>
  )
}

/** A form in a modal dialog: its fields, the problem of the last try, Cancel and the submit button. */
export const FormDialog = (
  { open, title, onClose, form, submitLabel, busyLabel, children }: {
    readonly open: boolean
    readonly title: string
    readonly onClose: () => void
    readonly form: Submission
    readonly submitLabel: string
    readonly busyLabel: string
    readonly children: ComponentChildren
  }
) => (
  <Dialog open={open} title={title} onClose={onClose}>
    <form class="form" onSubmit={form.submit}>
      {children}
      <FormError problem={form.problem} />
      <div class="dialog-actions">
        <button type="button" class="button" onClick={onClose}>Cancel</button>
        <SubmitButton busy={form.busy} label={submitLabel} busyLabel={busyLabel} />
      </div>
    </form>
  </Dialog>
)

const copyText = async (text: string, fallback: HTMLInputElement | null): Promise<boolean> => {
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    if (fallback === null) return false
    fallback.select()
    return document.execCommand("copy")
  }
}

/**
 * A secret the API returns once (an API key, a signing secret): shown with a Copy button and the
 * warning that it will not be shown again.
 */
export const SecretPanel = (
  { title, label, value, children, onDone }: {
    readonly title: string
    readonly label: string
    readonly value: string
    readonly children?: ComponentChildren
    readonly onDone: () => void
  }
) => {
  const { announce } = useApp()
  const input = useRef<HTMLInputElement>(null)
  const panel = useRef<HTMLElement>(null)
  const inputId = useId()
  const [copied, setCopied] = useState(false)
  useEffect(() => {
    panel.current?.focus()
  }, [value])
  const copy = async () => {
    const done = await copyText(value, input.current)
    setCopied(done)
    announce(done ? `${label} copied to the clipboard` : "Copy failed: select the text and copy it yourself")
  }
  return (
    <section class="panel panel-secret" ref={panel} tabIndex={-1} aria-labelledby={`${inputId}-title`}>
      <h2 id={`${inputId}-title`} class="panel-title">{title}</h2>
      <p class="secret-notice">
        <strong>Copy it now: you won't see it again.</strong>{" "}
        We keep only what is needed to check it, so it cannot be shown a second time.
      </p>
      {children}
      <label for={inputId} class="label">{label}</label>
      <div class="secret-row">
        <input
          id={inputId}
          ref={input}
          class="input input-mono"
          type="text"
          readOnly
          value={value}
          spellcheck={false}
          autoComplete="off"
          onFocus={(event) => event.currentTarget.select()}
        />
        <button type="button" class="button button-primary" onClick={copy}>
          {copied ? "Copied" : "Copy"}
        </button>
      </div>
      <div class="panel-actions">
        <button type="button" class="button" onClick={onDone}>
          I've saved it
        </button>
      </div>
    </section>
  )
}
