#!/usr/bin/env bash
# Countersign AI SDK conformance suite.
#
# Drives the SSE endpoint (POST /api/chat, GET /api/chat/{id}/stream) with the real AI SDK client
# code — AbstractChat + DefaultChatTransport + sendAutomaticallyWhen, as useChat does — and the
# WebSocket endpoint (GET /api/chat upgraded) with ai@7's AbstractChat + WebSocketChatTransport
# over the npm `ws` package (test/websocket.test.mjs, lib/ws-driver.mjs), from two installs of
# the npm `ai` package: ai@6.0.0 ("ai6", strict chunk schema: any unknown key fails the
# stream) and the latest ai@7 ("ai7"). See lib/driver.mjs for the harness, test/*.test.mjs for
# the scenarios.
#
# Usage:
#   conformance/run.sh                    # build nothing; test ../target/release/countersign
#   COUNTERSIGN_BIN=/path/to/countersign conformance/run.sh
#   conformance/run.sh --test-name-pattern=Pattern   # extra arguments go to `node --test`
#   CS_BASE_URL=http://127.0.0.1:3000 CS_SLOW_BASE_URL=http://127.0.0.1:3001 \
#     node --test test/                   # against servers you started yourself (from conformance/)
#
# What it does: installs the npm packages if node_modules is missing (`npm ci`), picks two free
# ports, starts TWO instances of the release binary from the repo root with
#   LEPTOS_SITE_ADDR=127.0.0.1:<port> LEPTOS_SITE_ROOT=<repo>/target/site COUNTERSIGN_WEATHER=offline
# one with COUNTERSIGN_DEMO_DELAY_MS=0 (CS_BASE_URL, every scenario) and one with
# COUNTERSIGN_DEMO_DELAY_MS=2 (CS_SLOW_BASE_URL, only the resume test, so "/lorem 2000" streams
# long enough to drop the connection mid-stream), waits for GET /healthz to answer 200, runs
# `node --test test/`, and always stops both servers (trap). Exit status = the tests' status.
# COUNTERSIGN_WEATHER=offline keeps get_weather on its built-in table (no outbound traffic);
# COUNTERSIGN_DB=:memory: keeps each run (and the two servers) apart.
# A third instance (CS_MCP_BASE_URL, test/mcp-question.test.mjs) replays fixtures/mcp-question.jsonl
# with @modelcontextprotocol/server-everything (tests/mcp-servers, installed by scripts/setup.sh)
# as its MCP server: a question the server asks mid-call, in a stock client's stream.
# A fourth (CS_POLICY_BASE_URL, test/policy.test.mjs) runs examples/policy.cedar: calls a rule
# runs or refuses, as automatic approvals (v7) or plain results (ai@6.0.0).
# Server logs: conformance/.logs/server-{fast,slow,mcp,policy}.log (tail printed when the tests fail).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
bin="${COUNTERSIGN_BIN:-$repo/target/release/countersign}"
logs="$here/.logs"

if [[ ! -x "$bin" ]]; then
  echo "run.sh: no server binary at $bin (build it with cargo leptos build --release --precompress, or set COUNTERSIGN_BIN)" >&2
  exit 2
fi
command -v node >/dev/null || { echo "run.sh: node is required" >&2; exit 2; }

cd "$here"
if [[ ! -d node_modules/ai6 || ! -d node_modules/ai7 ]]; then
  npm ci --no-audit --no-fund
fi
mkdir -p "$logs"

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    # Graceful shutdown first; force after 5 s.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

wait_healthy() { # name port pid
  local name="$1" port="$2" pid="$3"
  for _ in $(seq 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "run.sh: server '$name' exited during start-up:" >&2
      tail -n 40 "$logs/server-$name.log" >&2
      return 1
    fi
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz" || true)" == 200 ]]; then
      return 0
    fi
    sleep 0.1
  done
  echo "run.sh: server '$name' did not answer GET /healthz with 200 within 30 s" >&2
  tail -n 40 "$logs/server-$name.log" >&2
  return 1
}

fast_port="$(free_port)"
slow_port="$(free_port)"
while [[ "$slow_port" == "$fast_port" ]]; do slow_port="$(free_port)"; done
mcp_port="$(free_port)"
while [[ "$mcp_port" == "$fast_port" || "$mcp_port" == "$slow_port" ]]; do mcp_port="$(free_port)"; done
policy_port="$(free_port)"
while [[ "$policy_port" == "$fast_port" || "$policy_port" == "$slow_port" || "$policy_port" == "$mcp_port" ]]; do
  policy_port="$(free_port)"
done
everything="$repo/tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [[ ! -f "$everything" ]]; then
  echo "run.sh: $everything is missing: run scripts/setup.sh (it installs tests/mcp-servers)" >&2
  exit 2
fi
cat >"$logs/mcp.json" <<JSON
{"mcpServers": {"everything": {"command": "$(command -v node)", "args": ["$everything", "stdio"],
  "tools": {"trigger-elicitation-request": {"approval": "never"}}}}}
JSON

launch() { # name delay port [VAR=value ...]
  local name="$1" delay="$2" port="$3"
  shift 3
  (
    cd "$repo"
    if (($#)); then export "$@"; fi
    LEPTOS_SITE_ADDR="127.0.0.1:$port" \
    LEPTOS_SITE_ROOT="$repo/target/site" \
    COUNTERSIGN_DEMO_DELAY_MS="$delay" \
    COUNTERSIGN_WEATHER=offline \
    COUNTERSIGN_DB=:memory: \
    RUST_LOG="${RUST_LOG:-info}" \
      exec "$bin"
  ) >"$logs/server-$name.log" 2>&1 &
  pids+=("$!")
}
launch fast 0 "$fast_port"
launch slow 2 "$slow_port"
launch mcp 0 "$mcp_port" COUNTERSIGN_MODEL=replay:conformance/fixtures/mcp-question.jsonl \
  COUNTERSIGN_MCP_CONFIG="$logs/mcp.json"
launch policy 0 "$policy_port" COUNTERSIGN_POLICY=examples/policy.cedar
wait_healthy fast "$fast_port" "${pids[0]}"
wait_healthy slow "$slow_port" "${pids[1]}"
wait_healthy mcp "$mcp_port" "${pids[2]}"
wait_healthy policy "$policy_port" "${pids[3]}"

echo "run.sh: $bin on 127.0.0.1:$fast_port (delay 0 ms) and 127.0.0.1:$slow_port (delay 2 ms)"
status=0
CS_BASE_URL="http://127.0.0.1:$fast_port" \
CS_SLOW_BASE_URL="http://127.0.0.1:$slow_port" \
CS_MCP_BASE_URL="http://127.0.0.1:$mcp_port" \
CS_POLICY_BASE_URL="http://127.0.0.1:$policy_port" \
  node --test "$@" test/ || status=$?

if [[ $status -ne 0 ]]; then
  for name in fast slow mcp policy; do
    echo "--- last lines of $logs/server-$name.log" >&2
    tail -n 30 "$logs/server-$name.log" >&2 || true
  done
fi
exit $status
