import { defineConfig } from "@playwright/test";
import { execFileSync } from "node:child_process";

// Debian's Chromium (apt-get install chromium). Playwright never downloads a browser here.
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

// Either test a server that is already running (BASE_URL=http://host:port), or let Playwright
// start the release binary on a free port, wait for /healthz, and stop it afterwards (also when a
// test fails). The port is chosen once, in the main process, and inherited by the workers.
function freePort(): string {
  const script =
    "const s=require('net').createServer();" +
    "s.listen(0,'127.0.0.1',()=>{process.stdout.write(String(s.address().port));s.close();});";
  return execFileSync(process.execPath, ["-e", script]).toString().trim();
}
const external = process.env.BASE_URL;
if (!external && !process.env.COUNTERSIGN_E2E_PORT) {
  process.env.COUNTERSIGN_E2E_PORT = freePort();
}
const baseURL = external ?? `http://127.0.0.1:${process.env.COUNTERSIGN_E2E_PORT}`;
const serverBin = process.env.COUNTERSIGN_BIN ?? "./target/release/countersign";

export default defineConfig({
  testDir: "./tests",
  outputDir: "./test-results",
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  forbidOnly: !!process.env.CI,
  reporter: [["list"], ["html", { open: "never", outputFolder: "playwright-report" }]],
  use: {
    baseURL,
    headless: true,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: {
      executablePath,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
  projects: [{ name: "chromium", use: { browserName: "chromium" } }],
  webServer: external
    ? undefined
    : {
        command: serverBin,
        cwd: "..",
        url: `${baseURL}/healthz`,
        reuseExistingServer: false,
        timeout: 60_000,
        stdout: "pipe",
        stderr: "pipe",
        gracefulShutdown: { signal: "SIGTERM", timeout: 5_000 },
        env: {
          LEPTOS_SITE_ROOT: "target/site",
          LEPTOS_SITE_ADDR: new URL(baseURL).host,
          RUST_LOG: process.env.RUST_LOG ?? "warn,countersign=info",
        },
      },
});
