import { test, expect } from "./fixtures";
import {
  MODES,
  expectAnswer,
  expectCompleted,
  expectTurnFinished,
  openRaw,
  pendingApproval,
  send,
  startChat,
  toolCards,
} from "./chat";

const PARIS = { latitude: 48.8566, longitude: 2.3522 };

for (const mode of MODES) {
  test(`get_location with permission granted: the answer names Paris (${mode})`, async ({
    page,
    baseURL,
  }) => {
    await page.context().grantPermissions(["geolocation"], { origin: baseURL });
    await page.context().setGeolocation(PARIS);
    await startChat(page, mode);
    await send(page, "Where am I?");

    const card = toolCards(page, "get_location");
    await expect(card).toHaveCount(1);
    const approval = await pendingApproval(card);
    await expect(approval.getByTestId("approval-summary")).toContainText("Share your location");
    await approval.getByTestId("approve").click();

    await expectCompleted(card);
    const raw = await openRaw(card);
    await expect(raw).toContainText("48.8566");
    await expect(raw).toContainText("2.3522");
    await expect(raw).toContainText('"accuracy"');
    await expect(raw).toContainText(/"city":\s*"Paris"/);
    await expectAnswer(page, "Paris");
    await expectTurnFinished(page);
  });
}

test("get_location with permission refused: the tool fails and the answer says so (sse)", async ({
  page,
}) => {
  // No grant: headless Chromium refuses the permission prompt ("User denied Geolocation").
  await startChat(page, "sse");
  await send(page, "Where am I?");
  const card = toolCards(page, "get_location");
  const approval = await pendingApproval(card);
  await approval.getByTestId("approve").click();

  await expect(card).toHaveAttribute("data-state", "output-error");
  await expect(card.getByTestId("tool-status")).toHaveText(/Failed/);
  await expectAnswer(page, /denied|blocked|unavailable/i);
  await expectTurnFinished(page);
});

test("change_bgm switches the music to track 2 and the control pauses it (sse)", async ({
  page,
}) => {
  await startChat(page, "sse");
  const control = page.getByTestId("bgm-control");
  await expect(control).toHaveAttribute("data-playing", "false");
  await expect(page.getByTestId("bgm-track")).toHaveText("Off");

  await send(page, "Switch the music to track 2");
  const card = toolCards(page, "change_bgm");
  await expectCompleted(card);
  await expect(page.getByTestId("bgm-track")).toHaveText("Track 2");
  await expect(control).toHaveAttribute("data-playing", "true");
  await expectAnswer(page, /track 2/i);
  await expectTurnFinished(page);

  await control.click();
  await expect(control).toHaveAttribute("data-playing", "false");
});
