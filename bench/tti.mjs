// Time to interactive of Countersign's chat page in headless Chromium (bench/run, scenario 5).
//
// Each load is a cold first visit: a fresh browser context (empty HTTP cache), navigation to
// the page, and two moments recorded inside the page relative to navigation start
// (performance.now()):
//   * hydrated     — the wasm client has run its first effects: `window.__countersign` (the
//                    test hooks src/ui/chat.rs installs after hydration) is assigned;
//   * interactive  — the example-prompt buttons lose the `disabled` attribute the server
//                    rendered (they enable only through the hydrated `ctl.hydrated` signal), so a
//                    click now does something.
// Also reported: response end, DOMContentLoaded, load and first contentful paint.
//
// Usage: node bench/tti.mjs --url http://127.0.0.1:PORT/ [--loads 10] [--chromium /usr/bin/chromium]
// Prints one JSON object.

import { createRequire } from "node:module";

const require = createRequire(new URL("../end2end/package.json", import.meta.url));
const { chromium } = require("playwright");

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const url = arg("url", null);
const loads = Number(arg("loads", "10"));
const executablePath = arg("chromium", process.env.CHROMIUM_PATH ?? "/usr/bin/chromium");
const timeout = Number(arg("timeout-ms", "30000"));
if (!url) {
  console.error("usage: node bench/tti.mjs --url http://127.0.0.1:PORT/ [--loads 10]");
  process.exit(2);
}

// Runs in the page before any of its scripts.
const probe = () => {
  const marks = { hydrated: null, interactive: null };
  window.__bench = marks;
  let hooks;
  Object.defineProperty(window, "__countersign", {
    configurable: true,
    get: () => hooks,
    set: (value) => {
      hooks = value;
      if (marks.hydrated === null) marks.hydrated = performance.now();
      check();
    },
  });
  function check() {
    if (marks.interactive !== null) return;
    const button = document.querySelector('[data-testid="example-prompt"]');
    if (button && !button.disabled) marks.interactive = performance.now();
  }
  new MutationObserver(check).observe(document, {
    subtree: true,
    childList: true,
    attributes: true,
    attributeFilter: ["disabled"],
  });
};

const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
const version = browser.version();
const samples = [];
try {
  for (let i = 0; i < loads; i++) {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.addInitScript(probe);
    await page.goto(url, { waitUntil: "load", timeout });
    await page.waitForFunction(() => window.__bench && window.__bench.interactive !== null, null, {
      timeout,
      polling: 10,
    });
    samples.push(
      await page.evaluate(() => {
        const nav = performance.getEntriesByType("navigation")[0];
        const fcp = performance.getEntriesByName("first-contentful-paint")[0];
        return {
          response_end_ms: nav.responseEnd,
          dom_content_loaded_ms: nav.domContentLoadedEventEnd,
          load_ms: nav.loadEventEnd,
          fcp_ms: fcp ? fcp.startTime : null,
          hydrated_ms: window.__bench.hydrated,
          interactive_ms: window.__bench.interactive,
        };
      }),
    );
    await context.close();
  }
} finally {
  await browser.close();
}

console.log(JSON.stringify({ chromium: version, loads, samples }));
