import { test as base, expect, type Page } from "@playwright/test";

/**
 * A `page` that fails the test on any page error, console error or HTTP error response, so a
 * broken hydration or a missing asset never passes silently.
 */
export const test = base.extend<{ page: Page }>({
  page: async ({ page }, use) => {
    const problems: string[] = [];
    page.on("pageerror", (e) => problems.push(`page error: ${e}`));
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(`console error: ${m.text()}`);
    });
    page.on("response", (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.url()}`);
    });
    await use(page);
    expect(problems, "the page reported problems").toEqual([]);
  },
});

export { expect };

/** Loads the chat page and waits until the wasm has hydrated it. */
export async function openChat(page: Page) {
  await page.goto("/");
  // The Send button is disabled in the server HTML and only enables through the hydrated
  // reactive graph, so typing until it enables is the proof that hydration happened.
  const input = page.getByTestId("composer-input");
  await expect(async () => {
    await input.fill("");
    await input.pressSequentially("x");
    await expect(page.getByTestId("send")).toBeEnabled({ timeout: 500 });
  }).toPass({ timeout: 15_000 });
  await input.fill("");
}
