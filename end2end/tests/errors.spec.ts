import { test, expect } from "./fixtures";
import { expectAnswer, expectTurnFinished, send, startChat } from "./chat";

test.describe("errors", () => {
  // Cutting the network makes Chromium log the failed request; that is the point here. Page
  // errors (uncaught exceptions, wasm panics) still fail the test.
  test.use({ expectedProblems: [/^console error:/] });

  test("a network failure shows an actionable error banner, and Retry recovers (sse)", async ({
    page,
  }) => {
    await startChat(page, "sse");
    await page.context().setOffline(true);
    await send(page, "What's the weather in Tokyo?");

    const banner = page.getByTestId("error-banner");
    await expect(banner).toBeVisible();
    await expect(banner).toHaveAttribute("role", "alert");
    expect((await banner.innerText()).trim().length).toBeGreaterThan(10);
    const retry = page.getByTestId("error-retry");
    await expect(retry).toBeVisible();

    await page.context().setOffline(false);
    await retry.click();
    await expect(banner).toBeHidden();
    await expectAnswer(page, "Tokyo", /18\s?°C/);
    await expectTurnFinished(page);
  });
});
