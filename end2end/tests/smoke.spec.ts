import * as path from "node:path";
import { test as plain } from "@playwright/test";
import { test, expect, openChat } from "./fixtures";
import {
  SCREENSHOTS,
  expectAnswer,
  expectTurnFinished,
  lastAssistant,
  startChat,
  toolCards,
  userMessages,
} from "./chat";

plain.describe("server rendering (JavaScript disabled)", () => {
  plain.use({ javaScriptEnabled: false });

  plain("the chat page is complete HTML before any wasm runs", async ({ page }) => {
    await page.goto("/");
    await plain.expect(page).toHaveTitle("Countersign");
    await plain.expect(page.getByRole("link", { name: "Countersign" })).toBeVisible();
    await plain.expect(page.getByTestId("empty-state")).toBeVisible();
    await plain.expect(page.getByTestId("composer-input")).toBeVisible();
    await plain.expect(page.getByTestId("send")).toBeDisabled();
  });
});

test.describe("hydrated chat page", () => {
  test("typing enables Send, Enter sends and clears the box, the agent answers", async ({
    page,
  }, testInfo) => {
    await openChat(page);
    await page.getByTestId("new-chat").click();
    const input = page.getByTestId("composer-input");
    const send = page.getByTestId("send");

    await expect(send).toBeDisabled();
    await input.fill("   ");
    await expect(send).toBeDisabled();
    await input.fill("What's the weather in Tokyo?");
    await expect(send).toBeEnabled();

    await input.press("Enter");
    await expect(input).toHaveValue("");
    await expect(userMessages(page)).toHaveCount(1);
    await expect(userMessages(page)).toContainText("What's the weather in Tokyo?");
    // A real answer from the agent (the offline demo model), never a placeholder.
    await expectAnswer(page, "Tokyo", /18\s?°C/);
    await expectTurnFinished(page);
    await expect(send).toBeDisabled();

    await page.screenshot({ path: testInfo.outputPath("chat-light.png"), fullPage: true });
  });

  test("Shift+Enter inserts a newline instead of sending", async ({ page }) => {
    await openChat(page);
    await page.getByTestId("new-chat").click();
    const input = page.getByTestId("composer-input");
    await input.pressSequentially("first line");
    await input.press("Shift+Enter");
    await input.pressSequentially("second line");
    await expect(input).toHaveValue("first line\nsecond line");
    await expect(userMessages(page)).toHaveCount(0);
    await page.getByTestId("send").click();
    await expect(userMessages(page)).toHaveCount(1);
    await expect(userMessages(page)).toContainText(/first line\s*second line/);
    // The demo model does not understand it, and says so in words.
    await expect(lastAssistant(page).getByTestId("assistant-text")).not.toHaveCount(0);
    await expectTurnFinished(page);
  });

  test("the empty state offers example prompts, and clicking one sends it", async ({ page }) => {
    await startChat(page, "sse");
    const examples = page.getByTestId("example-prompt");
    await expect(examples.first()).toBeVisible();
    expect(await examples.count()).toBeGreaterThan(1);
    await page.screenshot({ path: path.join(SCREENSHOTS, "empty-state.png") });

    const weather = examples.filter({ hasText: "What's the weather in Tokyo?" });
    const example = (await weather.count()) > 0 ? weather.first() : examples.first();
    const prompt = (await example.innerText()).trim();
    await example.click();
    await expect(page.getByTestId("empty-state")).toBeHidden();
    await expect(userMessages(page)).toHaveCount(1);
    await expect(userMessages(page)).toContainText(prompt);
    await expect(lastAssistant(page)).toBeVisible();
    if (prompt === "What's the weather in Tokyo?") {
      await expectAnswer(page, "Tokyo", /18\s?°C/);
      await expect(toolCards(page, "get_weather")).toHaveCount(1);
    }
  });

  test("dark theme renders", async ({ page }, testInfo) => {
    await page.emulateMedia({ colorScheme: "dark" });
    await openChat(page);
    const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(background).toBe("rgb(17, 19, 24)");
    await page.screenshot({ path: testInfo.outputPath("chat-dark.png"), fullPage: true });
  });

  test("health endpoint answers", async ({ request }) => {
    const response = await request.get("/healthz");
    expect(response.ok()).toBeTruthy();
    expect((await response.json()).status).toBe("ok");
  });
});
