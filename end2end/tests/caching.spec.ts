import type { CDPSession, Page } from "@playwright/test";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { test, expect, openChat } from "./fixtures";
import { expectTurnFinished, send, setMode, startChat } from "./chat";

/** What crossed the network while a page loaded: every response not served from the cache. */
async function recordNetwork(page: Page): Promise<{ cdp: CDPSession; fetched: Map<string, Record<string, string>> }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  const cached = new Set<string>();
  const fetched = new Map<string, Record<string, string>>();
  cdp.on("Network.requestServedFromCache", (e) => cached.add(e.requestId));
  cdp.on("Network.responseReceived", (e) => {
    if (cached.has(e.requestId) || e.response.fromDiskCache || e.response.fromPrefetchCache) return;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(e.response.headers)) headers[name.toLowerCase()] = String(value);
    fetched.set(new URL(e.response.url).pathname, headers);
  });
  return { cdp, fetched };
}

const bundle = /^\/pkg\/countersign\.[A-Za-z0-9_-]+\.(wasm|js|css)$/;

test("the bundle comes brotli-compressed under hashed names, and a second visit fetches only the page", async ({
  page,
}) => {
  const first = await recordNetwork(page);
  await openChat(page);
  const files = [...first.fetched.keys()].filter((p) => bundle.test(p));
  expect(files.map((p) => p.split(".").pop()).sort(), `${[...first.fetched.keys()]}`).toEqual([
    "css",
    "js",
    "wasm",
  ]);
  for (const file of files) {
    const headers = first.fetched.get(file)!;
    expect(headers["content-encoding"], file).toBe("br");
    expect(headers["cache-control"], file).toBe("public, max-age=31536000, immutable");
    expect(headers["vary"], file).toContain("accept-encoding");
  }
  expect(first.fetched.get("/")?.["cache-control"]).toBe("no-cache");

  // The second visit, in the same browser: the page is asked for again (and the chat's data,
  // which the page loads from /api/), no file of the site is.
  const second = await recordNetwork(page);
  await openChat(page);
  const again = [...second.fetched.keys()];
  expect(again).toContain("/");
  expect(again.filter((p) => p !== "/" && !p.startsWith("/api/"))).toEqual([]);
  // And the hydrated page works from the cached bundle.
  await expect(page.getByTestId("example-prompt").first()).toBeEnabled();
});

test("the page's pictograms are drawn, not taken from a font", async ({ page }) => {
  await openChat(page);
  // The attach control, the brand mark and the music control carry inline SVG and no text
  // that needs an emoji or CJK font.
  for (const selector of ["label.attach", ".brand-mark", '[data-testid="bgm-control"]']) {
    const control = page.locator(selector).first();
    await expect(control.locator("svg")).toHaveCount(1);
    const text = await control.evaluate((e) => e.textContent ?? "");
    expect(text, selector).not.toMatch(/[\u2190-\u2BFF\u3000-\u30FF\uFF00-\uFFEF\u{1F000}-\u{1FAFF}]/u);
  }
});

/** The wasm files a page fetched, by path. */
function wasmFetched(page: Page): string[] {
  const fetched: string[] = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.endsWith(".wasm")) fetched.push(path);
  });
  return fetched;
}

test("the chat page loads only the chat's code; the inbox, people and audit pages load theirs", async ({ page }) => {
  // The release build is split (`cargo leptos build --release --split`, ADR 0030): the main
  // module is the chat, each other page has a part of its own, loaded on that page only.
  const pkg = readdirSync(join(__dirname, "..", "..", "target", "site", "pkg"));
  expect(pkg.some((n) => n.startsWith("split_")), "build the site with `cargo leptos build --release --split`").toBe(true);
  const fetched = wasmFetched(page);
  await startChat(page, "sse");
  // A conversation, rendered by the messages' part (fetched ahead once the page works).
  await send(page, "hello");
  await expectTurnFinished(page);
  expect(fetched.filter((p) => p.includes("/split_messages_")), `${fetched}`).toHaveLength(1);
  expect(fetched.filter((p) => /\/countersign\.[A-Za-z0-9_-]+\.wasm$/.test(p)), `${fetched}`).toHaveLength(1);
  for (const other of ["inbox_page", "people_page", "audit_page", "grants_panel", "websocket"]) {
    expect(fetched.filter((p) => p.includes(`/split_${other}_`)), `${fetched}`).toEqual([]);
  }
  // The grants panel's part comes when the panel is first opened; BIDI's when BIDI is chosen.
  await page.getByTestId("grants-toggle").click();
  await expect(page.getByTestId("grants-panel")).toBeVisible();
  expect(fetched.filter((p) => p.includes("/split_grants_panel_")), `${fetched}`).toHaveLength(1);
  await page.getByTestId("grants-panel-close").click();
  await setMode(page, "bidi");
  expect(fetched.filter((p) => p.includes("/split_websocket_")), `${fetched}`).toHaveLength(1);
  await setMode(page, "sse");

  // Each other page fetches its own part, and hydrates with it.
  await page.goto("/approvals");
  await expect.poll(() => fetched.some((p) => p.includes("/split_inbox_page_"))).toBe(true);
  await expect(page.getByTestId("inbox")).not.toContainText("Loading…");
  await page.goto("/people");
  await expect.poll(() => fetched.some((p) => p.includes("/split_people_page_"))).toBe(true);
  await expect(page.getByTestId("people")).not.toContainText("Loading…");
  expect(fetched.filter((p) => p.includes("/split_inbox_page_"))).toHaveLength(1);
});

test("the chat page works before the SSE transport's code has arrived; a message sent meanwhile goes out once it has", async ({
  page,
}) => {
  // The SSE transport is a part of its own (ADR 0030), fetched as the page opens its chat: hold
  // it back, and the page must still hydrate and take a message, then send it when the part comes.
  const pkg = readdirSync(join(__dirname, "..", "..", "target", "site", "pkg"));
  expect(pkg.some((n) => n.startsWith("split_sse_")), "build the site with `cargo leptos build --release --split`").toBe(true);
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  await page.route(/\/pkg\/split_sse_[^/]*\.wasm$/, async (route) => {
    held += 1;
    await released;
    await route.continue();
  });
  const chatRequests: string[] = [];
  page.on("request", (r) => {
    if (new URL(r.url()).pathname.startsWith("/api/chat")) chatRequests.push(`${r.method()} ${r.url()}`);
  });
  await startChat(page, "sse");
  await expect(page.getByTestId("example-prompt").first()).toBeEnabled();
  await expect.poll(() => held).toBe(1);
  await page.getByTestId("composer-input").fill("hello");
  await page.getByTestId("composer-input").press("Enter");
  await expect(page.locator('[data-testid="message"][data-role="user"]')).toHaveCount(1);
  expect(chatRequests, "nothing can be sent before the transport's code is there").toEqual([]);
  release();
  await expectTurnFinished(page);
  expect(chatRequests.filter((r) => r.startsWith("POST ")), `${chatRequests}`).toHaveLength(1);
});

test("a build without compressed copies is sent compressed, and no TypeScript declarations are served", async ({
  page,
  request,
}) => {
  // scripts/test.sh builds the site without --precompress: the server compresses each file once.
  const pkg = join(__dirname, "..", "..", "target", "site", "pkg");
  const names = readdirSync(pkg);
  expect(names.filter((n) => n.endsWith(".br") || n.endsWith(".gz")), "the build wrote no compressed copies").toEqual([]);
  const bundle = names.filter((n) => /\.(wasm|js|css)$/.test(n));
  for (const name of bundle) {
    const response = await request.get(`/pkg/${name}`, { headers: { "Accept-Encoding": "br" } });
    expect(response.status(), name).toBe(200);
    // Files under 1 KiB (the smallest shared chunks of a split wasm) go out as they are: the
    // headers would cost more than compression saves.
    const small = statSync(join(pkg, name)).size < 1024;
    expect(response.headers()["content-encoding"], name).toBe(small ? undefined : "br");
    expect(response.headers()["cache-control"], name).toBe("public, max-age=31536000, immutable");
  }
  for (const main of ["wasm", "js", "css"]) {
    expect(bundle.some((n) => n.startsWith("countersign.") && n.endsWith(`.${main}`)), main).toBe(true);
  }
  const declarations = names.filter((n) => n.endsWith(".ts"));
  expect(declarations.length, "wasm-bindgen writes TypeScript declarations next to the bundle").toBeGreaterThan(0);
  for (const name of declarations) {
    expect((await request.get(`/pkg/${name}`)).status(), name).toBe(404);
  }
  // And the page hydrates from what was sent.
  await openChat(page);
});
