import * as fs from "node:fs";
import { test, expect } from "./fixtures";
import {
  MODES,
  assistantMessages,
  expectAnswer,
  expectCompleted,
  expectTurnFinished,
  openRaw,
  send,
  startChat,
  toolCards,
  userMessages,
} from "./chat";

for (const mode of MODES) {
  test.describe(`weather (${mode})`, () => {
    test(`get_weather runs without approval and the answer gives Tokyo's temperature (${mode})`, async ({
      page,
    }) => {
      await startChat(page, mode);
      await send(page, "What's the weather in Tokyo?");

      const card = toolCards(page, "get_weather");
      await expect(card).toHaveCount(1);
      await expectCompleted(card);
      // A tool without an approval policy never shows an approval card.
      await expect(page.getByTestId("approval-card")).toHaveCount(0);

      await expectAnswer(page, "Tokyo", /18\s?°C/);
      await expectTurnFinished(page);

      const raw = await openRaw(card);
      await expect(raw).toContainText('"location"');
      await expect(raw).toContainText("Tokyo");
      await expect(raw).toContainText("18");
    });
  });
}

test("the chunk log lists every chunk of the turn and downloads them as JSONL", async ({ page }) => {
  await startChat(page, "sse");
  await send(page, "What's the weather in Tokyo?");
  await expectAnswer(page, "Tokyo");
  await expectTurnFinished(page);

  await page.getByTestId("chunk-log-toggle").click();
  const log = page.getByTestId("chunk-log");
  await expect(log).toBeVisible();
  const rows = log.getByTestId("chunk-log-row");
  await expect(rows.first()).toBeVisible();
  expect(await rows.count()).toBeGreaterThan(3);
  await expect(log).toContainText("get_weather");

  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByTestId("chunk-log-download").click(),
  ]);
  expect(download.suggestedFilename()).toMatch(/\.jsonl$/);
  const text = fs.readFileSync(await download.path(), "utf8");
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  expect(lines.length).toBeGreaterThan(3);
  for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
  expect(text).toContain("get_weather");
});

test("New chat starts an empty conversation and the previous one stays in the chat list", async ({
  page,
}) => {
  await startChat(page, "sse");
  await send(page, "What's the weather in Tokyo?");
  await expectAnswer(page, "Tokyo");
  await expectTurnFinished(page);

  await page.getByTestId("new-chat").click();
  await expect(page.getByTestId("message")).toHaveCount(0);
  await expect(page.getByTestId("empty-state")).toBeVisible();

  // The list holds this browser's chats; one of them is the Tokyo conversation. The contract
  // does not say whether the list is always shown; the page folds it behind `chat-list-toggle`.
  const list = page.getByTestId("chat-list");
  if (!(await list.isVisible()) && (await page.getByTestId("chat-list-toggle").count()) > 0) {
    await page.getByTestId("chat-list-toggle").click();
  }
  await expect(list).toBeVisible();
  const items = list.getByTestId("chat-item");
  await expect(items.first()).toBeVisible();
  const count = await items.count();
  let found = false;
  for (let i = 0; i < count && !found; i++) {
    await items.nth(i).click();
    found = await userMessages(page)
      .filter({ hasText: "What's the weather in Tokyo?" })
      .first()
      .waitFor({ timeout: 3_000 })
      .then(() => true)
      .catch(() => false);
  }
  expect(found, "a chat-item opens the earlier Tokyo conversation").toBe(true);
  await expectAnswer(page, "Tokyo", /18\s?°C/);
  await expect(assistantMessages(page)).toHaveCount(1);
});
