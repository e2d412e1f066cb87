import { test, expect } from "./fixtures";
import {
  MODES,
  assistantMessages,
  expectAnswer,
  expectCompleted,
  expectTurnFinished,
  lastAssistant,
  pendingApproval,
  recordConnectionStatus,
  send,
  setMode,
  startChat,
  statusHistory,
  toolCards,
  userMessages,
  waitForReloadedApp,
} from "./chat";

const wordCount = (text: string) => text.split(/\s+/).filter(Boolean).length;

for (const mode of MODES) {
  test(`Stop ends a streaming answer and the composer is usable again (${mode})`, async ({
    page,
  }) => {
    await startChat(page, mode);
    await send(page, "/lorem 2000");

    const stop = page.getByTestId("stop");
    const text = lastAssistant(page).getByTestId("assistant-text");
    await expect(stop).toBeVisible();
    await expect.poll(async () => wordCount((await text.allInnerTexts()).join(" "))).toBeGreaterThan(20);
    // Send stays disabled while the turn streams, even with text in the box.
    await page.getByTestId("composer-input").fill("What's the weather in Tokyo?");
    await expect(page.getByTestId("send")).toBeDisabled();

    await stop.click();
    await expect(stop).toBeHidden();
    const atStop = wordCount((await text.allInnerTexts()).join(" "));
    expect(atStop).toBeLessThan(2000);
    // Proving that nothing grows needs a span of time: one second is 200 demo words at 5 ms.
    await page.waitForTimeout(1_000);
    expect(wordCount((await text.allInnerTexts()).join(" "))).toBe(atStop);

    // The composer works again: the next turn gets a full answer.
    await expect(page.getByTestId("send")).toBeEnabled();
    await page.getByTestId("composer-input").press("Enter");
    await expect(assistantMessages(page)).toHaveCount(2);
    await expectAnswer(page, "Tokyo", /18\s?°C/);
    await expectTurnFinished(page);
  });
}

for (const mode of MODES) {
  test(`a message sent right after opening a chat stays shown when the chat's snapshot comes last (${mode})`, async ({
    page,
  }) => {
    await startChat(page, mode);
    await send(page, "What's the weather in Tokyo?");
    await expectAnswer(page, "Tokyo", /18\s?°C/);
    await expectTurnFinished(page);
    // New chat loads nothing: the server does not know the chat yet.
    let fetched = 0;
    await page.route(/\/api\/chats\/[^/?]+$/, (route) => {
      if (route.request().method() === "GET") fetched += 1;
      return route.fallback();
    });
    await page.getByTestId("new-chat").click();
    await expect(page.getByTestId("empty-state")).toBeVisible();
    expect(fetched).toBe(0);
    await page.unrouteAll({ behavior: "wait" });
    // Back to the Tokyo chat from the list: its snapshot is taken at once and delivered only
    // after the next turn has ended, 300 ms late — the order in which the page used to lose what
    // it sent.
    let taken!: () => void;
    const snapshotTaken = new Promise<void>((resolve) => (taken = resolve));
    let deliver!: () => void;
    const delivery = new Promise<void>((resolve) => (deliver = resolve));
    let held = 0;
    await page.route(/\/api\/chats\/[^/?]+$/, async (route) => {
      if (route.request().method() !== "GET" || held > 0) return route.fallback();
      held += 1;
      const response = await route.fetch();
      taken();
      await delivery;
      await new Promise((resolve) => setTimeout(resolve, 300));
      await route.fulfill({ response });
    });
    const list = page.getByTestId("chat-list");
    if (!(await list.isVisible()) && (await page.getByTestId("chat-list-toggle").count()) > 0) {
      await page.getByTestId("chat-list-toggle").click();
    }
    await list.getByTestId("chat-item").filter({ hasText: "Tokyo" }).first().click();
    await snapshotTaken;
    await send(page, "What's the weather in Paris?");
    await expectAnswer(page, "Paris");
    await expectTurnFinished(page);
    const conversation = page.locator("#conversation");
    // The chat is still being loaded: its snapshot comes last.
    await expect(conversation).toHaveAttribute("aria-busy", "true");
    deliver();
    await expect(conversation).toHaveAttribute("aria-busy", "false");
    expect(held).toBe(1);
    // The older snapshot has been applied: the chat's first turn, and what the page sent after
    // it was taken, with its answer, are all shown.
    await expect(userMessages(page)).toHaveCount(2);
    await expect(userMessages(page).nth(0)).toContainText("What's the weather in Tokyo?");
    await expect(userMessages(page).nth(1)).toContainText("What's the weather in Paris?");
    await expect(assistantMessages(page)).toHaveCount(2);
    await expectAnswer(page, "Paris");
  });
}

test("Esc stops a streaming answer like the Stop button (sse)", async ({ page }) => {
  await startChat(page, "sse");
  await send(page, "/lorem 2000");
  const stop = page.getByTestId("stop");
  const text = lastAssistant(page).getByTestId("assistant-text");
  await expect(stop).toBeVisible();
  await expect.poll(async () => wordCount((await text.allInnerTexts()).join(" "))).toBeGreaterThan(20);
  await page.keyboard.press("Escape");
  await expect(stop).toBeHidden();
  expect(wordCount((await text.allInnerTexts()).join(" "))).toBeLessThan(2000);
});

test("switching the mode mid-conversation keeps the conversation, and the mode is remembered", async ({
  page,
}) => {
  await startChat(page, "sse");
  await send(page, "What's the weather in Tokyo?");
  await expectAnswer(page, "Tokyo", /18\s?°C/);
  await expectTurnFinished(page);

  await setMode(page, "bidi");
  await expect(assistantMessages(page)).toHaveCount(1);
  await send(page, "What's the weather in Paris?");
  await expect(assistantMessages(page)).toHaveCount(2);
  await expectAnswer(page, "Paris");
  await expectTurnFinished(page);
  await expect(assistantMessages(page).first().getByTestId("assistant-text")).toContainText("Tokyo");
  await expect(toolCards(page, "get_weather")).toHaveCount(2);

  expect(await page.evaluate(() => localStorage.getItem("countersign.mode"))).toContain("bidi");
  await page.reload();
  await waitForReloadedApp(page);
  await expect(page.getByTestId("mode-bidi")).toHaveAttribute("aria-pressed", "true");
  // The contract names the four states but not whether an idle BIDI page keeps a socket open;
  // this page connects when it has something to send (it shows "Offline" until then). What
  // matters: the conversation came back, and the next message goes over a live socket.
  const status = page.getByTestId("connection-status");
  await expect(status).toHaveText(/^(Connecting|Live|Reconnecting|Offline)$/);
  await expect(assistantMessages(page)).toHaveCount(2);
  await send(page, "What's the weather in Tokyo?");
  await expect(status).toHaveText("Live");
  await expect(assistantMessages(page)).toHaveCount(3);
  await expectAnswer(page, "Tokyo", /18\s?°C/);
  await expectTurnFinished(page);
});

test("BIDI: opening another chat moves to one new socket, and the old one's close does not take it down", async ({
  page,
}) => {
  await startChat(page, "bidi");
  const opened: string[] = [];
  page.on("websocket", (ws) => opened.push(ws.url()));
  await page.getByTestId("new-chat").click();
  await expect(page.getByTestId("empty-state")).toBeVisible();
  await expect(page.getByTestId("connection-status")).toHaveText("Live");
  await send(page, "What's the weather in Tokyo?");
  await expectAnswer(page, "Tokyo", /18\s?°C/);
  await expectTurnFinished(page);
  await expect(page.getByTestId("connection-status")).toHaveText("Live");
  // The new chat's socket carried the turn: no third socket was needed.
  expect(opened).toHaveLength(1);
});

test("BIDI: the socket drops while an approval is pending, reconnects, and the approval still works", async ({
  page,
}) => {
  await startChat(page, "bidi");
  await send(page, "Send $50 to Hanako");
  const card = toolCards(page, "process_payment");
  await pendingApproval(card);

  await recordConnectionStatus(page);
  await page.evaluate(() => (window as any).__countersign.dropSocket());
  // The indicator must go Reconnecting and then Live again (reading the
  // current text alone would pass before the drop is even noticed).
  await expect
    .poll(
      async () => {
        const history = await statusHistory(page);
        const reconnecting = history.findIndex((s) => /Reconnecting/.test(s));
        return reconnecting >= 0 && history.slice(reconnecting + 1).some((s) => /Live/.test(s));
      },
      { message: "connection-status went Reconnecting, then Live" },
    )
    .toBe(true);
  await expect(page.getByTestId("connection-status")).toHaveText(/Live/);

  const approval = await pendingApproval(card);
  await approval.getByTestId("approve").click();
  await expectCompleted(card);
  await expectAnswer(page, "950");
  await expectTurnFinished(page);
});

for (const mode of MODES) {
  test(`after a reload the pending approval is shown again and can be answered (${mode})`, async ({
    page,
  }) => {
    await startChat(page, mode);
    await send(page, "Send $50 to Hanako");
    const card = toolCards(page, "process_payment");
    const before = await pendingApproval(card);
    const approvalId = await before.getAttribute("data-approval-id");

    await page.reload();
    await waitForReloadedApp(page);
    await expect(page.getByTestId(`mode-${mode}`)).toHaveAttribute("aria-pressed", "true");
    if (mode === "bidi") await expect(page.getByTestId("connection-status")).toHaveText(/Live/);
    await expect(page.locator('[data-testid="message"][data-role="user"]')).toContainText(
      "Send $50 to Hanako",
    );
    const after = await pendingApproval(card);
    await expect(after).toHaveAttribute("data-approval-id", approvalId!);
    await expect(after.getByTestId("approval-summary")).toContainText("Pay 50.00 USD to Hanako");

    await after.getByTestId("approve").click();
    await expectCompleted(card);
    await expectAnswer(page, "950");
    await expectTurnFinished(page);
  });
}
