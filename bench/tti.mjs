// Time to interactive of a page in headless Chromium (bench/run, scenario "client").
//
// Each sample is one page load in a fresh browser context (empty HTTP cache):
//   * cold — the first visit;
//   * warm — a second visit in the same context two seconds after the first (what a returning
//            person gets: hashed bundle files come from the HTTP cache, with the wasm compiled
//            code Chromium keeps once the first visit's compilation finished; the HTML comes
//            from the server).
// Network conditions are emulated through CDP (`Network.emulateNetworkConditions`): `--latency-ms`
// is added to every response and `--kbps` caps the throughput both ways (0 = loopback, no
// emulation). Two moments are recorded inside the page relative to navigation start
// (performance.now()):
//   * hydrated     — the wasm client has run its first effects: `window.__countersign` (the
//                    test hooks src/ui/chat.rs installs after hydration) is assigned;
//   * interactive  — the example-prompt buttons lose the `disabled` attribute the server
//                    rendered (they enable only through the hydrated `ctl.hydrated` signal), so a
//                    click now does something.
// With `--ready <css selector>` interactive is instead the moment that selector matches an enabled
// element (for another app's page). With `--ready-react <css selector>` (a React page, such as the
// original system's Next.js page) hydrated and interactive are the moment React has hydrated the
// element that selector matches: its event handlers are attached (the element carries React's
// `__reactProps$…` key), so a click does something. Checked every 5 ms (React's hydration changes
// no attribute a MutationObserver could see). Also reported per load: response end, DOMContentLoaded, load,
// first contentful paint, the bytes that crossed the network (CDP `encodedDataLength`, headers
// included) and how many requests went to the network.
//
// With `--waterfall` each sample also lists the page's requests in the order they were sent: the
// file, when it was asked for, when its first and last bytes came (ms from the document's request)
// and its bytes — what shows whether a request waits for another (a chain of round trips) or
// shares the link with the ones the page needs first.
//
// Usage: node bench/tti.mjs --url http://127.0.0.1:PORT/ [--loads 10] [--mode cold|warm]
//                           [--latency-ms 40 --kbps 10000] [--chromium /usr/bin/chromium]
//                           [--ready <css selector> | --ready-react <css selector>] [--waterfall]
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
const mode = arg("mode", "cold");
const latency = Number(arg("latency-ms", "0"));
const kbps = Number(arg("kbps", "0"));
const ready = arg("ready", null);
const readyReact = arg("ready-react", null);
const executablePath = arg("chromium", process.env.CHROMIUM_PATH ?? "/usr/bin/chromium");
const timeout = Number(arg("timeout-ms", "60000"));
const settle = Number(arg("settle-ms", "1000"));
const waterfall = process.argv.includes("--waterfall");
if (!url || !["cold", "warm"].includes(mode)) {
  console.error(
    "usage: node bench/tti.mjs --url http://127.0.0.1:PORT/ [--loads 10] [--mode cold|warm] [--latency-ms N --kbps N]",
  );
  process.exit(2);
}

// Runs in the page before any of its scripts.
const probe = ({ readySelector, reactSelector }) => {
  const marks = { hydrated: null, interactive: null };
  window.__bench = marks;
  if (reactSelector !== null) {
    const timer = setInterval(() => {
      const element = document.querySelector(reactSelector);
      if (element && Object.keys(element).some((key) => key.startsWith("__reactProps$"))) {
        marks.hydrated = marks.interactive = performance.now();
        clearInterval(timer);
      }
    }, 5);
    return;
  }
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
    const selector = readySelector ?? '[data-testid="example-prompt"]';
    const button = document.querySelector(selector);
    if (button && !button.disabled && (readySelector === null || button.isConnected)) {
      marks.interactive = performance.now();
    }
  }
  new MutationObserver(check).observe(document, {
    subtree: true,
    childList: true,
    attributes: true,
  });
};

async function load(context) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  if (latency > 0 || kbps > 0) {
    const bytesPerSecond = kbps > 0 ? (kbps * 1000) / 8 : -1;
    await cdp.send("Network.emulateNetworkConditions", {
      offline: false,
      latency,
      downloadThroughput: bytesPerSecond,
      uploadThroughput: bytesPerSecond,
    });
  }
  let bytes = 0;
  let requests = 0;
  // requestId → { file, sent, first, last, bytes } (CDP timestamps, seconds)
  const sent = new Map();
  cdp.on("Network.requestWillBeSent", (e) => {
    if (waterfall && e.request.url.startsWith("http")) {
      sent.set(e.requestId, { file: new URL(e.request.url).pathname, sent: e.timestamp });
    }
  });
  cdp.on("Network.loadingFinished", (e) => {
    bytes += e.encodedDataLength;
    const r = sent.get(e.requestId);
    if (r) Object.assign(r, { last: e.timestamp, bytes: e.encodedDataLength });
  });
  cdp.on("Network.responseReceived", (e) => {
    if (!e.response.fromDiskCache && !e.response.fromPrefetchCache && !e.response.fromServiceWorker) {
      requests += 1;
    }
    const r = sent.get(e.requestId);
    if (r) r.first = e.timestamp;
  });
  await page.addInitScript(probe, { readySelector: ready, reactSelector: readyReact });
  // A new context makes the browser start its own background pages (the omnibox's WebUI,
  // loaded in another renderer on the same two cores): let that settle first, so the load
  // measures the page and not the browser's start-up.
  await page.goto("about:blank");
  await page.waitForTimeout(settle);
  await page.goto(url, { waitUntil: "load", timeout });
  await page.waitForFunction(() => window.__bench && window.__bench.interactive !== null, null, {
    timeout,
    polling: 10,
  });
  const sample = await page.evaluate(() => {
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
  });
  // Late responses (the favicon) still count: give them a moment.
  await page.waitForTimeout(50 + latency * 2);
  sample.bytes = bytes;
  sample.requests = requests;
  if (waterfall) {
    const rows = [...sent.values()].sort((a, b) => a.sent - b.sent);
    const t0 = rows.length ? rows[0].sent : 0;
    const ms = (t) => (t === undefined ? null : Math.round((t - t0) * 1000));
    sample.waterfall = rows.map((r) => ({
      file: r.file,
      sent_ms: ms(r.sent),
      first_byte_ms: ms(r.first),
      done_ms: ms(r.last),
      bytes: r.bytes ?? null,
    }));
  }
  await page.close();
  return sample;
}

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking"],
});
const version = browser.version();
const samples = [];
try {
  for (let i = 0; i < loads; i++) {
    const context = await browser.newContext();
    if (mode === "warm") {
      await load(context);
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    samples.push(await load(context));
    await context.close();
  }
} finally {
  await browser.close();
}

console.log(JSON.stringify({ chromium: version, loads, mode, latency_ms: latency, kbps, samples }));
