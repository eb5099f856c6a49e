import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import * as Path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buildDashboard } from "../../scripts/build-dashboard.js"
import * as Server from "../../src/http/Server.js"
import * as Services from "../../src/Services.js"
import * as Database from "../../src/sql/Database.js"
import { fakeAlpacaCredentials, listen, type Receiver, ROOT } from "../support/Harness.js"
import * as TestServer from "../support/TestServer.js"

const SCREENSHOTS = Path.join(ROOT, "test-artifacts", "screenshots")
const DESKTOP = { width: 1280, height: 800 }
const PHONE = { width: 390, height: 844 }
const PASSWORD = "correct horse battery"

/** The whole service with its workers on PGlite, on a real loopback port, serving the built dashboard. */
const serviceLayer = (assetsDir: string) =>
  TestServer.withFakeAlpacas((alpaca) =>
    Server.layer({ ...TestServer.options, dashboardAssets: assetsDir }).pipe(
      Layer.provideMerge(
        Services.layer({ ...TestServer.options, alpaca }, { routing: TestServer.routing, webhooks: TestServer.webhooks })
          .pipe(Layer.provideMerge(Database.migrated(Database.pglite(undefined))))
      ),
      Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )

let assetsDir = ""
let runtime: ManagedRuntime.ManagedRuntime<HttpServer.HttpServer | TestServer.FakeAlpacas, unknown> | undefined
let browser: Browser | undefined
let receiver: Receiver | undefined
let baseUrl = ""

beforeAll(async () => {
  assetsDir = mkdtempSync(Path.join(tmpdir(), "dashboard-build-"))
  await buildDashboard(assetsDir)
  mkdirSync(SCREENSHOTS, { recursive: true })
  runtime = ManagedRuntime.make(serviceLayer(assetsDir))
  const server = await runtime.runPromise(HttpServer.HttpServer)
  if (server.address._tag !== "TcpAddress") throw new Error("the service is not on TCP")
  baseUrl = `http://127.0.0.1:${server.address.port}`
  receiver = await listen()
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await receiver?.close()
  await runtime?.dispose()
  if (assetsDir !== "") rmSync(assetsDir, { recursive: true, force: true })
}, 60_000)

const fakes = () => {
  if (runtime === undefined) throw new Error("the service is not running")
  return runtime.runPromise(TestServer.FakeAlpacas)
}

/** A fresh browser profile (its own cookies and localStorage) whose page problems are collected. */
const open = async () => {
  if (browser === undefined) throw new Error("no browser")
  const context = await browser.newContext({ viewport: DESKTOP, locale: "en-US", timezoneId: "UTC" })
  const page = await context.newPage()
  const problems: Array<string> = []
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
  page.on("console", (message) => {
    const text = message.text()
    if (/Content Security Policy|Refused to/i.test(text)) problems.push(`CSP: ${text}`)
  })
  return { context, page, problems }
}

/** Screenshots of the page as it stands, at desktop and at phone width. */
const shoot = async (page: Page, name: string) => {
  await page.setViewportSize(DESKTOP)
  await page.screenshot({ path: Path.join(SCREENSHOTS, `${name}-desktop.png`), fullPage: true })
  await page.setViewportSize(PHONE)
  await page.screenshot({ path: Path.join(SCREENSHOTS, `${name}-phone.png`), fullPage: true })
  await page.setViewportSize(DESKTOP)
}

const heading = (page: Page, name: string) => page.getByRole("heading", { level: 1, name }).waitFor()

/** Waits until the element `id` has the focus: the page moves it there once it has rendered. */
const focused = (page: Page, id: string) => page.waitForFunction(`document.activeElement?.id === ${JSON.stringify(id)}`)

/** Follows a link of the left navigation. */
const go = async (page: Page, label: string, title: string) => {
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: label, exact: true }).click()
  await heading(page, title)
}

/** Marks the document: a reload would lose the mark, so a page still marked updated in place. */
const mark = (page: Page) => page.evaluate("document.documentElement.dataset.journey = 'kept'")
const stillMarked = (page: Page) => page.evaluate("document.documentElement.dataset.journey === 'kept'")

const IntentBody = Schema.Struct({ id: Schema.String, status: Schema.String })

/** `POST /api/v1/intents` with an API key, as a customer's program would. */
const createIntent = async (key: string, body: Record<string, unknown>) => {
  const response = await fetch(`${baseUrl}/api/v1/intents`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  expect(response.status).toBe(201)
  return Schema.decodeUnknownSync(IntentBody)(await response.json())
}

const api = (key: string, method: "GET" | "POST", path: string) =>
  fetch(`${baseUrl}${path}`, { method, headers: { authorization: `Bearer ${key}` } })

const signUp = async (page: Page, email: string, name: string) => {
  await page.goto(`${baseUrl}/dashboard/`)
  await heading(page, "Sign in")
  await page.getByRole("link", { name: "Create an account" }).click()
  await heading(page, "Create your account")
  await page.getByLabel("Email").fill(email)
  await page.getByLabel("Name").fill(name)
  await page.getByLabel("Password").fill(PASSWORD)
  await page.getByRole("button", { name: "Create account" }).click()
  await heading(page, "Overview")
}

/** Generates a key of the page's mode and reads it from the panel that shows it once. */
const generateKey = async (page: Page, name: string, mode: "test" | "live") => {
  await go(page, "API keys", "API keys")
  await page.getByRole("button", { name: `Generate ${mode} key` }).click()
  const dialog = page.getByRole("dialog", { name: `Generate a ${mode} API key` })
  await dialog.getByLabel("Name").fill(name)
  await dialog.getByRole("button", { name: "Generate key" }).click()
  const field = page.getByRole("textbox", { name: "New API key" })
  await field.waitFor()
  const key = await field.inputValue()
  expect(key).toMatch(new RegExp(`^sk_${mode}_[A-Za-z0-9]{32}$`))
  await page.getByText("you won't see it again").waitFor()
  return key
}

const ErrorBody = Schema.Struct({ error_code: Schema.String, detail: Schema.String, request_id: Schema.String })

describe("the dashboard in a browser", () => {
  it("is served by the service: the page with its headers, the API's 404 under /dashboard/api/", async () => {
    const page = await fetch(`${baseUrl}/dashboard/intents/whatever`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'")
    expect(page.headers.get("x-frame-options")).toBe("DENY")
    await page.text()
    const missing = await fetch(`${baseUrl}/dashboard/api/v1/no-such-route`)
    expect(missing.status).toBe(404)
    expect(Schema.decodeUnknownSync(ErrorBody)(await missing.json()).error_code).toBe("not_found")
  })

  it("journey 1: sign up, key, mock broker, webhook, an intent followed live, revoke", async () => {
    const { context, page, problems } = await open()
    try {
      // Signed out, every page leads to sign-in; sign-up signs in.
      await page.goto(`${baseUrl}/dashboard/intents`)
      await heading(page, "Sign in")
      expect(page.url()).toContain("/dashboard/signin?next=%2Fintents")
      await shoot(page, "signin")
      await page.getByRole("link", { name: "Create an account" }).click()
      await heading(page, "Create your account")
      await shoot(page, "signup")
      const email = `journey-${Date.now()}@example.com`
      await page.getByLabel("Email").fill(email)
      await page.getByLabel("Name").fill("Journey One")
      await page.getByLabel("Password").fill("short")
      await page.getByRole("button", { name: "Create account" }).click()
      // The browser's own check stops a short password before the API is asked.
      expect(await page.locator("input[type=password]:invalid").count()).toBe(1)
      await heading(page, "Create your account")
      await page.getByLabel("Password").fill(PASSWORD)
      await page.getByRole("button", { name: "Create account" }).click()
      await heading(page, "Intents")

      // Test mode by default, and it says so on every page.
      const modeSwitch = page.getByRole("switch", { name: "Test mode" })
      expect(await modeSwitch.getAttribute("aria-checked")).toBe("true")
      await page.getByRole("note").filter({ hasText: "Test mode" }).waitFor()
      await go(page, "Overview", "Overview")
      await page.getByText("Live intents this month").waitFor()
      await shoot(page, "overview-empty")

      // Keyboard: on a first load the skip link comes first; after a navigation focus is on the new
      // page's heading; a dialog takes focus, Escape closes it and focus returns to its opener.
      await page.goto(`${baseUrl}/dashboard/brokers`)
      await heading(page, "Broker connections")
      await page.keyboard.press("Tab")
      expect(await page.evaluate("document.activeElement?.textContent")).toBe("Skip to content")
      await go(page, "API keys", "API keys")
      await focused(page, "page-title")
      await page.keyboard.press("Tab")
      expect(await page.evaluate("document.activeElement?.textContent")).toBe("Generate test key")
      await page.keyboard.press("Enter")
      await page.getByRole("dialog", { name: "Generate a test API key" }).waitFor()
      await focused(page, "key-name")
      await page.keyboard.press("Escape")
      await page.getByRole("dialog").waitFor({ state: "hidden" })
      expect(await page.evaluate("document.activeElement?.textContent")).toBe("Generate test key")

      // A test key, shown once.
      const key = await generateKey(page, "Journey bot", "test")
      await shoot(page, "api-keys-created")
      await page.getByRole("button", { name: "I've saved it" }).click()
      await page.getByRole("textbox", { name: "New API key" }).waitFor({ state: "detached" })
      await page.locator("tr", { hasText: "Journey bot" }).getByText("Active").waitFor()

      // The mock broker.
      await go(page, "Broker connections", "Broker connections")
      await page.getByRole("button", { name: "Connect mock broker" }).click()
      const connect = page.getByRole("dialog", { name: "Connect the mock broker" })
      await connect.getByRole("button", { name: "Connect mock broker" }).click()
      const brokerRow = page.locator("tr[data-broker]", { hasText: "Mock broker" })
      await brokerRow.waitFor()
      const brokerId = await brokerRow.getAttribute("data-broker")
      if (brokerId === null) throw new Error("no broker id on the row")
      await shoot(page, "brokers")

      // A webhook endpoint at a local receiver; its secret shown once.
      await go(page, "Webhooks", "Webhooks")
      await page.getByRole("button", { name: "Add endpoint" }).click()
      const add = page.getByRole("dialog", { name: "Add a test webhook endpoint" })
      await add.getByLabel("Endpoint URL").fill(receiver?.url ?? "")
      await add.getByRole("button", { name: "Add endpoint" }).click()
      const secret = await page.getByRole("textbox", { name: "Signing secret" }).inputValue()
      expect(secret).toMatch(/^[0-9a-f]{64}$/)
      await shoot(page, "webhooks-created")
      await page.getByRole("button", { name: "I've saved it" }).click()

      // The intents page is open before the intent exists: the new intent appears, filled, by itself.
      await go(page, "Intents", "Intents")
      await shoot(page, "intents-empty")
      await mark(page)
      const filled = await createIntent(key, {
        intent_id: "journey-market-1",
        symbol: "AAPL",
        side: "buy",
        quantity: 10,
        order_type: "market",
        broker_id: brokerId
      })
      const row = page.locator(`tr[data-intent="${filled.id}"]`)
      await row.getByText("Filled").waitFor({ timeout: 15_000 })
      expect(await stillMarked(page)).toBe(true)
      await shoot(page, "intents")

      // Its page: the order, its fill at the mock's price, and the events.
      await row.getByRole("link", { name: "journey-market-1" }).click()
      await heading(page, "Buy 10 AAPL")
      expect(page.url()).toBe(`${baseUrl}/dashboard/intents/${filled.id}`)
      await page.getByTestId("intent-status").getByText("Filled", { exact: true }).waitFor()
      const order = page.locator("article.order")
      await order.locator(".badge", { hasText: "Filled" }).waitFor()
      const fill = order.locator("tr.fill")
      expect(await fill.count()).toBe(1)
      expect(await fill.locator("td").nth(0).textContent()).toBe("10")
      expect(await fill.locator("td").nth(1).textContent()).toBe("100")
      await page.locator('[data-event-type="intent.created"]').waitFor()
      await page.locator('[data-event-type="intent.filled"]').waitFor()
      await shoot(page, "intent-filled")

      // A deep link works as a first load.
      await page.goto(`${baseUrl}/dashboard/intents/${filled.id}`)
      await heading(page, "Buy 10 AAPL")

      // A resting limit intent, its page open, canceled by the API: the page follows without a reload.
      const resting = await createIntent(key, {
        intent_id: "journey-limit-1",
        symbol: "MSFT",
        side: "buy",
        quantity: 2.5,
        order_type: "limit",
        limit_price: 90,
        time_in_force: "gtc",
        broker_id: brokerId
      })
      await page.goto(`${baseUrl}/dashboard/intents/${resting.id}`)
      await heading(page, "Buy 2.5 MSFT")
      await page.getByTestId("intent-status").getByText("Pending", { exact: true }).waitFor()
      await page.locator("article.order .badge", { hasText: "New" }).waitFor({ timeout: 15_000 })
      await page.getByRole("button", { name: "Cancel intent" }).waitFor()
      await shoot(page, "intent-pending")
      await mark(page)
      const canceled = await api(key, "POST", `/api/v1/intents/${resting.id}/cancel`)
      expect(canceled.status).toBe(200)
      await page.getByTestId("intent-status").getByText("Canceled", { exact: true }).waitFor({ timeout: 15_000 })
      await page.locator('[data-event-type="intent.canceled"]').waitFor()
      await page.getByRole("button", { name: "Cancel intent" }).waitFor({ state: "detached" })
      expect(await stillMarked(page)).toBe(true)

      // Cancel from the page, after confirming.
      const another = await createIntent(key, {
        intent_id: "journey-hold-1",
        symbol: "HOLD",
        side: "sell",
        quantity: 1,
        order_type: "market",
        broker_id: brokerId
      })
      await page.goto(`${baseUrl}/dashboard/intents/${another.id}`)
      await page.getByRole("button", { name: "Cancel intent" }).click()
      const confirm = page.getByRole("dialog", { name: "Cancel this intent?" })
      await shoot(page, "intent-cancel-dialog")
      await confirm.getByRole("button", { name: "Cancel intent" }).click()
      await page.getByTestId("intent-status").getByText("Canceled", { exact: true }).waitFor({ timeout: 15_000 })

      // Filters: by status.
      await go(page, "Intents", "Intents")
      await page.getByLabel("Status").selectOption("filled")
      await page.getByRole("button", { name: "Apply filters" }).click()
      await page.waitForURL(/\/dashboard\/intents\?status=filled$/)
      await page.locator(`tr[data-intent="${filled.id}"]`).waitFor()
      expect(await page.locator("tr[data-intent]").count()).toBe(1)

      // The endpoint's deliveries: the intents' events reached the receiver.
      await go(page, "Webhooks", "Webhooks")
      await page.getByRole("link", { name: /^Manage/ }).click()
      await heading(page, "Webhook endpoint")
      await page.locator("tr[data-delivery]", { hasText: "intent.filled" }).getByText("Succeeded").waitFor({ timeout: 15_000 })
      await page.getByRole("button", { name: "Send test event" }).click()
      await page.locator("tr[data-delivery]", { hasText: "webhook.test" }).waitFor({ timeout: 15_000 })
      await shoot(page, "webhook-endpoint")
      await page.getByRole("button", { name: "Rotate secret" }).click()
      await page.getByRole("dialog", { name: "Rotate the signing secret?" }).getByRole("button", { name: "Rotate secret" })
        .click()
      const rotated = await page.getByRole("textbox", { name: "Signing secret" }).inputValue()
      expect(rotated).toMatch(/^[0-9a-f]{64}$/)
      expect(rotated).not.toBe(secret)
      await page.getByRole("button", { name: "I've saved it" }).click()
      await page.getByRole("button", { name: "Disable" }).click()
      await page.getByRole("dialog", { name: "Disable this endpoint?" }).getByRole("button", { name: "Disable" }).click()
      await page.locator(".facts").getByText("Disabled", { exact: true }).waitFor()
      expect(await page.getByRole("button", { name: "Send test event" }).isDisabled()).toBe(true)
      await page.getByRole("button", { name: "Enable" }).click()
      await page.locator(".facts").getByText("Enabled", { exact: true }).waitFor()

      await go(page, "Overview", "Overview")
      await page.locator("tr[data-intent]", { hasText: "journey-market-1" }).waitFor()
      await shoot(page, "overview")

      await go(page, "Settings", "Account settings")
      await page.getByLabel("Name", { exact: true }).fill("Journey Renamed")
      await page.getByRole("button", { name: "Save name" }).click()
      await page.getByRole("status").getByText("Name saved").waitFor()
      await shoot(page, "settings")
      // A wrong current password is said next to the form; the right one gives a fresh session,
      // whose CSRF token the calls below (a revocation) must carry.
      await page.getByLabel("Current password").fill("not my password")
      await page.getByLabel("New password").fill("an even better passphrase")
      await page.getByRole("button", { name: "Change password" }).click()
      await page.getByRole("alert").waitFor()
      await page.getByLabel("Current password").fill(PASSWORD)
      await page.getByRole("button", { name: "Change password" }).click()
      await page.getByRole("status").getByText("Password changed", { exact: false }).waitFor()

      // At phone width the navigation is a menu.
      await page.setViewportSize(PHONE)
      const nav = page.getByRole("navigation", { name: "Main" })
      expect(await nav.isVisible()).toBe(false)
      await page.getByRole("button", { name: "Menu" }).click()
      await nav.getByRole("link", { name: "API keys" }).click()
      await heading(page, "API keys")
      await shoot(page, "api-keys")

      // Revoked, the key is refused at once.
      expect((await api(key, "GET", "/api/v1/intents")).status).toBe(200)
      await page.getByRole("button", { name: "Revoke key Journey bot" }).click()
      const revoke = page.getByRole("dialog", { name: "Revoke “Journey bot”?" })
      await revoke.getByRole("button", { name: "Revoke key" }).click()
      await page.locator("tr", { hasText: "Journey bot" }).getByText("Revoked").waitFor()
      expect((await api(key, "GET", "/api/v1/intents")).status).toBe(401)

      expect(problems).toEqual([])
    } finally {
      await context.close()
    }
  }, 180_000)

  it("journey 2: live mode with Alpaca paper, an intent filled by the fake, seen live", async () => {
    const { paper } = await fakes()
    const { context, page, problems } = await open()
    try {
      const email = `journey-live-${Date.now()}@example.com`
      await signUp(page, email, "Journey Two")

      // Signing out and in again.
      await page.getByRole("button", { name: "Sign out" }).click()
      await heading(page, "Sign in")
      await page.getByLabel("Email").fill(email)
      await page.getByLabel("Password").fill("not the password")
      await page.getByRole("button", { name: "Sign in" }).click()
      await page.getByRole("alert").getByText("Invalid email or password").waitFor()
      await page.getByLabel("Password").fill(PASSWORD)
      await page.getByRole("button", { name: "Sign in" }).click()
      await heading(page, "Overview")

      // The switch to live mode: no test banner, and it is remembered.
      await page.getByRole("switch", { name: "Test mode" }).click()
      expect(await page.getByRole("switch", { name: "Test mode" }).getAttribute("aria-checked")).toBe("false")
      expect(await page.getByRole("note").count()).toBe(0)
      await page.reload()
      await heading(page, "Overview")
      expect(await page.getByRole("switch", { name: "Test mode" }).getAttribute("aria-checked")).toBe("false")
      await shoot(page, "overview-live")

      // Alpaca paper: refused credentials are said next to the form, the fake's pair connects.
      await go(page, "Broker connections", "Broker connections")
      await page.getByRole("button", { name: "Connect Alpaca" }).click()
      const connect = page.getByRole("dialog", { name: "Connect Alpaca" })
      await connect.getByLabel("Name").fill("Alpaca paper")
      await connect.getByLabel("API key ID").fill("wrong-key-id")
      await connect.getByLabel("API secret key").fill("wrong-secret")
      await connect.getByRole("button", { name: "Connect Alpaca" }).click()
      await connect.getByRole("alert").getByText("Alpaca refused the credentials").waitFor()
      await shoot(page, "brokers-alpaca-refused")
      await connect.getByLabel("API key ID").fill(fakeAlpacaCredentials.api_key_id)
      await connect.getByLabel("API secret key").fill(fakeAlpacaCredentials.api_secret_key)
      await connect.getByRole("button", { name: "Connect Alpaca" }).click()
      const brokerRow = page.locator("tr[data-broker]", { hasText: "Alpaca paper" })
      await brokerRow.getByText("Paper", { exact: true }).waitFor()
      await brokerRow.getByText("Active", { exact: true }).waitFor()
      const brokerId = await brokerRow.getAttribute("data-broker")
      if (brokerId === null) throw new Error("no broker id on the row")
      await shoot(page, "brokers-live")

      const key = await generateKey(page, "Live bot", "live")

      // The fake holds the order open until told to fill it, with the intent's page open.
      paper.setBehaviour("rest", "NVDA", 1)
      const intent = await createIntent(key, {
        intent_id: "journey-live-1",
        symbol: "NVDA",
        side: "buy",
        quantity: 3,
        order_type: "market",
        broker_id: brokerId
      })
      await page.goto(`${baseUrl}/dashboard/intents/${intent.id}`)
      await heading(page, "Buy 3 NVDA")
      await page.locator("article.order .badge", { hasText: "New" }).waitFor({ timeout: 15_000 })
      await page.getByTestId("intent-status").getByText("Pending", { exact: true }).waitFor()
      await mark(page)
      const placed = paper.orders().find((order) => order.client_order_id === `tir-${intent.id}`)
      if (placed === undefined) throw new Error("the fake Alpaca has no order for the intent")
      paper.fill(placed.id)
      await page.getByTestId("intent-status").getByText("Filled", { exact: true }).waitFor({ timeout: 20_000 })
      const order = page.locator("article.order")
      await order.getByText(placed.id).waitFor()
      await order.locator("tr.fill").first().waitFor()
      expect(await order.locator("tr.fill td").nth(1).textContent()).toBe("100")
      await page.locator('[data-event-type="intent.filled"]').waitFor()
      expect(await stillMarked(page)).toBe(true)
      await shoot(page, "intent-filled-live")

      // Live data only: the test intents of journey 1 are not this user's anyway, and test mode is empty here.
      await go(page, "Intents", "Intents")
      await page.locator(`tr[data-intent="${intent.id}"]`).waitFor()
      await page.getByRole("switch", { name: "Test mode" }).click()
      await page.getByText("No test intents yet.", { exact: false }).waitFor()

      expect(problems).toEqual([])
    } finally {
      await context.close()
    }
  }, 180_000)

  it("the API's Swagger page at /docs renders the OpenAPI document's operations from its own files", async () => {
    const { context, page, problems } = await open()
    try {
      const loaded: Array<string> = []
      page.on("response", (response) => loaded.push(`${response.status()} ${new URL(response.url()).pathname}`))
      await page.goto(`${baseUrl}/docs`)
      await page.getByRole("heading", { name: /Trade Intent Router/ }).waitFor()
      // Each operation of the document is listed: the intents' creation among them.
      await page.locator(".opblock-post", { hasText: "/api/v1/intents" }).first().waitFor()
      expect(await page.title()).toBe("Trade Intent Router Documentation")
      expect(loaded).toEqual(expect.arrayContaining([
        "200 /docs",
        "200 /docs/swagger-ui.css",
        "200 /docs/swagger-ui-bundle.js",
        "200 /docs/init.js",
        "200 /api/v1/openapi.json"
      ]))
      expect(problems).toEqual([])
    } finally {
      await context.close()
    }
  }, 60_000)
})
