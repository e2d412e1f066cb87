// People and countersignatures in the browser (issue #23). A server of its own, started here with
// COUNTERSIGN_SIGN_IN=passkeys and examples/policy.cedar (a payment over 100 USD needs two
// people with the role approver, not the person who asked, each confirming with a passkey), on
// http://localhost (passkeys need a host name). Each person is a browser context with Chromium's
// virtual authenticator (CDP WebAuthn.addVirtualAuthenticator): the first person from the link
// the server prints, the others invited by her; sign-in; a two-person approval decided in the
// inbox of two other browsers — one a phone — while the chat that asked updates live, in both
// transports; the requester refused on their own request; a step-up bound to the arguments; a
// removed person's open page, sent to the sign-in page that says so.
import { spawn, type ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test as base, expect, type Browser, type BrowserContext, type Page } from "@playwright/test";
import { toolCards, send, setMode, type Mode, MODES, expectCompleted, SCREENSHOTS } from "./chat";
import { waitForHydration } from "./fixtures";

const test = base.extend({});
test.describe.configure({ mode: "serial", timeout: 120_000 });

const serverBin = process.env.COUNTERSIGN_BIN ?? "./target/release/countersign";
const PHONE = { width: 390, height: 844 };

let server: ChildProcess | undefined;
let origin = "";
let setupLink = "";

/** A free loopback port. */
async function freePort(): Promise<number> {
  const net = await import("node:net");
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

test.beforeAll(async () => {
  const port = await freePort();
  const db = join(tmpdir(), `countersign-e2e-people-${port}.db`);
  for (const suffix of ["", "-wal", "-shm"]) rmSync(db + suffix, { force: true });
  origin = `http://localhost:${port}`;
  server = spawn(serverBin, [], {
    cwd: "..",
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LEPTOS_SITE_ROOT: "target/site",
      LEPTOS_SITE_ADDR: `127.0.0.1:${port}`,
      RUST_LOG: process.env.RUST_LOG ?? "warn,countersign=info",
      COUNTERSIGN_DEMO_DELAY_MS: "5",
      COUNTERSIGN_WEATHER: "offline",
      COUNTERSIGN_DB: db,
      COUNTERSIGN_SIGN_IN: "passkeys",
      COUNTERSIGN_POLICY: "examples/policy.cedar",
      // Where the site's hashed names are when the binary is not the release build's
      // (scripts/test.sh: the test build's server with the release site).
      ...(process.env.LEPTOS_HASH_FILE_NAME ? { LEPTOS_HASH_FILE_NAME: process.env.LEPTOS_HASH_FILE_NAME } : {}),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  setupLink = await new Promise<string>((resolve, reject) => {
    let printed = "";
    const timer = setTimeout(() => reject(new Error(`no set-up link in: ${printed}`)), 30_000);
    server!.stdout!.on("data", (chunk: Buffer) => {
      printed += chunk.toString();
      const link = printed.match(/(http:\/\/localhost:\d+\/welcome\/\S+)/);
      if (link) {
        clearTimeout(timer);
        resolve(link[1]);
      }
    });
    server!.on("exit", (code) => reject(new Error(`the server exited (${code}): ${printed}`)));
  });
  // Served once it listens.
  await expect(async () => {
    const r = await fetch(`${origin}/healthz`);
    expect(r.ok).toBe(true);
  }).toPass({ timeout: 30_000 });
});

test.afterAll(async () => {
  server?.kill("SIGTERM");
});

type Person = { name: string; context: BrowserContext; page: Page; problems: string[] };

/** A browser of its own, with a virtual authenticator that makes and uses passkeys. */
async function browserOf(browser: Browser, name: string, viewport = { width: 1280, height: 800 }): Promise<Person> {
  const context = await browser.newContext({ baseURL: origin, viewport, colorScheme: "light" });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/status of 4\d\d/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  const cdp = await context.newCDPSession(page);
  await cdp.send("WebAuthn.enable");
  await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { name, context, page, problems };
}

/** Makes a passkey from a one-time link; the person is signed in after. */
async function register(person: Person, link: string, expectPath: RegExp) {
  const { page } = person;
  await page.goto(link);
  const name = page.getByTestId("welcome-name");
  if (await name.count()) await name.fill(person.name);
  await page.getByTestId("create-passkey").click();
  await expect(page).toHaveURL(expectPath);
}

/** On /people, an invitation link for `name` with `roles`. */
async function invite(admin: Person, name: string, roles: string[]): Promise<string> {
  const { page } = admin;
  await page.goto("/people");
  await page.getByTestId("invite-name").fill(name);
  for (const role of roles) {
    const box = page.getByTestId(`invite-role-${role}`);
    if (await box.count()) await box.check();
    else await page.getByTestId("invite-roles").fill(role);
  }
  await page.getByTestId("invite").click();
  const link = page.getByTestId("one-time-link-url");
  await expect(link).toBeVisible();
  return (await link.textContent())!.trim();
}

let ana: Person;
let ben: Person;
let cy: Person;
let dan: Person;

test("the first person comes from the printed link, invites the others, and people sign in with passkeys", async ({ browser }) => {
  expect(setupLink).toContain("/welcome/");
  ana = await browserOf(browser, "Ana");
  await register(ana, setupLink, /\/people$/);
  await expect(ana.page.getByTestId("me")).toContainText("Ana");
  await expect(ana.page.getByTestId("me")).toContainText("admin");
  // Ana is an approver too.
  const row = ana.page.locator('[data-testid="person-row"]').filter({ hasText: "Ana" });
  await row.getByTestId("roles-input").fill("admin approver");
  await row.getByTestId("roles-save").click();
  await expect(ana.page.getByTestId("people-notice")).toHaveText("Roles saved.");

  const benLink = await invite(ana, "Ben", ["approver"]);
  const cyLink = await invite(ana, "Cy", ["approver"]);
  const danLink = await invite(ana, "Dan", []);
  ben = await browserOf(browser, "Ben");
  await register(ben, benLink, /\/$/);
  cy = await browserOf(browser, "Cy");
  await register(cy, cyLink, /\/$/);
  dan = await browserOf(browser, "Dan");
  await register(dan, danLink, /\/$/);
  await waitForHydration(dan.page);
  await expect(dan.page.getByTestId("signed-in-as")).toHaveText("Dan");
  // A used link says so.
  await ben.page.goto(benLink);
  await expect(ben.page.getByTestId("welcome-error")).toContainText("not valid");

  // Ben signs out and back in with his passkey.
  await ben.page.goto("/");
  await waitForHydration(ben.page);
  await ben.page.getByTestId("header-signout").click();
  await expect(ben.page).toHaveURL(/\/signin/);
  await ben.page.getByTestId("passkey-signin").click();
  await expect(ben.page).toHaveURL(/\/$/);
  await waitForHydration(ben.page);
  await expect(ben.page.getByTestId("signed-in-as")).toHaveText("Ben");
  for (const person of [ana, ben, cy, dan]) expect(person.problems, person.name).toEqual([]);
});

for (const mode of MODES) {
  test(`a two-person approval, decided in two other browsers (one a phone), updates the chat live (${mode})`, async ({ browser }) => {
    // Dan asks; the card says what it needs and why he cannot approve it himself.
    const page = dan.page;
    await page.goto("/");
    await waitForHydration(page);
    await page.getByTestId("new-chat").click();
    await setMode(page, mode as Mode);
    await send(page, "Send $150 to Jack");
    const card = toolCards(page, "process_payment").last();
    const approval = card.getByTestId("approval-card");
    await expect(approval.getByTestId("approval-needs")).toContainText(
      "2 different people with the role approver, not the person who asked",
    );
    await expect(approval.getByTestId("approval-why")).toContainText("You asked for it");
    await expect(approval.getByTestId("approve")).toBeDisabled();
    await expect(card.getByTestId("countersign-progress")).toHaveText(/0 of 2/);

    // Ben approves from his inbox, with his passkey.
    await ben.page.goto("/approvals");
    const item = ben.page.getByTestId("inbox-item").filter({ hasText: "Jack" }).last();
    await expect(item.getByTestId("inbox-sentence")).toContainText("150");
    await expect(item.getByTestId("inbox-who")).toContainText("Asked by Dan");
    await item.getByTestId("inbox-approve").click();
    await expect(ben.page.getByTestId("inbox-notice")).toContainText("1 of 2");
    await expect(item.getByTestId("inbox-signed")).toBeVisible();
    // Dan's chat shows it at once.
    await expect(card.getByTestId("countersign-progress")).toHaveText(
      "1 of 2: Ben approved — waiting for one more approver · open it on another device",
    );
    if (mode === "sse") await card.screenshot({ path: join(SCREENSHOTS, "countersign-card.png") });

    // Cy decides on her phone: a passkey added there from her desktop, then the link.
    const link = (await item.getByTestId("inbox-link").textContent())!.trim();
    const phone = await browserOf(browser, "Cy's phone", PHONE);
    await cy.page.goto("/people");
    await cy.page.getByTestId("device-link").click();
    const deviceLink = (await cy.page.getByTestId("one-time-link-url").textContent())!.trim();
    await register(phone, deviceLink, /\/$/);
    await phone.page.goto(link);
    const mobile = phone.page.getByTestId("inbox-item");
    await expect(mobile).toHaveCount(1);
    await expect(mobile.getByTestId("inbox-progress")).toContainText("1 of 2: Ben approved");
    // The phone layout: nothing wider than the screen, thumb-sized buttons.
    const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth);
    expect(overflow).toBeLessThanOrEqual(PHONE.width);
    const button = await mobile.getByTestId("inbox-approve").boundingBox();
    expect(button!.height).toBeGreaterThanOrEqual(44);
    if (mode === "sse") await phone.page.screenshot({ path: join(SCREENSHOTS, "inbox-phone.png") });
    await mobile.getByTestId("inbox-approve").click();
    await expect(phone.page.getByTestId("inbox-notice")).toContainText("It runs now");
    await expect(phone.page.getByTestId("inbox-gone")).toBeVisible();

    // The payment ran in Dan's chat, which updated by itself.
    await expectCompleted(card);
    await expect(card.getByTestId("countersign-progress")).toHaveText("Approved by Ben and Cy");
    expect(phone.problems).toEqual([]);
    await phone.context.close();
  });
}

test("the requester is refused on their own request, everywhere", async () => {
  const page = dan.page;
  await page.goto("/");
  await waitForHydration(page);
  await page.getByTestId("new-chat").click();
  await send(page, "Send $200 to Jill");
  const card = toolCards(page, "process_payment").last();
  await expect(card.getByTestId("approval-card").getByTestId("approve")).toBeDisabled();
  await page.goto("/approvals");
  const item = page.getByTestId("inbox-item").filter({ hasText: "Jill" });
  await expect(item.getByTestId("inbox-why")).toContainText("you asked for it");
  await expect(item.getByTestId("inbox-approve")).toHaveCount(0);
  // Asking the server anyway is refused by the gate.
  const approvalId = await item.getAttribute("data-approval");
  const answer = await page.evaluate(async (id) => {
    const r = await fetch("/api/fn/decide_approval", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ approval_id: id, approve: true }),
    });
    return { status: r.status, text: await r.text() };
  }, approvalId);
  expect(answer.status).toBe(403);
  expect(answer.text).toContain("you asked for it");
  // He may withdraw it.
  await item.getByTestId("inbox-deny").click();
  await expect(page.getByTestId("inbox-notice")).toContainText("Denied");
});

test("a step-up is bound to the arguments: an edit needs its own passkey confirmation", async () => {
  const page = dan.page;
  await page.goto("/");
  await waitForHydration(page);
  await page.getByTestId("new-chat").click();
  await send(page, "Send $180 to Kim");
  await expect(toolCards(page, "process_payment").last().getByTestId("approval-card")).toBeVisible();

  // Ben edits the amount before approving. On the way to the server, a script (an agent driving
  // his browser) changes the amount again: the assertion was made for 120, the request says 90.
  await ben.page.goto("/approvals");
  const item = ben.page.getByTestId("inbox-item").filter({ hasText: "Kim" });
  await item.getByTestId("inbox-edit").click();
  await item.locator('input[name="amount"]').fill("120");
  await ben.page.route("**/api/fn/decide_approval", async (route) => {
    const body = JSON.parse(route.request().postData() ?? "{}");
    body.edit = (body.edit as [string, string][]).map(([k, v]) => [k, k === "amount" ? "90" : v]);
    await route.continue({ postData: JSON.stringify(body) });
  });
  await item.getByTestId("inbox-edit-approve").click();
  await expect(ben.page.getByTestId("inbox-notice")).toContainText("other arguments");
  await ben.page.unroute("**/api/fn/decide_approval");
  // Untouched, the edit goes through with a fresh confirmation: 1 of 2, for 120.
  await item.getByTestId("inbox-edit-approve").click();
  await expect(ben.page.getByTestId("inbox-notice")).toContainText("1 of 2");
  await expect(item.getByTestId("inbox-sentence")).toContainText("120");
  const card = toolCards(page, "process_payment").last();
  await expect(card.getByTestId("countersign-progress")).toHaveText(/1 of 2: Ben approved/);
});

test("a removed person's open page goes to the sign-in page, which says they were removed", async () => {
  // Dan has the inbox open: it follows the server by long polling.
  const page = dan.page;
  await page.goto("/approvals");
  // The list is loaded by the page's code: once it shows, the page is following the server.
  await expect(page.getByTestId("inbox-item").first()).toBeVisible();
  // Ana removes him.
  await ana.page.goto("/people");
  const row = ana.page.locator('[data-testid="person-row"]').filter({ hasText: "Dan" });
  await row.getByTestId("remove-person").click();
  await expect(ana.page.getByTestId("people-notice")).toHaveText("Removed.");
  // His page's next question to the server is answered 401 signed_out: it goes to the sign-in
  // page (which comes back to the inbox after), and that page says why. No raw error on the way.
  await expect(page).toHaveURL(/\/signin\?next=\/approvals$/, { timeout: 30_000 });
  await expect(page.getByTestId("signed-out")).toContainText("You were removed");
  await expect(page.getByTestId("passkey-signin")).toBeVisible();
  expect(dan.problems).toEqual([]);
  // Ana, at the same address, is not made to wait.
  await ana.page.goto("/approvals");
  await expect(ana.page.getByTestId("inbox")).toBeVisible();
});

test.afterAll(async () => {
  for (const person of [ana, ben, cy, dan]) await person?.context.close();
});
