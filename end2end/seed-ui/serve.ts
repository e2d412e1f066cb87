// Bundles the seed UI copy with esbuild (at test time, into a temporary directory) and serves it
// from a real HTTP server on loopback: Chromium's Local Network Access would block a page that
// Playwright routes from calling a loopback API, a real loopback page may (as in edge.spec.ts).

import { build } from "esbuild";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

const HERE = __dirname;

export interface SeedUi {
  /** The page's origin, e.g. http://127.0.0.1:41234. */
  origin: string;
  close(): Promise<void>;
}

/** Bundles `src/main.ts` (with the real `ai` package) into a fresh temporary directory. */
export async function bundleSeedUi(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "countersign-seed-ui-"));
  await build({
    entryPoints: [join(HERE, "src", "main.ts")],
    outfile: join(dir, "app.js"),
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "chrome120",
    sourcemap: "inline",
    define: { "process.env.NODE_ENV": '"production"' },
    logLevel: "warning",
  });
  writeFileSync(join(dir, "index.html"), readFileSync(join(HERE, "index.html")));
  return dir;
}

/** Serves `dir` (index.html and app.js) on `host:port` until close(). */
export async function serveSeedUi(dir: string, host: string, port: number): Promise<SeedUi> {
  const files: Record<string, [string, string]> = {
    "/": ["index.html", "text/html; charset=utf-8"],
    "/index.html": ["index.html", "text/html; charset=utf-8"],
    "/app.js": ["app.js", "text/javascript; charset=utf-8"],
  };
  const server: Server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://x").pathname;
    const file = files[path];
    if (!file) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "content-type": file[1], "cache-control": "no-store" });
    response.end(readFileSync(join(dir, file[0])));
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return {
    origin: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
