import * as DateTime from "effect/DateTime"
import { useState } from "preact/hooks"
import type { ApiKeyView, CreatedApiKey } from "../../../src/api/AdminApi.js"
import type { ApiKeyScope } from "../../../src/domain/Account.js"
import { doneOrProblem, run } from "../api.js"
import { Badge, ConfirmDialog, FormDialog, ItemsTable, PageHeader, SecretPanel, Time } from "../components.js"
import { InputField, useSubmit } from "../forms.js"
import { useApp, useLoad } from "../state.js"

const scopeLabels: Record<ApiKeyScope, string> = {
  "intents:read": "Read intents and events",
  "intents:write": "Create and cancel intents"
}

const statusOf = (key: ApiKeyView) =>
  key.revoked_at !== null
    ? <Badge tone="neutral">Revoked</Badge>
    : key.expires_at !== null && DateTime.lessThan(key.expires_at, DateTime.unsafeNow())
    ? <Badge tone="warning">Expired</Badge>
    : <Badge tone="success">Active</Badge>

const tomorrow = () => DateTime.formatIsoDateUtc(DateTime.add(DateTime.unsafeNow(), { days: 1 }))

const GenerateKeyDialog = (
  { open, onClose, onCreated }: {
    readonly open: boolean
    readonly onClose: () => void
    readonly onCreated: (key: CreatedApiKey) => void
  }
) => {
  const { mode } = useApp()
  const [name, setName] = useState("")
  const [scopes, setScopes] = useState<ReadonlyArray<ApiKeyScope>>(["intents:read", "intents:write"])
  const [expires, setExpires] = useState("")
  const toggle = (scope: ApiKeyScope, on: boolean) =>
    setScopes(on ? [...scopes.filter((s) => s !== scope), scope].sort() : scopes.filter((s) => s !== scope))
  const form = useSubmit(
    () =>
      scopes.length === 0
        ? { tag: "Form", detail: "Choose at least one permission." }
        : run((client) =>
          client.dashboard.createApiKey({
            payload: {
              name: name.trim(),
              mode,
              scopes,
              ...(expires === "" ? {} : { expires_at: DateTime.unsafeMake(`${expires}T23:59:59.999Z`) })
            }
          })
        ),
    (key) => {
      setName("")
      setExpires("")
      setScopes(["intents:read", "intents:write"])
      onCreated(key)
    }
  )
  return (
    <FormDialog
      open={open}
      title={`Generate a ${mode} API key`}
      onClose={onClose}
      form={form}
      submitLabel="Generate key"
      busyLabel="Generating…"
    >
      <InputField
        id="key-name"
        label="Name"
        type="text"
        required
        maxLength={200}
        autoFocus
        hint="What will use it, e.g. “Rebalancing bot (staging)”."
        value={name}
        onValue={setName}
      />
      <fieldset class="fieldset">
        <legend class="label">Permissions</legend>
        {(["intents:read", "intents:write"] as const).map((scope) => (
          <label class="check" key={scope}>
            <input
              type="checkbox"
              checked={scopes.includes(scope)}
              onChange={(event) => toggle(scope, event.currentTarget.checked)}
            />
            <span>
              {scopeLabels[scope]} <code>{scope}</code>
            </span>
          </label>
        ))}
      </fieldset>
      <InputField
        id="key-expires"
        label="Expires on (optional)"
        type="date"
        min={tomorrow()}
        hint="At the end of that day (UTC). Leave empty for a key that does not expire."
        value={expires}
        onValue={setExpires}
      />
    </FormDialog>
  )
}

export const ApiKeysPage = () => {
  const app = useApp()
  const { mode } = app
  const [keys, reload] = useLoad(() => run((client) => client.dashboard.listApiKeys({ urlParams: { mode } })), [mode])
  const [generating, setGenerating] = useState(false)
  const [created, setCreated] = useState<CreatedApiKey | null>(null)
  const [revoking, setRevoking] = useState<ApiKeyView | null>(null)
  return (
    <>
      <PageHeader
        title="API keys"
        description={
          mode === "test"
            ? "Test keys (sk_test_…) reach only the mock broker and see only test data."
            : "Live keys (sk_live_…) place real orders through your live broker connections. Keep them secret."
        }
        actions={
          <button type="button" class="button button-primary" onClick={() => setGenerating(true)}>
            Generate {mode} key
          </button>
        }
      />
      {created !== null && created.mode === mode && (
        <SecretPanel
          title={`Your new ${created.mode} key “${created.name}”`}
          label="New API key"
          value={created.key}
          onDone={() => setCreated(null)}
        />
      )}
      <ItemsTable
        load={keys}
        retry={reload}
        label="API keys"
        columns={["Name", "Status", "Mode", "Key", "Permissions", "Created", "Last used", "Expires"]}
        actions
        empty={<>No {mode} keys yet. Generate one to call the API.</>}
        row={(key) => (
          <tr key={key.id} data-key={key.id} class={key.revoked_at !== null ? "row-muted" : undefined}>
            <td data-label="Name" class="strong">{key.name}</td>
            <td data-label="Status">{statusOf(key)}</td>
            <td data-label="Mode">
              <Badge tone={key.mode === "test" ? "warning" : "info"}>{key.mode === "test" ? "Test" : "Live"}</Badge>
            </td>
            <td data-label="Key" class="mono">{key.key_hint}</td>
            <td data-label="Permissions">
              <ul class="chips">
                {key.scopes.map((scope) => <li key={scope} class="chip">{scope}</li>)}
              </ul>
            </td>
            <td data-label="Created">
              <Time at={key.created_at} compact />
            </td>
            <td data-label="Last used">{key.last_used_at === null ? <span class="muted">Never</span> : <Time at={key.last_used_at} compact />}</td>
            <td data-label="Expires">{key.expires_at === null ? <span class="muted">Never</span> : <Time at={key.expires_at} compact />}</td>
            <td class="actions">
              {key.revoked_at === null && (
                <button
                  type="button"
                  class="button button-small button-danger-outline"
                  aria-label={`Revoke key ${key.name}`}
                  onClick={() => setRevoking(key)}
                >
                  Revoke
                </button>
              )}
            </td>
          </tr>
        )}
      />
      <GenerateKeyDialog
        open={generating}
        onClose={() => setGenerating(false)}
        onCreated={(key) => {
          setGenerating(false)
          setCreated(key)
          app.announce(`Key ${key.name} generated. Copy it now: it will not be shown again.`)
          reload()
        }}
      />
      <ConfirmDialog
        open={revoking !== null}
        title={`Revoke “${revoking?.name ?? ""}”?`}
        confirmLabel="Revoke key"
        danger
        onClose={() => setRevoking(null)}
        onConfirm={async () =>
          revoking === null ? null : doneOrProblem(
            run((client) => client.dashboard.revokeApiKey({ path: { key_id: revoking.id } })),
            () => {
              app.announce(`Key ${revoking.name} revoked`)
              reload()
            }
          )}
      >
        <p>
          Every request with this key is refused from now on (401). Whatever uses it stops working. This cannot be
          undone.
        </p>
      </ConfirmDialog>
    </>
  )
}
