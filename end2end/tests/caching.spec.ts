import type { CDPSession, Page } from "@playwright/test";
import { test, expect, openChat } from "./fixtures";

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
