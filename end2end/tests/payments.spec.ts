import * as path from "node:path";
import type { Request } from "@playwright/test";
import { test, expect } from "./fixtures";
import {
  EXPIRY_SECS,
  EXPIRY_URL,
  MODES,
  SCREENSHOTS,
  expectAnswer,
  expectCompleted,
  expectConversationAnswer,
  expectTurnFinished,
  lastAnswerText,
  lastAssistant,
  messagesPartLoaded,
  openRaw,
  pendingApproval,
  send,
  startChat,
  toolCards,
} from "./chat";

for (const mode of MODES) {
  test.describe(`payments (${mode})`, () => {
    test(`approving a payment runs it and the answer gives the new balance (${mode})`, async ({
      page,
    }) => {
      await startChat(page, mode);
      await send(page, "Send $50 to Hanako");

      const card = toolCards(page, "process_payment");
      await expect(card).toHaveCount(1);
      const approval = await pendingApproval(card);
      await expect(approval.getByTestId("approval-summary")).toContainText("Pay 50.00 USD to Hanako");
      await expect(approval.getByTestId("approval-countdown")).toHaveText(
        /Expires in (5:00|4:[0-5]\d)/,
      );
      if (mode === "sse") {
        await page.screenshot({ path: path.join(SCREENSHOTS, "approval-card.png") });
      }

      await approval.getByTestId("approve").click();
      await expectCompleted(card);
      await expectAnswer(page, "Hanako", "950");
      await expectTurnFinished(page);
      if (mode === "sse") {
        await lastAssistant(page).getByTestId("usage").scrollIntoViewIfNeeded();
        await page.screenshot({ path: path.join(SCREENSHOTS, "payment-done.png") });
      }

      const raw = await openRaw(card);
      await expect(raw).toContainText(/"amount":\s*50\b/);
      await expect(raw).toContainText("Hanako");
    });

    test(`denying with a reason: no payment, and the answer quotes the reason (${mode})`, async ({
      page,
    }) => {
      await startChat(page, mode);
      await send(page, "Send $50 to Hanako");
      const card = toolCards(page, "process_payment");
      const approval = await pendingApproval(card);

      await approval.getByTestId("deny").click();
      const reason = approval.getByTestId("deny-reason");
      await expect(reason).toBeVisible();
      await expect(approval.getByTestId("deny-confirm")).toBeVisible();
      await reason.fill("too much");
      await approval.getByTestId("deny-confirm").click();

      await expect(card).toHaveAttribute("data-state", "output-denied");
      await expect(card.getByTestId("tool-status")).toHaveText(/Denied/);
      await expect(card.getByTestId("approval-card")).toHaveCount(0);
      await expectAnswer(page, "too much");
      await expectTurnFinished(page);
      expect(await lastAnswerText(page)).not.toContain("950");
    });

    test(`two payments at once, answered in reverse order (${mode})`, async ({ page }) => {
      await startChat(page, mode);
      await send(page, "Pay Alice 30 dollars and Bob 40 dollars");

      const cards = toolCards(page, "process_payment");
      await expect(cards).toHaveCount(2);
      const first = await pendingApproval(cards.nth(0));
      const second = await pendingApproval(cards.nth(1));
      const firstIsAlice = (await first.getByTestId("approval-summary").innerText()).includes("Alice");
      const [alice, bob] = firstIsAlice ? [cards.nth(0), cards.nth(1)] : [cards.nth(1), cards.nth(0)];
      const aliceApproval = alice.getByTestId("approval-card");
      const bobApproval = bob.getByTestId("approval-card");
      await expect(aliceApproval.getByTestId("approval-summary")).toContainText("Pay 30.00 USD to Alice");
      await expect(bobApproval.getByTestId("approval-summary")).toContainText("Pay 40.00 USD to Bob");
      expect(await first.getAttribute("data-approval-id")).not.toBe(
        await second.getAttribute("data-approval-id"),
      );
      if (mode === "sse") {
        await page.screenshot({ path: path.join(SCREENSHOTS, "parallel-approvals.png") });
      }

      // Bob first: his card is answered, Alice's still waits and can still be answered.
      await bobApproval.getByTestId("approve").click();
      await expect(bob).not.toHaveAttribute("data-state", "approval-requested");
      await expect(bob.getByTestId("approval-card")).toHaveCount(0);
      await expect(alice).toHaveAttribute("data-state", "approval-requested");
      await expect(aliceApproval.getByTestId("approve")).toBeEnabled();

      await aliceApproval.getByTestId("approve").click();
      await expectCompleted(alice);
      await expectCompleted(bob);
      await expectAnswer(page, "Alice", "Bob", "930");
      await expectTurnFinished(page);
    });
  });
}

test("editing the amount: invalid values are refused locally, the edited payment runs (sse)", async ({
  page,
}) => {
  await startChat(page, "sse");
  const posts: Request[] = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (r.method() === "POST" && (path === "/api/chat" || path.startsWith("/api/chat/"))) posts.push(r);
  });
  await send(page, "Send $50 to Hanako");
  const card = toolCards(page, "process_payment");
  const approval = await pendingApproval(card);

  // Cancel leaves the request untouched.
  await approval.getByTestId("edit").click();
  await expect(approval.getByTestId("edit-field-amount")).toBeVisible();
  await expect(approval.getByTestId("edit-field-amount")).toHaveValue(/^50(\.0+)?$/);
  await expect(approval.getByTestId("edit-field-recipient")).toHaveValue("Hanako");
  await approval.getByTestId("edit-cancel").click();
  await expect(approval.getByTestId("edit-field-amount")).toBeHidden();
  await expect(card).toHaveAttribute("data-state", "approval-requested");
  await expect(approval.getByTestId("approve")).toBeVisible();

  // A negative amount violates the schema (exclusiveMinimum 0): an error, and nothing is sent.
  await approval.getByTestId("edit").click();
  const amount = approval.getByTestId("edit-field-amount");
  const sentBefore = posts.length;
  await amount.fill("-5");
  await approval.getByTestId("edit-approve").click();
  await expect(approval.getByTestId("edit-error")).toBeVisible();
  await expect(card).toHaveAttribute("data-state", "approval-requested");
  expect(posts.length, "an invalid edit sends nothing").toBe(sentBefore);

  await amount.fill("20");
  await approval.getByTestId("edit-approve").click();
  await expectCompleted(card);
  const raw = await openRaw(card);
  await expect(raw).toContainText(/"amount":\s*20\b/);
  await expectAnswer(page, "$20", "980");
  await expectTurnFinished(page);
});

test("an unanswered approval expires and the card says Expired (sse, short timeout)", async ({
  page,
}) => {
  test.skip(!EXPIRY_URL, "needs COUNTERSIGN_E2E_EXPIRY_URL (a server with a short approval timeout)");
  await startChat(page, "sse", EXPIRY_URL);
  // The approval's clock starts when the server asks, and its card is drawn by the messages
  // part. A server compresses each file the first time one is asked for (seconds for this part
  // in a debug build, which scripts/test.sh runs), so that wait comes first, not out of the few
  // seconds this server gives an approval.
  await messagesPartLoaded(page);
  await send(page, "Send $50 to Hanako");
  const card = toolCards(page, "process_payment");
  const approval = await pendingApproval(card);
  await expect(approval.getByTestId("approval-countdown")).toHaveText(/Expires in 0:0\d/);

  // The subject of this test is a real timeout: wait for it, with room to spare.
  await expect(card).toHaveAttribute("data-state", "expired", { timeout: (EXPIRY_SECS + 10) * 1000 });
  await expect(card.getByTestId("tool-status")).toHaveText(/Expired/);
  await expect(card.getByTestId("approve")).toHaveCount(0);
  await expectAnswer(page, /expired|timed out/i);
  await expectTurnFinished(page);
  expect(await lastAnswerText(page)).not.toContain("950");
});

test("a sequential chain: the weather first, then a payment approval (sse)", async ({ page }) => {
  await startChat(page, "sse");
  await send(page, "check the weather in Paris, then send Bob $5");

  const weather = toolCards(page, "get_weather");
  const payment = toolCards(page, "process_payment");
  await expectCompleted(weather);
  const approval = await pendingApproval(payment);
  // The weather had finished before the payment was asked for.
  await expect(weather).toHaveAttribute("data-state", "output-available");
  await expect(approval.getByTestId("approval-summary")).toContainText("Pay 5.00 USD to Bob");

  await approval.getByTestId("approve").click();
  await expectCompleted(payment);
  await expectConversationAnswer(page, "Paris", "Bob", "995");
  await expectTurnFinished(page);
});

test("keyboard: a new approval card takes focus and Enter on Approve approves (sse)", async ({
  page,
}) => {
  await startChat(page, "sse");
  await send(page, "Send $50 to Hanako");
  const card = toolCards(page, "process_payment");
  const approval = await pendingApproval(card);

  await expect
    .poll(() => approval.evaluate((el) => el.contains(document.activeElement)), {
      message: "keyboard focus is on the new approval card (or a control inside it)",
    })
    .toBe(true);

  // Reach Approve with the keyboard only: it is focused already, or a few Tabs away.
  const approve = approval.getByTestId("approve");
  for (let i = 0; i < 6; i++) {
    if (await approve.evaluate((el) => el === document.activeElement)) break;
    await page.keyboard.press("Tab");
  }
  await expect(approve).toBeFocused();
  await page.keyboard.press("Enter");

  await expectCompleted(card);
  await expectAnswer(page, "950");
  await expectTurnFinished(page);
});

test("the page sends the server only the new message, however long the chat (sse)", async ({ page }) => {
  // The server keeps the conversation (issue #35): a request costs the same after many turns.
  const bodies: { messages: { role: string }[]; messageId?: string }[] = [];
  page.on("request", (request: Request) => {
    if (request.method() === "POST" && new URL(request.url()).pathname === "/api/chat") {
      bodies.push(request.postDataJSON());
    }
  });
  await startChat(page, "sse");
  await send(page, "Send $5 to Bob");
  let approval = await pendingApproval(toolCards(page, "process_payment"));
  await approval.getByTestId("approve").click();
  await expectCompleted(toolCards(page, "process_payment").first());
  await expectTurnFinished(page);
  await send(page, "Send $7 to Ana");
  approval = await pendingApproval(toolCards(page, "process_payment").nth(1));
  await approval.getByTestId("approve").click();
  await expectCompleted(toolCards(page, "process_payment").nth(1));
  await expectConversationAnswer(page, "988");
  await expectTurnFinished(page);
  // Two messages, two answers: four requests, each with the one message it brings.
  expect(bodies.map((b) => b.messages.map((m) => m.role))).toEqual([
    ["user"],
    ["assistant"],
    ["user"],
    ["assistant"],
  ]);
  expect(bodies[1].messageId).toBeTruthy();
});
