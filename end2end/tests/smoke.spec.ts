import { test as plain } from "@playwright/test";
import { test, expect, openChat } from "./fixtures";

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
  test("typing enables Send, Enter sends and clears the box", async ({ page }, testInfo) => {
    await openChat(page);
    const input = page.getByTestId("composer-input");
    const send = page.getByTestId("send");

    await expect(send).toBeDisabled();
    await input.fill("   ");
    await expect(send).toBeDisabled();
    await input.fill("What's the weather in Tokyo?");
    await expect(send).toBeEnabled();

    await input.press("Enter");
    await expect(input).toHaveValue("");
    await expect(send).toBeDisabled();
    await expect(page.getByTestId("user-message")).toHaveText("What's the weather in Tokyo?");
    // Until the agent runtime lands the page says so plainly; it never fakes an answer.
    await expect(page.getByTestId("agent-not-connected")).toBeVisible();

    await page.screenshot({ path: testInfo.outputPath("chat-light.png"), fullPage: true });
  });

  test("Shift+Enter inserts a newline instead of sending", async ({ page }) => {
    await openChat(page);
    const input = page.getByTestId("composer-input");
    await input.pressSequentially("first line");
    await input.press("Shift+Enter");
    await input.pressSequentially("second line");
    await expect(input).toHaveValue("first line\nsecond line");
    await expect(page.getByTestId("user-message")).toHaveCount(0);
    await page.getByTestId("send").click();
    await expect(page.getByTestId("user-message")).toHaveText("first line\nsecond line");
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
