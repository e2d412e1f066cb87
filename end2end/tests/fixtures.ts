import { test as base, expect, type Page } from "@playwright/test";

type Fixtures = {
  page: Page;
  /**
   * Problems this test provokes on purpose (a network cut, a refused permission). Each pattern
   * lets matching console errors / failed responses through; everything else still fails.
   */
  expectedProblems: RegExp[];
};

/**
 * A `page` that fails the test on any page error, console error or HTTP error response, so a
 * broken hydration or a missing asset never passes silently.
 */
export const test = base.extend<Fixtures>({
  expectedProblems: [[], { option: true }],
  page: async ({ page, expectedProblems }, use) => {
    const problems: string[] = [];
    const report = (problem: string) => {
      if (!expectedProblems.some((pattern) => pattern.test(problem))) problems.push(problem);
    };
    page.on("pageerror", (e) => report(`page error: ${e}`));
    page.on("console", (m) => {
      if (m.type() === "error") report(`console error: ${m.text()}`);
    });
    page.on("response", (r) => {
      if (r.status() >= 400) report(`HTTP ${r.status()} ${r.url()}`);
    });
    await use(page);
    expect(problems, "the page reported problems").toEqual([]);
  },
});

export { expect };

/** Waits until the wasm has hydrated the page that is loaded now. */
export async function waitForHydration(page: Page) {
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

/** Loads the chat page (of `origin`, default: the main test server) and waits for hydration. */
export async function openChat(page: Page, origin?: string) {
  await page.goto(origin ? new URL("/", origin).toString() : "/");
  await waitForHydration(page);
}
