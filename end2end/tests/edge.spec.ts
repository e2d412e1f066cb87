import { createServer, type Server } from "node:http";
import type { Page } from "@playwright/test";
import { test, expect, waitForHydration } from "./fixtures";

// The server guarded by an API key (playwright.config.ts's third server), which allows one other
// origin: FRONTEND, a page this test serves itself (as the original system's Next.js frontend
// runs on its own origin next to its backend).
const HOSTILE_URL = process.env.COUNTERSIGN_E2E_HOSTILE_URL!;
const API_KEY = process.env.COUNTERSIGN_E2E_API_KEY!;
const FRONTEND = process.env.COUNTERSIGN_E2E_FRONTEND_ORIGIN!;
// A second page on loopback that the server does not allow.
const OTHER_SITE = "http://127.0.0.2:" + new URL(FRONTEND).port;

async function signIn(page: Page) {
  await page.goto(new URL("/signin", HOSTILE_URL).toString());
  await page.getByLabel("Key").fill(API_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  await waitForHydration(page);
}

test("signing in sets a session cookie no script can read, and signing out ends that session", async ({
  page,
  context,
}) => {
  await signIn(page);
  const cookies = await context.cookies(HOSTILE_URL);
  const session = cookies.find((c) => c.name === "countersign_session");
  expect(session, JSON.stringify(cookies)).toBeDefined();
  expect(session!.httpOnly).toBe(true);
  expect(session!.sameSite).toBe("Strict");
  expect(session!.path).toBe("/");
  expect(session!.secure).toBe(false); // plain http here; over https: Secure and __Host-
  expect(session!.value).not.toContain(API_KEY);
  expect(session!.expires).toBeGreaterThan(Date.now() / 1000 + 3600);
  expect(await page.evaluate(() => document.cookie)).not.toContain("countersign_session");

  // Signed in: the sign-in page says so, and the app's header offers to sign out.
  await page.goto(new URL("/signin", HOSTILE_URL).toString());
  await expect(page.getByTestId("signed-in")).toBeVisible();
  await page.goto(new URL("/", HOSTILE_URL).toString());
  await waitForHydration(page);
  await page.getByTestId("header-signout").click();
  await expect(page).toHaveURL(/\/signin$/);
  await expect(page.getByLabel("Key")).toBeVisible();
  expect((await context.cookies(HOSTILE_URL)).find((c) => c.name === "countersign_session")).toBeUndefined();

  // The old cookie, put back by hand, is refused: the session is over on the server too.
  await context.addCookies([{ ...session!, sameSite: "Strict" }]);
  const audit = await page.request.get(new URL("/api/audit", HOSTILE_URL).toString());
  expect(audit.status()).toBe(401);
  await page.goto(new URL("/", HOSTILE_URL).toString());
  await expect(page).toHaveURL(/\/signin\?next=/);
});

/** Opens the frontend's page at `origin` (served by the server below). */
async function frontendPage(page: Page, origin: string) {
  await page.goto(`${origin}/`);
}

test.describe("a frontend on another origin", () => {
  // A real HTTP server on loopback for the frontend's page (listening on every loopback
  // address, so 127.0.0.2 serves the same page as another origin).
  let frontend: Server;
  test.beforeAll(async () => {
    frontend = createServer((_, response) => {
      response.writeHead(200, { "content-type": "text/html" });
      response.end("<!DOCTYPE html><html><head><title>A frontend on its own origin</title></head><body>frontend</body></html>");
    });
    await new Promise<void>((resolve) => frontend.listen(Number(new URL(FRONTEND).port), "0.0.0.0", resolve));
  });
  test.afterAll(async () => {
    await new Promise((resolve) => frontend.close(resolve));
  });

  // The refused origin's fetch fails in the browser (CORS), which Chromium reports on the console.
  test.use({
    expectedProblems: [[/CORS policy|Failed to load resource|WebSocket connection/], { option: true }] as any,
  });

  test("uses the API with its key on purpose: a preflight, a streamed turn and a ticketed WebSocket", async ({
    page,
  }) => {
    await frontendPage(page, FRONTEND);
    const result = await page.evaluate(
      async ({ server, key }) => {
        // fetch with the seed's header: the browser asks first (OPTIONS), then streams.
        const response = await fetch(`${server}/stream`, {
          method: "POST",
          headers: { "Content-Type": "application/json", "X-API-Key": key },
          body: JSON.stringify({ id: `frontend-sse-${Date.now()}`, messages: [{ role: "user", content: "Tell me something" }] }),
        });
        const sse = await response.text();
        // A browser WebSocket cannot send the key: it asks for a ticket, then connects with it.
        const ticketResponse = await fetch(`${server}/api/live/ticket`, {
          method: "POST",
          headers: { "X-API-Key": key },
        });
        const { ticket } = await ticketResponse.json();
        const ws = new WebSocket(`${server.replace("http", "ws")}/api/live?ticket=${encodeURIComponent(ticket)}`);
        const frames: string[] = await new Promise((resolve, reject) => {
          const got: string[] = [];
          ws.onopen = () =>
            ws.send(
              JSON.stringify({
                type: "message",
                id: `frontend-${Date.now()}`,
                messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "Tell me something" }] }],
              }),
            );
          ws.onmessage = (e) => {
            got.push(String(e.data));
            if (String(e.data).includes("[DONE]")) {
              ws.close();
              resolve(got);
            }
          };
          ws.onerror = () => reject(new Error("the WebSocket failed"));
          setTimeout(() => reject(new Error("no [DONE] within 15 s")), 15_000);
        });
        // The same ticket again: refused (single use).
        const again = await new Promise((resolve) => {
          const second = new WebSocket(`${server.replace("http", "ws")}/api/live?ticket=${encodeURIComponent(ticket)}`);
          second.onopen = () => resolve("open");
          second.onerror = () => resolve("refused");
        });
        return {
          status: response.status,
          type: response.headers.get("content-type"),
          sse,
          ticketStatus: ticketResponse.status,
          frames,
          again,
        };
      },
      { server: HOSTILE_URL, key: API_KEY },
    );
    expect(result.status).toBe(200);
    expect(result.type).toContain("text/event-stream");
    expect(result.sse).toContain("End of the hostile answer.");
    expect(result.sse.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(result.ticketStatus).toBe(200);
    expect(result.frames.join("")).toContain("End of the hostile answer.");
    expect(result.again).toBe("refused");
  });

  test("another origin gets no CORS answer, so its page cannot read or drive the API", async ({ page }) => {
    await frontendPage(page, OTHER_SITE);
    const outcome = await page.evaluate(
      async ({ server, key }) => {
        try {
          await fetch(`${server}/api/audit`, { headers: { "X-API-Key": key } });
          return "read";
        } catch {
          return "blocked";
        }
      },
      { server: HOSTILE_URL, key: API_KEY },
    );
    expect(outcome).toBe("blocked");
    // Straight to the server (no browser in between), its preflight gets no allow headers.
    const preflight = await page.request.fetch(new URL("/api/chat", HOSTILE_URL).toString(), {
      method: "OPTIONS",
      headers: { Origin: OTHER_SITE, "Access-Control-Request-Method": "POST" },
    });
    expect(preflight.headers()["access-control-allow-origin"]).toBeUndefined();
    const allowed = await page.request.fetch(new URL("/api/chat", HOSTILE_URL).toString(), {
      method: "OPTIONS",
      headers: {
        Origin: FRONTEND,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-api-key",
      },
    });
    expect(allowed.status()).toBe(200);
    expect(allowed.headers()["access-control-allow-origin"]).toBe(FRONTEND);
    expect(allowed.headers()["access-control-allow-headers"]).toContain("x-api-key");
  });
});
