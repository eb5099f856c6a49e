import { useState } from "preact/hooks"
import type { BrokerView } from "../../../src/api/AdminApi.js"
import type { BrokerEnvironment } from "../../../src/domain/Account.js"
import { doneOrProblem, run } from "../api.js"
import { Badge, ConfirmDialog, FormDialog, ItemsTable, PageHeader, Time } from "../components.js"
import { InputField, useSubmit } from "../forms.js"
import { useApp, useLoad } from "../state.js"

/** The two fields of an Alpaca key pair; the secret is never shown again once sent. */
const CredentialFields = (
  { prefix, keyId, secret, onKeyId, onSecret }: {
    readonly prefix: string
    readonly keyId: string
    readonly secret: string
    readonly onKeyId: (value: string) => void
    readonly onSecret: (value: string) => void
  }
) => (
  <>
    <InputField
      id={`${prefix}-key-id`}
      label="API key ID"
      mono
      type="text"
      required
      autoComplete="off"
      spellcheck={false}
      value={keyId}
      onValue={onKeyId}
    />
    <InputField
      id={`${prefix}-secret`}
      label="API secret key"
      mono
      type="password"
      required
      autoComplete="off"
      spellcheck={false}
      value={secret}
      onValue={onSecret}
    />
    <p class="hint">Checked with Alpaca before anything is stored, then kept encrypted and never shown again.</p>
  </>
)

const ConnectDialog = (
  { open, onClose, onConnected }: {
    readonly open: boolean
    readonly onClose: () => void
    readonly onConnected: (broker: BrokerView) => void
  }
) => {
  const { mode } = useApp()
  const [name, setName] = useState("")
  const [environment, setEnvironment] = useState<BrokerEnvironment>("paper")
  const [keyId, setKeyId] = useState("")
  const [secret, setSecret] = useState("")
  const defaultName = mode === "test" ? "Mock broker" : environment === "paper" ? "Alpaca paper" : "Alpaca live"
  const form = useSubmit(
    () => {
      const chosen = name.trim() === "" ? defaultName : name.trim()
      return run((client) =>
        client.dashboard.createBroker({
          payload: mode === "test"
            ? { name: chosen, kind: "mock", mode: "test" }
            : {
              name: chosen,
              kind: "alpaca",
              mode: "live",
              environment,
              credentials: { api_key_id: keyId.trim(), api_secret_key: secret.trim() }
            }
        })
      )
    },
    (broker) => {
      setName("")
      setKeyId("")
      setSecret("")
      onConnected(broker)
    }
  )
  return (
    <FormDialog
      open={open}
      title={mode === "test" ? "Connect the mock broker" : "Connect Alpaca"}
      onClose={onClose}
      form={form}
      submitLabel={mode === "test" ? "Connect mock broker" : "Connect Alpaca"}
      busyLabel="Connecting…"
    >
      {mode === "test"
        ? (
          <p class="dialog-text">
            The mock broker is deterministic and trades nothing: every symbol is priced 100, market orders fill at
            once, and the symbols REJECT, PARTIAL, FAIL and HOLD reach the other outcomes.
          </p>
        )
        : (
          <p class="dialog-text">
            Orders of live keys go to this Alpaca account. Create a key pair in Alpaca's dashboard (API Keys).
          </p>
        )}
      <InputField
        id="broker-name"
        label="Name"
        type="text"
        maxLength={200}
        placeholder={defaultName}
        autoFocus
        value={name}
        onValue={setName}
      />
      {mode === "live" && (
        <>
          <fieldset class="fieldset">
            <legend class="label">Alpaca environment</legend>
            <label class="check">
              <input
                type="radio"
                name="environment"
                value="paper"
                checked={environment === "paper"}
                onChange={() => setEnvironment("paper")}
              />
              <span>Paper trading (simulated)</span>
            </label>
            <label class="check">
              <input
                type="radio"
                name="environment"
                value="live"
                checked={environment === "live"}
                onChange={() => setEnvironment("live")}
              />
              <span>Live trading (real money)</span>
            </label>
          </fieldset>
          <CredentialFields prefix="connect" keyId={keyId} secret={secret} onKeyId={setKeyId} onSecret={setSecret} />
        </>
      )}
    </FormDialog>
  )
}

const ReplaceCredentialsDialog = (
  { broker, onClose, onReplaced }: {
    readonly broker: BrokerView | null
    readonly onClose: () => void
    readonly onReplaced: (broker: BrokerView) => void
  }
) => {
  const [keyId, setKeyId] = useState("")
  const [secret, setSecret] = useState("")
  const form = useSubmit(
    () =>
      // The form shows only while a connection is chosen.
      broker === null
        ? { tag: "Form", detail: "Choose a connection first." }
        : run((client) =>
          client.dashboard.replaceBrokerCredentials({
            path: { broker_id: broker.id },
            payload: { api_key_id: keyId.trim(), api_secret_key: secret.trim() }
          })
        ),
    (replaced) => {
      setKeyId("")
      setSecret("")
      onReplaced(replaced)
    }
  )
  return (
    <FormDialog
      open={broker !== null}
      title={`Replace the credentials of “${broker?.name ?? ""}”`}
      onClose={onClose}
      form={form}
      submitLabel="Replace credentials"
      busyLabel="Checking…"
    >
      <p class="dialog-text">
        Alpaca refused this connection's key pair, so its intents fail. Enter a new pair to make it active again.
      </p>
      <CredentialFields prefix="replace" keyId={keyId} secret={secret} onKeyId={setKeyId} onSecret={setSecret} />
    </FormDialog>
  )
}

export const BrokersPage = () => {
  const app = useApp()
  const { mode } = app
  const [brokers, reload] = useLoad(() => run((client) => client.dashboard.listBrokers({ urlParams: { mode } })), [mode])
  const [connecting, setConnecting] = useState(false)
  const [replacing, setReplacing] = useState<BrokerView | null>(null)
  const [disconnecting, setDisconnecting] = useState<BrokerView | null>(null)
  return (
    <>
      <PageHeader
        title="Broker connections"
        description={
          mode === "test"
            ? "Test keys route to the mock broker: connect it to try the API without trading."
            : "Live keys route to Alpaca, paper or live. An intent names its connection by broker_id."
        }
        actions={
          <button type="button" class="button button-primary" onClick={() => setConnecting(true)}>
            {mode === "test" ? "Connect mock broker" : "Connect Alpaca"}
          </button>
        }
      />
      <ItemsTable
        load={brokers}
        retry={reload}
        label="Broker connections"
        columns={["Name", "Status", "Kind", "Environment", "broker_id", "Created"]}
        actions
        empty={<>No {mode} broker connections yet.</>}
        row={(broker) => (
          <tr key={broker.id} data-broker={broker.id}>
            <td data-label="Name" class="strong">{broker.name}</td>
            <td data-label="Status">
              {broker.status === "active"
                ? <Badge tone="success">Active</Badge>
                : <Badge tone="danger">Credentials refused</Badge>}
            </td>
            <td data-label="Kind">{broker.kind === "mock" ? "Mock" : "Alpaca"}</td>
            <td data-label="Environment">{broker.environment === null ? <span class="muted">—</span> : broker.environment === "paper" ? "Paper" : "Live"}</td>
            <td data-label="broker_id" class="mono">{broker.id}</td>
            <td data-label="Created">
              <Time at={broker.created_at} compact />
            </td>
            <td class="actions">
              {broker.kind === "alpaca" && broker.status === "invalid" && (
                <button type="button" class="button button-small" onClick={() => setReplacing(broker)}>
                  Replace credentials
                </button>
              )}
              <button
                type="button"
                class="button button-small button-danger-outline"
                aria-label={`Disconnect ${broker.name}`}
                onClick={() => setDisconnecting(broker)}
              >
                Disconnect
              </button>
            </td>
          </tr>
        )}
      />
      <ConnectDialog
        open={connecting}
        onClose={() => setConnecting(false)}
        onConnected={(broker) => {
          setConnecting(false)
          app.announce(`${broker.name} connected`)
          reload()
        }}
      />
      <ReplaceCredentialsDialog
        broker={replacing}
        onClose={() => setReplacing(null)}
        onReplaced={(broker) => {
          setReplacing(null)
          app.announce(`${broker.name} is active again`)
          reload()
        }}
      />
      <ConfirmDialog
        open={disconnecting !== null}
        title={`Disconnect “${disconnecting?.name ?? ""}”?`}
        confirmLabel="Disconnect"
        danger
        onClose={() => setDisconnecting(null)}
        onConfirm={async () =>
          disconnecting === null ? null : doneOrProblem(
            run((client) => client.dashboard.disconnectBroker({ path: { broker_id: disconnecting.id } })),
            () => {
              app.announce(`${disconnecting.name} disconnected`)
              reload()
            }
          )}
      >
        <p>
          New intents naming this connection are refused (404). Intents already routed keep their history, and open
          orders are still followed to the end.
        </p>
      </ConfirmDialog>
    </>
  )
}
