import type { Page } from "@playwright/test";
import { test, expect, waitForHydration } from "./fixtures";
import { MODES, setMode, send, lastAssistant } from "./chat";

// The third test server: guarded by an API key, holding a provider key it must never reveal, and
// "answering" every message with a recorded reply full of XSS payloads (fixtures/hostile-model.jsonl).
const HOSTILE_URL = process.env.COUNTERSIGN_E2E_HOSTILE_URL!;
const API_KEY = process.env.COUNTERSIGN_E2E_API_KEY!;
const PROVIDER_KEY = process.env.COUNTERSIGN_E2E_GEMINI_KEY!;

async function signIn(page: Page, next = "/") {
  await page.goto(new URL(next, HOSTILE_URL).toString());
  await expect(page).toHaveURL(/\/signin\?next=/);
  await page.getByLabel("Key").fill(API_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(new URL(next, HOSTILE_URL).toString());
}

test.describe("a server guarded by an API key", () => {
  // (A tuple, because Playwright reads a bare two-element array as [value, options].)
  test.use({ expectedProblems: [[/HTTP 401 .*\/signin/, /status of 401/], { option: true }] as any });

  test("a wrong key is refused with a message, the right one signs in", async ({ page }) => {
    await page.goto(new URL("/", HOSTILE_URL).toString());
    await expect(page).toHaveURL(/\/signin\?next=%2F|\/signin\?next=\//);
    await page.getByLabel("Key").fill("not-the-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByRole("alert")).toHaveText(/not right/);
    await page.getByLabel("Key").fill(API_KEY);
    await page.getByRole("button", { name: "Sign in" }).click();
    await waitForHydration(page);
    await expect(page.getByTestId("composer-input")).toBeVisible();
  });
});

for (const mode of MODES) {
  test(`model output with scripts, javascript: links and event handlers runs nothing (${mode})`, async ({
    page,
  }) => {
    const dialogs: string[] = [];
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await signIn(page);
    await waitForHydration(page);
    await page.getByTestId("new-chat").click();
    await setMode(page, mode);
    await send(page, "Tell me something");
    const answer = lastAssistant(page);
    await expect(answer).toContainText("End of the hostile answer.");
    await expect(page.getByTestId("stop")).toBeHidden();

    // Ordinary Markdown after them still becomes the elements it means (after hydration and
    // while streaming, every element kind the renderer has).
    await expect(answer.locator("h4")).toHaveText("Ordinary Markdown");
    await expect(answer.locator("strong")).toHaveText("bold");
    await expect(answer.locator("em")).toHaveText("italic");
    await expect(answer.locator("del")).toHaveText("gone");
    await expect(answer.locator("p > code")).toHaveText("inline code");
    await expect(answer.locator("ul > li")).toHaveText(["first item", "second item"]);
    await expect(answer.locator("ol[start='3'] > li")).toHaveText(["third", "fourth"]);
    await expect(answer.locator("blockquote")).toContainText("quoted");
    await expect(answer.locator("table th")).toHaveText(["city", "temp"]);
    await expect(answer.locator("table td")).toHaveText(["Tokyo", "18"]);
    await expect(answer.locator(".code-block pre code")).toHaveText("fn main() {}");
    await expect(answer.locator(".code-lang")).toHaveText("rust");

    // The payloads are shown as the text they are …
    await expect(answer).toContainText("<script>window.__xss = 'script'</script>");
    await expect(answer).toContainText("an HTML block");
    // … and none of them became an element or ran.
    await answer.getByText("click me").hover();
    await answer.getByText("click me").click({ force: true });
    await answer.getByText("an HTML block").click({ force: true });
    expect(await page.evaluate(() => (window as any).__xss)).toBeUndefined();
    expect(dialogs).toEqual([]);
    const dangerous = await answer.evaluate((el) => ({
      scripts: el.querySelectorAll("script").length,
      iframes: el.querySelectorAll("iframe, object, embed, svg").length,
      handlers: [...el.querySelectorAll("*")].filter((e) =>
        [...e.attributes].some((a) => a.name.startsWith("on")),
      ).length,
      badUrls: [...el.querySelectorAll("[href], [src]")]
        .map((e) => e.getAttribute("href") ?? e.getAttribute("src") ?? "")
        .filter((u) => /^\s*(javascript|data|vbscript):/i.test(u)),
    }));
    expect(dangerous).toEqual({ scripts: 0, iframes: 0, handlers: 0, badUrls: [] });
  });
}

test("no secret reaches the browser: not in the HTML, the page data it fetches, or the wasm/JS bundle", async ({
  page,
}) => {
  await signIn(page);
  await waitForHydration(page);
  const secrets = [API_KEY, PROVIDER_KEY];

  const fetched: { url: string; body: string }[] = [];
  page.on("response", async (r) => {
    try {
      fetched.push({ url: r.url(), body: (await r.body()).toString("latin1") });
    } catch {
      /* redirects and aborted requests have no body */
    }
  });
  await page.reload();
  await waitForHydration(page);
  await page.getByTestId("new-chat").click();
  await send(page, "hello");
  await expect(lastAssistant(page)).toContainText("End of the hostile answer.");
  await expect(page.getByTestId("stop")).toBeHidden();

  const html = await page.content();
  const cookies = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
  const storage = await page.evaluate(() => JSON.stringify({ ...localStorage }));
  const urls = fetched.map((f) => f.url);
  expect(urls.some((u) => u.endsWith(".wasm")), urls.join("\n")).toBe(true);
  expect(urls.some((u) => /\/pkg\/.*\.js$/.test(u)), urls.join("\n")).toBe(true);
  for (const secret of secrets) {
    expect(html).not.toContain(secret);
    expect(cookies).not.toContain(secret);
    expect(storage).not.toContain(secret);
    for (const { url, body } of fetched) {
      expect(body.includes(secret), `${secret.slice(0, 6)}… found in ${url}`).toBe(false);
    }
  }
});
