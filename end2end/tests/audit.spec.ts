import { test, expect } from "./fixtures";
import { startChat, send, toolCards, pendingApproval, expectCompleted, expectTurnFinished } from "./chat";

test("the audit log lists each request, decision and execution, filters them, and exports JSONL", async ({
  page,
  request,
}) => {
  await startChat(page, "bidi");
  const chatId = await page.evaluate(() => {
    const url = new URL(location.href);
    return url.searchParams.get("chat") ?? localStorage.getItem("countersign.chat") ?? "";
  });

  await send(page, "Send $12 to Hanako");
  const paid = toolCards(page, "process_payment").last();
  await (await pendingApproval(paid)).getByTestId("approve").click();
  await expectCompleted(paid);
  await expectTurnFinished(page);

  await send(page, "Send $34 to Bob");
  const denied = toolCards(page, "process_payment").last();
  const approval = await pendingApproval(denied);
  await approval.getByTestId("deny").click();
  await approval.getByTestId("deny-reason").fill("not today");
  await approval.getByTestId("deny-confirm").click();
  await expectTurnFinished(page);

  await page.getByTestId("nav-audit").click();
  await expect(page).toHaveURL(/\/audit$/);
  const rows = page.getByTestId("audit-row");
  // Newest first: the denial, its request, then the payment's execution, approval and request.
  await expect(rows.first()).toHaveAttribute("data-kind", "denied");
  await expect(rows.first()).toContainText("reason: not today");
  await expect(rows.first()).toContainText("recipient: Bob");
  await expect(rows.first()).toContainText(/bidi · 127\.0\.0\.1:\d+/);
  const executed = page.locator('[data-testid="audit-row"][data-kind="executed"]').first();
  await expect(executed).toContainText("recipient: Hanako");
  await expect(executed).toContainText(/result: amount: 12, .*success: true/);

  // Filter to denials only (a plain GET form: the URL says what is shown).
  await page.getByLabel("Event").selectOption("denied");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/kind=denied/);
  await expect(rows).not.toHaveCount(0);
  for (const kind of await rows.evaluateAll((els) => els.map((e) => e.getAttribute("data-kind")))) {
    expect(kind).toBe("denied");
  }

  // The export is the same selection as JSONL.
  const href = await page.getByTestId("audit-export").getAttribute("href");
  expect(href).toContain("kind=denied");
  const response = await request.get(href!);
  expect(response.headers()["content-type"]).toContain("application/x-ndjson");
  const lines = (await response.text()).trim().split("\n").map((l) => JSON.parse(l));
  expect(lines.length).toBeGreaterThan(0);
  expect(lines.every((l) => l.kind === "denied")).toBe(true);
  const bob = lines.find((l) => l.args.recipient === "Bob");
  expect(bob.reason).toBe("not today");
  expect(bob.args_digest).toMatch(/^[0-9a-f]{64}$/);
  if (chatId) expect(lines.some((l) => l.session_id === chatId)).toBe(true);
});
