// The Node baseline of bench/run: what a typical Node backend for AI SDK `useChat` looks like,
// built from the npm `ai` package's own stream helpers, serving the same two endpoints as
// Countersign so one load generator drives both.
//
//   POST /api/chat  (SSE)  body {id, messages, trigger, messageId}
//     * a user message asking to pay ("Send $50 to Hanako") starts a payment: tool-input-start,
//       tool-input-available, tool-approval-request, finish(tool-calls), [DONE]; the pending
//       approval is kept in memory;
//     * the assistant message with the tool part in state `approval-responded` continues it:
//       tool-output-available, then the confirmation text word by word;
//     * any other user message streams the scripted tokens (--script FILE: the same chunk-log
//       JSONL Countersign replays with COUNTERSIGN_MODEL=replay:FILE).
//   GET /api/live   (WebSocket, `ws`)  envelopes {type:"message", id, messages, …} and
//     {type:"tool_result", toolCallId:<approval id>, result:{confirmed}}; every chunk goes out as
//     one `data: {json}\n\n` text frame and `data: [DONE]\n\n` ends a turn, like Countersign. The
//     turn's createUIMessageStream stays open (its execute awaits a promise) while the approval
//     is pending, so the session state lives in the closure, as in a typical Node app.
//   POST /__bench/gc  runs the garbage collector (started with --expose-gc) so the harness reads
//     the RSS of live data only (the conservative choice for the Countersign/Node ratio).
//
// The "model" is an async generator over the scripted tokens, as a provider stream would be:
// one writer.write per token, no artificial delay.
//
// Usage: node [--expose-gc] server.mjs --port 4000 --script tokens.jsonl

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import {
  createUIMessageStream,
  JsonToSseTransformStream,
  pipeUIMessageStreamToResponse,
} from "ai";
import { WebSocketServer } from "ws";

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(arg("port", "4000"));
const host = arg("host", "127.0.0.1");
const scriptPath = arg("script", null);

/** Ids shaped like Countersign's (32 hex digits), so both send the same number of bytes. */
const generateId = () => randomUUID().replaceAll("-", "");

/** The text deltas of the chunk log, in order. */
function readScript(path) {
  if (!path) return ["Hello ", "from ", "the ", "Node ", "baseline."];
  const tokens = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const entry = JSON.parse(line);
    if (entry.direction === "out" && entry.chunk?.type === "text-delta") {
      tokens.push(entry.chunk.delta);
    }
  }
  if (tokens.length === 0) throw new Error(`${path}: no text-delta chunks`);
  return tokens;
}

const script = readScript(scriptPath);

async function* model(tokens) {
  for (const token of tokens) yield token;
}

async function writeText(writer, tokens) {
  const id = `txt_${generateId()}`;
  writer.write({ type: "text-start", id });
  for await (const delta of model(tokens)) {
    writer.write({ type: "text-delta", id, delta });
  }
  writer.write({ type: "text-end", id });
}

// ----- the payment tool and its approval ---------------------------------------------------

const wallets = new Map(); // chat id -> balance (USD)

function wantsPayment(text) {
  const m = /send \$?(\d+(?:\.\d+)?) to (\w+)/i.exec(text);
  return m ? { amount: Number(m[1]), currency: "USD", description: "", recipient: m[2] } : null;
}

function pay(chatId, input) {
  const balance = (wallets.get(chatId) ?? 1000) - input.amount;
  wallets.set(chatId, balance);
  return {
    ...input,
    success: true,
    timestamp: new Date().toISOString(),
    transaction_id: `txn_${generateId()}`,
    wallet_balance: balance,
  };
}

function confirmation(input, output) {
  return [
    "Sent ",
    `$${input.amount} `,
    "to ",
    `${input.recipient} `,
    "(transaction ",
    `${output.transaction_id}). `,
    "Your ",
    "balance ",
    "is ",
    "now ",
    `$${output.wallet_balance}.`,
  ];
}

/** Writes the chunks that ask for the approval (the first half of a payment turn). */
function writeApprovalRequest(writer, messageId, call) {
  writer.write({ type: "start", messageId });
  writer.write({ type: "start-step" });
  writer.write({ type: "tool-input-start", toolCallId: call.toolCallId, toolName: "process_payment" });
  writer.write({
    type: "tool-input-available",
    toolCallId: call.toolCallId,
    toolName: "process_payment",
    input: call.input,
  });
  writer.write({ type: "tool-approval-request", approvalId: call.approvalId, toolCallId: call.toolCallId });
  writer.write({ type: "finish-step" });
}

/** Runs the approved tool and writes its output and the confirmation text. */
async function writeApproved(writer, chatId, call, approved) {
  if (approved) {
    const output = pay(chatId, call.input);
    writer.write({ type: "tool-output-available", toolCallId: call.toolCallId, output });
    writer.write({ type: "start-step" });
    await writeText(writer, confirmation(call.input, output));
  } else {
    writer.write({ type: "tool-output-denied", toolCallId: call.toolCallId });
    writer.write({ type: "start-step" });
    await writeText(writer, ["The ", "payment ", "was ", "not ", "sent."]);
  }
  writer.write({ type: "finish-step" });
  writer.write({ type: "finish", finishReason: "stop" });
}

function newCall(input) {
  return { toolCallId: `call_${generateId()}`, approvalId: `apv_${generateId()}`, input };
}

function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");
}

// ----- SSE: POST /api/chat -----------------------------------------------------------------

const pendingSse = new Map(); // chat id -> {messageId, call}

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function handleChat(res, body) {
  const chatId = body?.id;
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  const last = messages.at(-1);
  if (!chatId || !last) {
    return sendJson(res, 400, { error: { code: "invalid_request", message: "no id or messages" } });
  }

  if (last.role === "assistant") {
    const pending = pendingSse.get(chatId);
    const part = (last.parts ?? []).find(
      (p) => p.state === "approval-responded" && p.approval && p.approval.id === pending?.call.approvalId,
    );
    if (!pending || !part) {
      return sendJson(res, 409, { error: { code: "nothing_to_continue", message: "no pending approval answered" } });
    }
    pendingSse.delete(chatId);
    const stream = createUIMessageStream({
      async execute({ writer }) {
        writer.write({ type: "start", messageId: pending.messageId });
        await writeApproved(writer, chatId, pending.call, part.approval.approved === true);
      },
    });
    return pipeUIMessageStreamToResponse({ response: res, stream });
  }

  const text = textOf(last);
  const payment = wantsPayment(text);
  const messageId = `msg_${generateId()}`;
  if (payment) {
    const call = newCall(payment);
    pendingSse.set(chatId, { messageId, call });
    const stream = createUIMessageStream({
      execute({ writer }) {
        writeApprovalRequest(writer, messageId, call);
        writer.write({ type: "finish", finishReason: "tool-calls" });
      },
    });
    return pipeUIMessageStreamToResponse({ response: res, stream });
  }

  const stream = createUIMessageStream({
    async execute({ writer }) {
      writer.write({ type: "start", messageId });
      writer.write({ type: "start-step" });
      await writeText(writer, script);
      writer.write({ type: "finish-step" });
      writer.write({ type: "finish", finishReason: "stop" });
    },
  });
  return pipeUIMessageStreamToResponse({ response: res, stream });
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url === "/healthz") {
    return sendJson(res, 200, { status: "ok", model: "node baseline", ai: aiVersion });
  }
  if (req.method === "POST" && req.url === "/__bench/gc") {
    if (typeof globalThis.gc === "function") globalThis.gc();
    return sendJson(res, 200, { gc: typeof globalThis.gc === "function" });
  }
  if (req.method === "POST" && req.url === "/api/chat") {
    const parts = [];
    req.on("data", (c) => parts.push(c));
    req.on("end", () => {
      let body;
      try {
        body = JSON.parse(Buffer.concat(parts).toString("utf8"));
      } catch (e) {
        return sendJson(res, 400, { error: { code: "invalid_json", message: String(e) } });
      }
      handleChat(res, body);
    });
    return;
  }
  sendJson(res, 404, { error: { code: "not_found", message: req.url } });
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 125_000;
server.requestTimeout = 0;

// ----- BIDI: GET /api/live -----------------------------------------------------------------

const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });

server.on("upgrade", (req, socket, head) => {
  if (!req.url.startsWith("/api/live")) {
    socket.destroy();
    return;
  }
  wss.handleUpgrade(req, socket, head, (ws) => live(ws));
});

/** One socket = one chat: its pending approvals are resolvers of the open turn's promise. */
function live(ws) {
  const session = { chatId: null, pending: new Map(), messages: [] };

  function error(text) {
    ws.send(`data: ${JSON.stringify({ type: "error", errorText: text })}\n\n`);
  }

  async function runTurn(stream) {
    const reader = stream.pipeThrough(new JsonToSseTransformStream()).getReader();
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      if (ws.readyState !== ws.OPEN) {
        await reader.cancel();
        break;
      }
      ws.send(value);
    }
  }

  ws.on("message", (data) => {
    let frame;
    try {
      frame = JSON.parse(data.toString());
    } catch (e) {
      return error(`The frame is not valid JSON: ${e}`);
    }
    if (frame.type === "ping") {
      ws.send(JSON.stringify({ type: "pong", timestamp: frame.timestamp }));
      return;
    }
    if (frame.type === "tool_result") {
      const resolve = session.pending.get(frame.toolCallId);
      if (!resolve) return error(`Unknown approval ${frame.toolCallId}.`);
      session.pending.delete(frame.toolCallId);
      resolve(frame.result?.confirmed === true);
      return;
    }
    if (frame.type !== "message") return error(`Unknown frame type ${JSON.stringify(frame.type)}.`);
    session.chatId ??= frame.id;
    session.messages = frame.messages ?? [];
    const last = session.messages.at(-1);
    const text = textOf(last);
    const payment = wantsPayment(text);
    const messageId = `msg_${generateId()}`;
    const stream = createUIMessageStream({
      async execute({ writer }) {
        if (payment) {
          const call = newCall(payment);
          writeApprovalRequest(writer, messageId, call);
          const approved = await new Promise((resolve) => session.pending.set(call.approvalId, resolve));
          await writeApproved(writer, session.chatId, call, approved);
        } else {
          writer.write({ type: "start", messageId });
          writer.write({ type: "start-step" });
          await writeText(writer, script);
          writer.write({ type: "finish-step" });
          writer.write({ type: "finish", finishReason: "stop" });
        }
      },
    });
    runTurn(stream).catch((e) => error(String(e)));
  });
  ws.on("close", () => {
    for (const resolve of session.pending.values()) resolve(false);
    session.pending.clear();
  });
  ws.on("error", () => {});
}

const aiVersion = JSON.parse(readFileSync(new URL("./node_modules/ai/package.json", import.meta.url), "utf8")).version;

server.listen({ port, host, backlog: 4096 }, () => {
  console.log(`node baseline (ai ${aiVersion}, node ${process.version}) on http://${host}:${port}, ${script.length} scripted tokens`);
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => process.exit(0));
}
