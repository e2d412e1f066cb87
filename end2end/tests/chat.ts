// Helpers that drive the chat page through its UI contract (data-testid attributes).
import * as path from "node:path";
import type { Locator, Page } from "@playwright/test";
import { expect, openChat } from "./fixtures";

export type Mode = "sse" | "bidi";
export const MODES: Mode[] = ["sse", "bidi"];

/**
 * Where the documented screenshots go: the repository's docs/screenshots when
 * COUNTERSIGN_UPDATE_SCREENSHOTS=1 (so the README's pictures are refreshed on purpose), otherwise
 * test-results/screenshots (so an ordinary test run leaves the work tree clean).
 */
export const SCREENSHOTS = process.env.COUNTERSIGN_UPDATE_SCREENSHOTS
  ? path.resolve(__dirname, "..", "..", "docs", "screenshots")
  : path.resolve(__dirname, "..", "test-results", "screenshots");

/** The second test server, whose approvals expire after a few seconds (playwright.config.ts). */
export const EXPIRY_URL = process.env.COUNTERSIGN_E2E_EXPIRY_URL;
export const EXPIRY_SECS = Number(process.env.COUNTERSIGN_E2E_EXPIRY_TIMEOUT_SECS ?? "4");

/**
 * Waits until the page holds its messages part (a split build's `split_messages_*` wasm, which
 * draws every message and card; the page fetches it ahead as soon as it works). A build that is
 * not split has no such part and passes at once.
 */
export async function messagesPartLoaded(page: Page) {
  await expect
    .poll(() =>
      page.evaluate(() => {
        const names = performance.getEntriesByType("resource").map((e) => e.name);
        return !names.some((n) => n.includes("/__wasm_split")) || names.some((n) => n.includes("/split_messages_"));
      }),
    )
    .toBe(true);
}

/** Switches the transport with the mode buttons and waits until it is usable. */
export async function setMode(page: Page, mode: Mode) {
  const other: Mode = mode === "sse" ? "bidi" : "sse";
  await page.getByTestId(`mode-${mode}`).click();
  await expect(page.getByTestId(`mode-${mode}`)).toHaveAttribute("aria-pressed", "true");
  await expect(page.getByTestId(`mode-${other}`)).toHaveAttribute("aria-pressed", "false");
  if (mode === "bidi") {
    await expect(page.getByTestId("connection-status")).toHaveText(/Live/);
  }
}

/** Opens the chat page, starts a fresh chat and selects `mode`. */
export async function startChat(page: Page, mode: Mode, origin?: string) {
  await openChat(page, origin);
  await page.getByTestId("new-chat").click();
  await expect(page.getByTestId("message")).toHaveCount(0);
  await expect(page.getByTestId("empty-state")).toBeVisible();
  await setMode(page, mode);
}

export const messages = (page: Page) => page.getByTestId("message");
export const userMessages = (page: Page) => page.locator('[data-testid="message"][data-role="user"]');
export const assistantMessages = (page: Page) =>
  page.locator('[data-testid="message"][data-role="assistant"]');
export const lastAssistant = (page: Page) => assistantMessages(page).last();

/** Tool cards of the conversation, optionally of one tool only. */
export function toolCards(page: Page, tool?: string): Locator {
  return page.locator(
    tool ? `[data-testid="tool-card"][data-tool="${tool}"]` : '[data-testid="tool-card"]',
  );
}

/** Types `text` into the composer, sends it with Enter and waits for the user's bubble. */
export async function send(page: Page, text: string) {
  const input = page.getByTestId("composer-input");
  await input.fill(text);
  await expect(page.getByTestId("send")).toBeEnabled();
  await input.press("Enter");
  await expect(input).toHaveValue("");
  await expect(userMessages(page).last()).toContainText(text);
}

/**
 * The words of the assistant's answers (every `assistant-text` of the conversation, or of one
 * message), so that hidden raw JSON or approval summaries never satisfy an expectation.
 */
async function answerText(scope: Locator): Promise<string> {
  return (await scope.getByTestId("assistant-text").allInnerTexts()).join("\n");
}

/** Waits until the last assistant message's text matches every pattern, in any order. */
export async function expectAnswer(page: Page, ...patterns: (string | RegExp)[]) {
  for (const pattern of patterns) {
    const poll = expect.poll(() => answerText(lastAssistant(page)), {
      message: `the assistant's answer should contain ${pattern}`,
    });
    if (typeof pattern === "string") await poll.toContain(pattern);
    else await poll.toMatch(pattern);
  }
}

/** The turn is over: Stop is gone and the last assistant message has its usage footer. */
export async function expectTurnFinished(page: Page) {
  await expect(page.getByTestId("stop")).toBeHidden();
  await expect(lastAssistant(page).getByTestId("usage")).toBeVisible();
}

/** Waits for one pending approval card inside `card` and returns it. */
export async function pendingApproval(card: Locator): Promise<Locator> {
  await expect(card).toHaveAttribute("data-state", "approval-requested");
  await expect(card.getByTestId("tool-status")).toHaveText(/Waiting for your approval/);
  const approval = card.getByTestId("approval-card");
  await expect(approval).toBeVisible();
  await expect(approval).toHaveAttribute("data-approval-id", /.+/);
  await expect(approval.getByTestId("approve")).toBeVisible();
  await expect(approval.getByTestId("deny")).toBeVisible();
  await expect(approval.getByTestId("edit")).toBeVisible();
  return approval;
}

/** A tool card that finished successfully. */
export async function expectCompleted(card: Locator) {
  await expect(card).toHaveAttribute("data-state", "output-available");
  await expect(card.getByTestId("tool-status")).toHaveText(/Completed/);
  await expect(card.getByTestId("approval-card")).toHaveCount(0);
}

/** Opens the raw JSON of a tool card and returns its locator. */
export async function openRaw(card: Locator): Promise<Locator> {
  const raw = card.getByTestId("tool-raw");
  if (!(await raw.isVisible())) await card.getByTestId("tool-raw-toggle").click();
  await expect(raw).toBeVisible();
  return raw;
}

/** Waits until the page has hydrated after a reload, even if Send stays disabled there. */
export async function waitForReloadedApp(page: Page) {
  const input = page.getByTestId("composer-input");
  await expect(async () => {
    const hooks = await page.evaluate(() => typeof (window as any).__countersign === "object");
    if (!hooks) {
      await input.fill("");
      await input.pressSequentially("x");
      await expect(page.getByTestId("send")).toBeEnabled({ timeout: 500 });
    }
  }).toPass({ timeout: 15_000 });
  await input.fill("");
}

/**
 * Records every text `connection-status` shows from now on (a reconnect can pass through
 * "Reconnecting" faster than an assertion polls). Read it back with `statusHistory`.
 */
export async function recordConnectionStatus(page: Page) {
  await page.evaluate(() => {
    const w = window as any;
    w.__e2eStatus = [] as string[];
    const read = () => {
      const el = document.querySelector('[data-testid="connection-status"]');
      const text = el?.textContent?.trim() ?? "";
      const seen: string[] = w.__e2eStatus;
      if (text && seen[seen.length - 1] !== text) seen.push(text);
    };
    read();
    w.__e2eStatusObserver = new MutationObserver(read);
    w.__e2eStatusObserver.observe(document.body, {
      subtree: true,
      childList: true,
      characterData: true,
      attributes: true,
    });
  });
}

export async function statusHistory(page: Page): Promise<string[]> {
  return page.evaluate(() => (window as any).__e2eStatus as string[]);
}

/** Waits until the text of all assistant messages together matches every pattern. */
export async function expectConversationAnswer(page: Page, ...patterns: (string | RegExp)[]) {
  for (const pattern of patterns) {
    const poll = expect.poll(() => answerText(page.locator('[data-testid="message"][data-role="assistant"]')), {
      message: `the assistant's answers should contain ${pattern}`,
    });
    if (typeof pattern === "string") await poll.toContain(pattern);
    else await poll.toMatch(pattern);
  }
}

/** The current text of the last assistant message's answer (for negative checks). */
export async function lastAnswerText(page: Page): Promise<string> {
  return answerText(lastAssistant(page));
}
