import { test, expect } from "./fixtures";
import { MODES, expectAnswer, expectTurnFinished, startChat, userMessages, waitForReloadedApp } from "./chat";

// A 1×1 transparent PNG.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);

for (const mode of MODES) {
  test(`an attached image is previewed, removable, and sent with the message (${mode})`, async ({ page }) => {
    await startChat(page, mode);
    const input = page.getByTestId("attach-input");
    await input.setInputFiles({ name: "dot.png", mimeType: "image/png", buffer: PNG });
    const preview = page.getByTestId("attachment-preview");
    await expect(preview).toHaveCount(1);
    await expect(preview.locator("img")).toHaveAttribute("src", /^data:image\/png;base64,/);

    await page.getByTestId("attachment-remove").click();
    await expect(preview).toHaveCount(0);
    await expect(page.getByTestId("send")).toBeDisabled();

    await input.setInputFiles({ name: "dot.png", mimeType: "image/png", buffer: PNG });
    await expect(preview).toHaveCount(1);
    await expect(page.getByTestId("send")).toBeEnabled();
    await page.getByTestId("composer-input").fill("What is in this picture?");
    await page.getByTestId("send").click();

    await expect(preview).toHaveCount(0);
    const sent = userMessages(page).last();
    await expect(sent.locator("img.attachment")).toHaveAttribute("src", /^data:image\/png;base64,/);
    // The offline demo model is honest: it cannot look at images.
    await expectAnswer(page, /cannot look at attachments/);
    await expectTurnFinished(page);

    // The server kept the image once and the chat refers to it by URL: after a reload the page
    // loads it from there.
    await page.reload();
    await waitForReloadedApp(page);
    const shown = userMessages(page).last().locator("img.attachment");
    await expect(shown).toHaveAttribute("src", /^\/api\/chats\/[^/]+\/files\/[0-9a-f]{64}$/);
    await expect.poll(() => shown.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(1);
  });
}

test("a file that is not an image, or too large for the live connection, is refused with a reason", async ({ page }) => {
  await startChat(page, "bidi");
  const input = page.getByTestId("attach-input");
  await input.setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hello") });
  await expect(page.getByTestId("error-banner")).toContainText("notes.txt is not an image");
  await input.setInputFiles({ name: "big.png", mimeType: "image/png", buffer: Buffer.alloc(900 * 1024, 1) });
  await expect(page.getByTestId("error-banner")).toContainText("big.png is 900 KB");
  await expect(page.getByTestId("attachment-preview")).toHaveCount(0);
});
