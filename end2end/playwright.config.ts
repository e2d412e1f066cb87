import { defineConfig } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Debian's Chromium (apt-get install chromium). Playwright never downloads a browser here.
const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

// Either test a server that is already running (BASE_URL=http://host:port, and optionally
// COUNTERSIGN_E2E_EXPIRY_URL for a second one with a short approval timeout), or let Playwright
// start the server binary (COUNTERSIGN_BIN, else the release build's) on free ports, wait for
// /healthz, and stop them afterwards (also when a test fails). scripts/test.sh runs the test
// build's binary with the release site (LEPTOS_HASH_FILE_NAME says where its hash.txt is). The ports are chosen once, in the main process, and inherited by the
// workers through the environment.
function freePort(): string {
  const script =
    "const s=require('net').createServer();" +
    "s.listen(0,'127.0.0.1',()=>{process.stdout.write(String(s.address().port));s.close();});";
  return execFileSync(process.execPath, ["-e", script]).toString().trim();
}
const external = process.env.BASE_URL;
if (!external) {
  if (!process.env.COUNTERSIGN_E2E_PORT) {
    process.env.COUNTERSIGN_E2E_PORT = freePort();
  }
  if (!process.env.COUNTERSIGN_E2E_EXPIRY_PORT) {
    let port = freePort();
    while (port === process.env.COUNTERSIGN_E2E_PORT) port = freePort();
    process.env.COUNTERSIGN_E2E_EXPIRY_PORT = port;
  }
  if (!process.env.COUNTERSIGN_E2E_HOSTILE_PORT) {
    let port = freePort();
    while (port === process.env.COUNTERSIGN_E2E_PORT || port === process.env.COUNTERSIGN_E2E_EXPIRY_PORT) {
      port = freePort();
    }
    process.env.COUNTERSIGN_E2E_HOSTILE_PORT = port;
  }
  // The fourth server (tests/seed-ui.spec.ts): the original system's frontend, copied, against
  // the seed routes /stream and /live.
  if (!process.env.COUNTERSIGN_E2E_SEED_PORT) {
    const taken = [
      process.env.COUNTERSIGN_E2E_PORT,
      process.env.COUNTERSIGN_E2E_EXPIRY_PORT,
      process.env.COUNTERSIGN_E2E_HOSTILE_PORT,
    ];
    let port = freePort();
    while (taken.includes(port)) port = freePort();
    process.env.COUNTERSIGN_E2E_SEED_PORT = port;
  }
  // The fifth server (tests/mcp.spec.ts): a real MCP server's tools under the gate.
  if (!process.env.COUNTERSIGN_E2E_MCP_PORT) {
    const taken = [
      process.env.COUNTERSIGN_E2E_PORT,
      process.env.COUNTERSIGN_E2E_EXPIRY_PORT,
      process.env.COUNTERSIGN_E2E_HOSTILE_PORT,
      process.env.COUNTERSIGN_E2E_SEED_PORT,
    ];
    let port = freePort();
    while (taken.includes(port)) port = freePort();
    process.env.COUNTERSIGN_E2E_MCP_PORT = port;
  }
  process.env.COUNTERSIGN_E2E_SEED_URL = `http://127.0.0.1:${process.env.COUNTERSIGN_E2E_SEED_PORT}`;
  // Read by tests/chat.ts (the expiry test); set here so that the workers inherit it.
  process.env.COUNTERSIGN_E2E_EXPIRY_URL = `http://127.0.0.1:${process.env.COUNTERSIGN_E2E_EXPIRY_PORT}`;
  process.env.COUNTERSIGN_E2E_HOSTILE_URL = `http://127.0.0.1:${process.env.COUNTERSIGN_E2E_HOSTILE_PORT}`;
}

// The fifth server's MCP servers: @modelcontextprotocol/server-filesystem from npm (installed in
// tests/mcp-servers by scripts/setup.sh), over stdio, allowed one directory. Its "model" replays
// end2end/fixtures/mcp-model.jsonl, which calls files__write_file with an absolute path in that
// directory, so the directory is fixed (the recording names it). Created here, never emptied here
// (this file is also loaded by the workers while the servers run): the spec empties it per test.
const mcpBase = "/tmp/countersign-e2e-mcp";
const mcpServerJs = join(
  __dirname,
  "..",
  "tests/mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
);
// And @modelcontextprotocol/server-everything, whose trigger-elicitation-request asks the person
// a form of questions mid-call (the recording's second turn calls it; it runs without asking).
const everythingJs = join(
  __dirname,
  "..",
  "tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
);
const mcpConfig = join(mcpBase, "mcp.json");
process.env.COUNTERSIGN_E2E_MCP_ROOT = join(mcpBase, "files");
for (const js of [mcpServerJs, everythingJs]) {
  if (!external && !existsSync(js)) {
    throw new Error(`${js} is missing: run scripts/setup.sh (it installs tests/mcp-servers)`);
  }
}
if (!external) {
  mkdirSync(process.env.COUNTERSIGN_E2E_MCP_ROOT, { recursive: true });
  const files = {
    command: process.execPath,
    args: [mcpServerJs, process.env.COUNTERSIGN_E2E_MCP_ROOT],
    trustAnnotations: true,
  };
  const everything = {
    command: process.execPath,
    args: [everythingJs, "stdio"],
    tools: { "trigger-elicitation-request": { approval: "never" } },
  };
  writeFileSync(mcpConfig, JSON.stringify({ mcpServers: { files, everything } }, null, 2) + "\n");
  process.env.COUNTERSIGN_E2E_MCP_URL = `http://127.0.0.1:${process.env.COUNTERSIGN_E2E_MCP_PORT}`;
}

// The third server (tests/security.spec.ts): its "model" replays an answer full of XSS payloads,
// it holds secrets that must never reach a browser, and it is guarded by an API key.
process.env.COUNTERSIGN_E2E_API_KEY ??= "e2e-api-key-7f3a9c";
// A frontend on another origin that the third server allows: tests/edge.spec.ts serves a page on
// this loopback port (a real server, so Chromium sees a loopback page calling a loopback API).
if (!process.env.COUNTERSIGN_E2E_FRONTEND_ORIGIN) {
  let port = freePort();
  while ([process.env.COUNTERSIGN_E2E_PORT, process.env.COUNTERSIGN_E2E_EXPIRY_PORT, process.env.COUNTERSIGN_E2E_HOSTILE_PORT, process.env.COUNTERSIGN_E2E_SEED_PORT, process.env.COUNTERSIGN_E2E_MCP_PORT].includes(port)) {
    port = freePort();
  }
  process.env.COUNTERSIGN_E2E_FRONTEND_ORIGIN = `http://localhost:${port}`;
}
// The seed UI copy (end2end/seed-ui) is served by tests/seed-ui.spec.ts on this origin, on the
// same host as the seed server (127.0.0.1: same site, so the server's sign-in cookie goes with
// the page's WebSocket; see the spec), and the seed server allows it.
process.env.COUNTERSIGN_E2E_SEED_API_KEY ??= "seed-ui-e2e-key-5c2e81";
if (!process.env.COUNTERSIGN_E2E_SEED_UI_ORIGIN) {
  const taken = [
    process.env.COUNTERSIGN_E2E_PORT,
    process.env.COUNTERSIGN_E2E_EXPIRY_PORT,
    process.env.COUNTERSIGN_E2E_HOSTILE_PORT,
    process.env.COUNTERSIGN_E2E_SEED_PORT,
    process.env.COUNTERSIGN_E2E_MCP_PORT,
    new URL(process.env.COUNTERSIGN_E2E_FRONTEND_ORIGIN).port,
  ];
  let port = freePort();
  while (taken.includes(port)) port = freePort();
  process.env.COUNTERSIGN_E2E_SEED_UI_ORIGIN = `http://127.0.0.1:${port}`;
}
process.env.COUNTERSIGN_E2E_GEMINI_KEY ??= "AIzaSy-e2e-provider-secret-4b1d";
const baseURL = external ?? `http://127.0.0.1:${process.env.COUNTERSIGN_E2E_PORT}`;
const serverBin = process.env.COUNTERSIGN_BIN ?? "./target/release/countersign";

// The approval timeout of the second server, in seconds; the expiry test reads it too.
process.env.COUNTERSIGN_E2E_EXPIRY_TIMEOUT_SECS ??= "4";

// Each server gets its own database file, fresh for every run.
function database(url: string): string {
  const file = join(tmpdir(), `countersign-e2e-${new URL(url).port}.db`);
  for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
  return file;
}

function server(url: string, extraEnv: Record<string, string>) {
  return {
    command: serverBin,
    cwd: "..",
    url: `${url}/healthz`,
    reuseExistingServer: false,
    timeout: 60_000,
    stdout: "pipe" as const,
    stderr: "pipe" as const,
    gracefulShutdown: { signal: "SIGTERM" as const, timeout: 5_000 },
    env: {
      LEPTOS_SITE_ROOT: "target/site",
      LEPTOS_SITE_ADDR: new URL(url).host,
      RUST_LOG: process.env.RUST_LOG ?? "warn,countersign=info",
      // The deterministic offline demo model, fast: the tests use its exact prompts. Empty
      // values count as unset, and variables already set win over a developer's ./.env, so no
      // real provider is ever picked up by the browser tests.
      COUNTERSIGN_MODEL: "",
      GEMINI_API_KEY: "",
      GOOGLE_API_KEY: "",
      OPENAI_API_KEY: "",
      OPENAI_BASE_URL: "",
      COUNTERSIGN_DEMO_DELAY_MS: "5",
      COUNTERSIGN_WEATHER: "offline",
      COUNTERSIGN_DB: database(url),
      ...extraEnv,
    },
  };
}

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
    // The documented screenshots (docs/screenshots) are taken at this size, in the light theme.
    viewport: { width: 1280, height: 800 },
    colorScheme: "light",
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
    : [
        server(baseURL, {}),
        // The second server: approvals expire after a few seconds, and examples/policy.cedar
        // decides which calls run, ask or are refused (tests/policy.spec.ts).
        server(process.env.COUNTERSIGN_E2E_EXPIRY_URL!, {
          COUNTERSIGN_APPROVAL_TIMEOUT_SECS: process.env.COUNTERSIGN_E2E_EXPIRY_TIMEOUT_SECS!,
          COUNTERSIGN_POLICY: "examples/policy.cedar",
        }),
        server(process.env.COUNTERSIGN_E2E_HOSTILE_URL!, {
          COUNTERSIGN_MODEL: "replay:end2end/fixtures/hostile-model.jsonl",
          GEMINI_API_KEY: process.env.COUNTERSIGN_E2E_GEMINI_KEY!,
          COUNTERSIGN_API_KEY: process.env.COUNTERSIGN_E2E_API_KEY!,
          COUNTERSIGN_ALLOWED_ORIGINS: process.env.COUNTERSIGN_E2E_FRONTEND_ORIGIN!,
        }),
        // What the seed's frontend needs of a backend: an API key of at least 16 characters
        // (its NEXT_PUBLIC_API_KEY), its page's origin allowed, and the seed's timeouts.
        server(process.env.COUNTERSIGN_E2E_SEED_URL!, {
          COUNTERSIGN_API_KEY: process.env.COUNTERSIGN_E2E_SEED_API_KEY!,
          COUNTERSIGN_ALLOWED_ORIGINS: process.env.COUNTERSIGN_E2E_SEED_UI_ORIGIN!,
          COUNTERSIGN_APPROVAL_TIMEOUT_SECS: "30",
          COUNTERSIGN_BROWSER_TIMEOUT_SECS: "10",
        }),
        // The fifth server (tests/mcp.spec.ts): a real MCP server's tool, called by a replay.
        ...(process.env.COUNTERSIGN_E2E_MCP_URL
          ? [
              server(process.env.COUNTERSIGN_E2E_MCP_URL, {
                COUNTERSIGN_MODEL: "replay:end2end/fixtures/mcp-model.jsonl",
                COUNTERSIGN_MCP_CONFIG: mcpConfig,
              }),
            ]
          : []),
      ],
});
