// A faithful copy of the original ("seed") system's Next.js chat page (app/page.tsx,
// components/chat.tsx at 747de68) in its two ADK modes, as plain DOM. Configured by the query
// string instead of NEXT_PUBLIC_* variables:
//
//   ?backend=http://127.0.0.1:8000   NEXT_PUBLIC_ADK_BACKEND_URL (default http://localhost:8000)
//   &key=…                            NEXT_PUBLIC_API_KEY, sent as X-API-Key on POST /stream
//   &mode=sse|bidi                    the starting mode ("ADK SSE" / "ADK BIDI ⚡"; default sse)
//
// "Gemini Direct" (a Next.js route of the seed itself, not its backend) is left out.
// See end2end/seed-ui/README.md.

import type { UIMessage } from "ai";
import { buildChat, type Built, type Mode } from "./chat";
import { renderMessage } from "./render";

const query = new URLSearchParams(location.search);
const backend = (query.get("backend") ?? "http://localhost:8000").replace(/\/$/, "");
const apiKey = query.get("key") ?? "";
let mode: Mode = query.get("mode") === "bidi" ? "adk-bidi" : "adk-sse";

const RATE_LIMIT_PATTERNS = ["resource_exhausted", "resource exhausted", "quota exceeded", "rate limit", "429", "too many requests"];
const isRateLimitError = (message: string) => RATE_LIMIT_PATTERNS.some((p) => message.toLowerCase().includes(p));

// --- chrome, built once ---------------------------------------------------------------------

document.body.innerHTML = "";
const header = document.createElement("header");
header.innerHTML = '<h1 style="position:absolute;width:1px;height:1px;overflow:hidden">AI Chat Application</h1>';
const nav = document.createElement("nav");
nav.setAttribute("aria-label", "Backend mode selection");
nav.style.cssText = "position:fixed;top:0.5rem;right:0.5rem;display:flex;gap:0.25rem";
const modeButtons: Record<Mode, HTMLButtonElement> = {
  "adk-sse": Object.assign(document.createElement("button"), { type: "button", textContent: "ADK SSE" }),
  "adk-bidi": Object.assign(document.createElement("button"), { type: "button", textContent: "ADK BIDI ⚡" }),
};
nav.append(modeButtons["adk-sse"], modeButtons["adk-bidi"]);
const clearButton = Object.assign(document.createElement("button"), { type: "button", textContent: "Clear History" });
nav.append(clearButton);

const main = document.createElement("main");
main.id = "main-content";
main.style.cssText = "max-width:48rem;margin:3rem auto 8rem;font-family:sans-serif";
const empty = Object.assign(document.createElement("div"), { textContent: "Start a conversation..." });
const list = document.createElement("div");
const thinking = document.createElement("div");
thinking.setAttribute("data-testid", "thinking-indicator");
thinking.textContent = "Thinking...";
const errorBox = document.createElement("div");
const interruptedBadge = Object.assign(document.createElement("div"), { textContent: "⏹️ Interrupted" });
main.append(empty, list, thinking, errorBox, interruptedBadge);

const form = document.createElement("form");
form.style.cssText = "position:fixed;bottom:0;left:0;right:0;display:flex;gap:0.5rem;padding:1rem;background:#fff";
const input = document.createElement("input");
input.id = "chat-input";
input.placeholder = "Type your message...";
input.setAttribute("aria-label", "Type your chat message");
input.style.flex = "1";
const sendButton = Object.assign(document.createElement("button"), { type: "submit", textContent: "Send" });
form.append(input, sendButton);
document.body.append(header, nav, main, form);

// --- the chat (remounted on a mode switch or Clear History, as <Chat key={mode-v#}>) ---------

let built: Built;
let messages: UIMessage[] = []; // page.tsx's preserved messages (onMessagesChange)
const rendered = new Map<string, { sig: string; node: HTMLElement | null }>();
let scheduled = false;

function schedule() {
  if (scheduled) return;
  scheduled = true;
  queueMicrotask(() => {
    scheduled = false;
    render();
  });
}

function mount(initial: UIMessage[]) {
  rendered.clear();
  built = buildChat(mode, backend, apiKey, initial, schedule);
  (window as any).seedUi = {
    chat: built.chat,
    mode,
    bidi: built.bidi?.debug,
    chatId: built.chat.id,
  };
  render();
}

function isLoading() {
  return built.chat.status === "submitted" || built.chat.status === "streaming";
}

function render() {
  const chat = built.chat;
  messages = chat.messages;
  const loading = isLoading();

  const seen = new Set<string>();
  const nodes: HTMLElement[] = [];
  for (const message of messages) {
    seen.add(message.id);
    const sig = JSON.stringify(message);
    let entry = rendered.get(message.id);
    if (!entry || entry.sig !== sig) {
      entry = { sig, node: renderMessage(message, chat.addToolApprovalResponse, forceRender) };
      rendered.set(message.id, entry);
    }
    if (entry.node) nodes.push(entry.node);
  }
  for (const id of Array.from(rendered.keys())) if (!seen.has(id)) rendered.delete(id);
  // Only touch the list when its children changed (keeps buttons attached while streaming).
  const current = Array.from(list.children);
  if (current.length !== nodes.length || current.some((n, i) => n !== nodes[i])) list.replaceChildren(...nodes);

  empty.hidden = messages.length > 0;
  thinking.hidden = !loading;
  input.disabled = loading;
  sendButton.disabled = loading;
  sendButton.setAttribute("aria-label", loading ? "Sending message..." : "Send message");
  for (const [m, button] of Object.entries(modeButtons) as [Mode, HTMLButtonElement][]) {
    button.disabled = loading;
    button.setAttribute("aria-pressed", String(m === mode));
    button.style.fontWeight = m === mode ? "bold" : "normal";
  }
  clearButton.hidden = messages.length === 0;

  errorBox.replaceChildren();
  if (chat.error) {
    const text = chat.error.message;
    const box = document.createElement("div");
    if (isRateLimitError(text)) {
      box.setAttribute("data-testid", "rate-limit-error");
      box.textContent = `API Rate Limit Exceeded ${text}`;
    } else {
      box.setAttribute("data-testid", "generic-error");
      box.textContent = `Error: ${text}`;
    }
    errorBox.append(box);
  }
}

function forceRender() {
  rendered.clear();
  render();
}

for (const [m, button] of Object.entries(modeButtons) as [Mode, HTMLButtonElement][]) {
  button.addEventListener("click", () => {
    if (m === mode) return;
    mode = m;
    mount(messages); // history preserved across the switch
  });
}
clearButton.addEventListener("click", () => mount([]));

form.addEventListener("submit", (e) => {
  e.preventDefault();
  if (!input.value.trim()) return;
  const text = input.value;
  input.value = "";
  void built.chat.sendMessage({ text });
});

interruptedBadge.hidden = true;
window.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && isLoading()) {
    built.bidi?.interrupt("user_abort"); // SSE has no transport reference: its stream goes on
    interruptedBadge.hidden = false;
    setTimeout(() => (interruptedBadge.hidden = true), 2000);
  }
});

mount([]);
