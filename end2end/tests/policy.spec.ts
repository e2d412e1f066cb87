// Policies and grants in the browser (issue #22), in both transports: a call a rule runs or
// refuses shows why on its card; an approval remembered as a grant runs the next call without
// asking, with a chip that revokes it; "Not now" leaves a call undecided and "Ask again" puts
// it before the person again (also after it expired). The second test server runs
// examples/policy.cedar (playwright.config.ts); the first has no policy file.
import { test, expect } from "./fixtures";
import {
  EXPIRY_SECS,
  EXPIRY_URL,
  MODES,
  expectAnswer,
  expectCompleted,
  expectTurnFinished,
  pendingApproval,
  send,
  startChat,
  toolCards,
  userMessages,
} from "./chat";

/** Revokes every active grant of the server at `origin` (a grant holds in every chat). */
async function revokeAll(origin: string) {
  const post = (name: string, body: unknown) =>
    fetch(`${origin}/api/fn/${name}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const status = await (await fetch(`${origin}/api/policy`)).json();
  const grants: Array<{ id: string; revokedAtMs?: number }> = status.grants;
  for (const grant of grants) {
    if (grant.revokedAtMs == null) await post("revoke_grant", { id: grant.id });
  }
}

for (const mode of MODES) {
  test.describe(`policies and grants (${mode})`, () => {
    test(`a call a rule runs or refuses says so on its card (${mode})`, async ({ page }) => {
      test.skip(!EXPIRY_URL, "needs the second server (with examples/policy.cedar)");
      await startChat(page, mode, EXPIRY_URL);
      await send(page, "Send $5 to Jack");
      const small = toolCards(page, "process_payment").last();
      await expectCompleted(small);
      const chip = small.getByTestId("ruling-chip");
      await expect(chip).toHaveAttribute("data-ruling", "allowed_by_rule");
      await expect(chip).toHaveText("Ran without asking: rule small-payments");
      await expectAnswer(page, "995");
      await expectTurnFinished(page);

      await send(page, "Send $600 to Jack");
      const big = toolCards(page, "process_payment").last();
      await expect(big).toHaveAttribute("data-state", "denied-by-rule");
      await expect(big.getByTestId("tool-status")).toHaveText("Refused by a rule");
      await expect(big.getByTestId("ruling-chip")).toContainText("Refused by rule payment-limit");
      await expect(big.getByTestId("approval-card")).toHaveCount(0);
      await expectAnswer(page, /policy does not allow/, "500 USD");
    });

    test(`approve and remember: the next payment runs by the grant, until it is revoked (${mode})`, async ({
      page,
      baseURL,
    }) => {
      try {
        await startChat(page, mode);
        await send(page, "Send $50 to Hanako");
        const first = toolCards(page, "process_payment").last();
        const approval = await pendingApproval(first);
        await approval.getByTestId("remember").check();
        await expect(approval.getByTestId("grant-scope")).toHaveValue("budget");
        await approval.getByTestId("grant-amount").fill("100");
        await approval.getByTestId("grant-duration").selectOption("3600");
        await approval.getByTestId("approve").click();
        await expectCompleted(first);
        await expectTurnFinished(page);

        // 40 more fits the 100 USD: it runs without a card, and says which grant let it.
        await send(page, "Send $40 to Taro");
        const second = toolCards(page, "process_payment").last();
        await expectCompleted(second);
        const chip = second.getByTestId("ruling-chip");
        await expect(chip).toHaveAttribute("data-ruling", "allowed_by_grant");
        await expect(chip).toContainText("your grant (Payment up to 100.00 USD in all, in every chat)");
        await expectAnswer(page, "910");
        await expectTurnFinished(page);

        // The Grants panel lists it with what it used.
        await page.getByTestId("grants-toggle").click();
        const listed = page.getByTestId("grants-panel").getByTestId("grant").first();
        await expect(listed).toHaveAttribute("data-state", "active");
        await expect(listed).toContainText("90.00 of 100.00 USD used");
        await page.getByTestId("grants-panel-close").click();

        // Revoked from the chip: the next payment asks again.
        await chip.getByTestId("chip-revoke").click();
        await expect(chip.getByTestId("chip-revoked")).toBeVisible();
        await send(page, "Send $5 to Taro");
        await pendingApproval(toolCards(page, "process_payment").last());
        await page.getByTestId("grants-toggle").click();
        await expect(page.getByTestId("grants-panel").getByTestId("grant").first()).toHaveAttribute(
          "data-state",
          "revoked",
        );
      } finally {
        await revokeAll(baseURL!);
      }
    });

    test(`not now leaves a payment undecided, and ask again brings it back (${mode})`, async ({ page }) => {
      await startChat(page, mode);
      await send(page, "Send $50 to Hanako");
      const card = toolCards(page, "process_payment").last();
      const approval = await pendingApproval(card);
      await approval.getByTestId("dismiss").click();
      await expect(card).toHaveAttribute("data-state", "dismissed");
      await expect(card.getByTestId("tool-status")).toHaveText("Not decided");
      await expectAnswer(page, /haven't decided/);
      await expectTurnFinished(page);

      await card.getByTestId("ask-again").click();
      await expect(userMessages(page).last()).toContainText("Ask me again: Pay 50.00 USD to Hanako");
      const again = toolCards(page, "process_payment").last();
      const second = await pendingApproval(again);
      await expect(second.getByTestId("approval-summary")).toContainText("Pay 50.00 USD to Hanako");
      await second.getByTestId("approve").click();
      await expectCompleted(again);
      await expectAnswer(page, "950");
    });
  });
}

test("an expired payment can be asked again from its card (bidi, short timeout)", async ({ page }) => {
  test.skip(!EXPIRY_URL, "needs COUNTERSIGN_E2E_EXPIRY_URL (a server with a short approval timeout)");
  await startChat(page, "bidi", EXPIRY_URL);
  await send(page, "Send $50 to Hanako");
  const card = toolCards(page, "process_payment").last();
  await pendingApproval(card);
  await expect(card).toHaveAttribute("data-state", "expired", { timeout: (EXPIRY_SECS + 10) * 1000 });
  await expectTurnFinished(page);
  await card.getByTestId("ask-again").click();
  const again = toolCards(page, "process_payment").last();
  const approval = await pendingApproval(again);
  await approval.getByTestId("approve").click();
  await expectCompleted(again);
  await expectAnswer(page, "950");
});

test("a payment in yen shows both amounts on its card (sse)", async ({ page }) => {
  await startChat(page, "sse");
  await send(page, "Send 3000 yen to Kenji");
  const approval = await pendingApproval(toolCards(page, "process_payment").last());
  await expect(approval.getByTestId("approval-summary")).toHaveText("Pay 3,000 JPY (≈ 20.10 USD) to Kenji");
  await approval.getByTestId("approve").click();
  await expectCompleted(toolCards(page, "process_payment").last());
  await expectAnswer(page, "979.9");
});

test("with one local person, a payment that needs two approvers says why it cannot be approved here (sse)", async ({
  page,
}) => {
  test.skip(!EXPIRY_URL, "needs the second server (examples/policy.cedar, no sign-in)");
  await startChat(page, "sse", EXPIRY_URL);
  await send(page, "Send $150 to Jack");
  const card = toolCards(page, "process_payment").last();
  await expect(card.getByTestId("tool-status")).toHaveText("Waiting for approvals");
  const approval = card.getByTestId("approval-card");
  await expect(approval.getByTestId("approval-needs")).toContainText(
    "2 different people with the role approver",
  );
  await expect(approval.getByTestId("approval-why")).toContainText("one local person and no sign-in");
  await expect(approval.getByTestId("approval-why")).toContainText("COUNTERSIGN_SIGN_IN=passkeys");
  await expect(approval.getByTestId("approve")).toBeDisabled();
  // Deny stays possible; left alone, the call expires and nothing runs.
  await expect(approval.getByTestId("deny")).toBeEnabled();
  await expect(card).toHaveAttribute("data-state", "expired", { timeout: (EXPIRY_SECS + 10) * 1000 });
  await expectTurnFinished(page);
});
