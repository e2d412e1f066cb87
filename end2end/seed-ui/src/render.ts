// The seed UI's rendering (components/message.tsx and components/tool-invocation.tsx at 747de68)
// as plain DOM, from the seed-dialect notes §D.3: the same part dispatch (first match wins), the
// same data-testids and labels, the "Unknown part type: X" debug box, the usage and model footer.
// Like React, `undefined` and `null` render as nothing ("📊 Tokens:  in + …" when a key is missing).
// Classes (`tool-card`, …) are extra, for styling and for locating a card; the seed has none.

import type { UIMessage } from "ai";

type AnyPart = Record<string, any> & { type: string };
export type ApprovalResponder = (response: { id: string; approved: boolean; reason?: string }) => void;

function el(tag: string, attrs: Record<string, string> = {}, ...children: (Node | string | null | undefined)[]) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** React's text rendering of a JSX expression: undefined, null and booleans are nothing. */
function jsx(value: unknown): string {
  if (value === undefined || value === null || typeof value === "boolean") return "";
  return String(value);
}

// --- tool card (components/tool-invocation.tsx) ---------------------------------------------

const STATE_LABEL: Record<string, string> = {
  "approval-requested": "Approval Required",
  "approval-responded": "Processing Approval...",
  "input-streaming": "Preparing...",
  "input-available": "Executing...",
  "output-available": "Completed",
  "output-error": "Failed",
};
const STATE_COLOR: Record<string, string> = {
  "approval-requested": "#a855f7",
  "approval-responded": "#6366f1",
  "input-streaming": "#3b82f6",
  "input-available": "#f59e0b",
  "output-available": "#10b981",
  "output-error": "#ef4444",
};

/** The card's own React state (`approvalSent` of the legacy long-running block), per call. */
const longRunningSent = new Set<string>();

/** lib/hooks/use-tool-executors.ts: executors exist for these; their result goes to addToolOutput, which is never passed (§D.5). */
const EXECUTORS: Record<string, (input: any) => Promise<{ success: boolean; output?: unknown; error?: string }>> = {
  get_location: () =>
    new Promise((resolve) => {
      if (!navigator.geolocation) return resolve({ success: false, error: "Geolocation not supported" });
      navigator.geolocation.getCurrentPosition(
        (p) => resolve({ success: true, output: { latitude: p.coords.latitude, longitude: p.coords.longitude, accuracy: p.coords.accuracy, timestamp: p.timestamp } }),
        (e) => resolve({ success: false, error: e.message }),
        { enableHighAccuracy: true, timeout: 5000, maximumAge: 0 },
      );
    }),
  change_bgm: async (input) => ({ success: true, output: { track: input?.track, message: `BGM changed to track ${input?.track}` } }),
};

interface ToolInvocation {
  toolCallId: string;
  toolName: string;
  state: string;
  input?: unknown;
  output?: unknown;
  approval?: { id: string; approved?: boolean; reason?: string };
  errorText?: string;
}

function toolCard(inv: ToolInvocation, respond: ApprovalResponder | undefined, rerender: () => void): HTMLElement {
  const addToolOutput: ((o: unknown) => void) | undefined = undefined; // the shipped wiring gap (§D.5)
  const toolName = inv.toolName || "unknown";
  const state = inv.state;
  const color = STATE_COLOR[state] ?? "#6b7280";
  const card = el("div", { class: "tool-card", style: `border:1px solid ${color};border-radius:8px;padding:0.75rem;margin:0.5rem 0` });
  card.append(
    el(
      "div",
      { "data-testid": "tool-invocation-header", style: "display:flex;gap:0.5rem;align-items:center" },
      el("div", { style: `width:8px;height:8px;border-radius:50%;background:${color}` }),
      el("span", { "data-testid": "tool-name", style: "font-weight:600" }, toolName),
      el("span", { "data-testid": "tool-state", style: `color:${color}` }, STATE_LABEL[state] ?? "Unknown"),
    ),
  );

  if (state === "approval-requested" && inv.approval) {
    const approve = el("button", { type: "button", "data-testid": "tool-approve-button" }, "Approve");
    approve.addEventListener("click", async () => {
      respond?.({ id: inv.approval!.id, approved: true, reason: "User approved the tool execution." });
      const executor = EXECUTORS[toolName];
      if (executor) {
        const result = await executor(inv.input || {});
        (addToolOutput as ((o: unknown) => void) | undefined)?.({
          tool: toolName,
          toolCallId: inv.toolCallId,
          output: result.success ? result.output : { success: false, error: result.error },
        });
      }
    });
    const deny = el("button", { type: "button", "data-testid": "tool-deny-button" }, "Deny");
    deny.addEventListener("click", () => {
      respond?.({ id: inv.approval!.id, approved: false, reason: "User denied the tool execution." });
    });
    card.append(el("div", { class: "approval" }, el("div", {}, "This tool requires your approval to execute:"), el("div", {}, approve, " ", deny)));
  }

  // The legacy long-running block: any part in input-available; its buttons send nothing.
  if (state === "input-available") {
    if (!longRunningSent.has(inv.toolCallId)) {
      const sent = () => {
        longRunningSent.add(inv.toolCallId);
        rerender();
      };
      const approve = el("button", { type: "button", "data-testid": "tool-approve-button" }, "Approve");
      approve.addEventListener("click", sent);
      const deny = el("button", { type: "button", "data-testid": "tool-deny-button" }, "Deny");
      deny.addEventListener("click", sent);
      card.append(
        el(
          "div",
          { class: "long-running" },
          el("div", {}, el("strong", { "data-testid": "tool-name-primary" }, toolName), " requires your approval:"),
          inv.input ? el("div", {}, JSON.stringify(inv.input, null, 2)) : null,
          el("div", {}, approve, " ", deny),
        ),
      );
    } else {
      card.append(el("div", {}, "✓ Approval response sent. Waiting for agent to resume..."));
    }
  }

  if (inv.input) {
    card.append(el("div", { class: "input" }, el("div", {}, "Input"), el("pre", {}, jsx(JSON.stringify(inv.input, null, 2)))));
  }
  if (state === "output-available") {
    card.append(el("div", { class: "result" }, el("div", {}, "Result"), el("pre", {}, jsx(JSON.stringify(inv.output, null, 2)))));
  }
  if (state === "output-error") {
    card.append(el("div", { class: "error" }, el("div", {}, "Error"), el("div", { class: "error-text" }, String(inv.errorText))));
  }
  return card;
}

// --- message (components/message.tsx) ------------------------------------------------------

function part(message: UIMessage, p: AnyPart, respond: ApprovalResponder | undefined, rerender: () => void): Node | null {
  if (p.type === "text") {
    return el("div", { "data-testid": "message-text", style: "white-space:pre-wrap;line-height:1.5" }, p.text);
  }
  if (p.type === "reasoning") {
    return el("details", {}, el("summary", {}, "💭 Reasoning Process"), el("div", {}, p.text));
  }
  if (p.type === "file" && p.mediaType?.startsWith("image/")) {
    return el("img", { src: p.url, alt: p.filename || "Image" });
  }
  if (p.type === "file" && p.mediaType?.startsWith("audio/")) {
    return el(
      "div",
      {},
      el("div", {}, el("span", {}, "🎵"), el("span", {}, "Recorded Audio")),
      el("audio", { controls: "", src: p.url }, "Your browser does not support the audio element."),
      el("div", {}, `Format: ${p.mediaType}`),
    );
  }
  if (p.type === "data-image" && p.data) {
    return el("img", { src: `data:${p.data.mediaType};base64,${p.data.content}`, alt: p.alt || "Image from assistant" });
  }
  if (p.type === "data-pcm" && p.data) {
    console.warn("[MessageComponent] data-pcm in message.parts (should be bypassed to AudioWorklet)");
    return null;
  }
  if (p.type === "tool-call" && "toolInvocation" in p && p.toolInvocation) {
    return toolCard(p.toolInvocation, respond, rerender);
  }
  if (typeof p.type === "string" && p.type.startsWith("tool-") && "toolCallId" in p && "state" in p) {
    return toolCard(
      {
        toolCallId: p.toolCallId,
        toolName: p.type.slice(5),
        state: p.state,
        input: "input" in p ? p.input : undefined,
        output: "output" in p ? p.output : undefined,
        approval: "approval" in p ? p.approval : undefined,
        errorText: "errorText" in p ? p.errorText : undefined,
      },
      respond,
      rerender,
    );
  }
  // Unknown part type: the debug view.
  void message;
  return el("details", { class: "unknown-part" }, el("summary", {}, `Unknown part type: ${p.type}`), el("pre", {}, JSON.stringify(p, null, 2)));
}

export function renderMessage(message: UIMessage, respond: ApprovalResponder | undefined, rerender: () => void): HTMLElement | null {
  const isUser = message.role === "user";
  const parts = (message.parts ?? []) as AnyPart[];
  // Empty user messages "created for continuation" are hidden.
  if (isUser && parts.length === 1 && parts[0].type === "text" && !parts[0].text) return null;

  const root = el("div", {
    "data-testid": `message-${message.role}`,
    "data-message-id": message.id,
    class: "message",
    style: `margin-bottom:1rem;padding:0.75rem;border-radius:8px;background:${isUser ? "#eef4ff" : "#eefbea"}`,
  });
  root.append(el("div", { "data-testid": "message-header", style: "font-weight:bold;margin-bottom:0.5rem" }, el("span", { "data-testid": "message-sender" }, isUser ? "You" : "Assistant")));
  const content = el("div", { "data-testid": "message-content", style: "display:flex;flex-direction:column;gap:0.5rem" });
  for (const p of parts) {
    const node = part(message, p, respond, rerender);
    if (node) content.append(node);
  }
  root.append(content);

  const metadata = (message as any).metadata;
  if (metadata?.usage) {
    const u = metadata.usage;
    root.append(
      el(
        "div",
        { class: "footer usage" },
        el("span", {}, "📊 Tokens: ", el("span", {}, `${jsx(u.promptTokens)} in`), " + ", el("span", {}, `${jsx(u.completionTokens)} out`), " = ", el("span", {}, `${jsx(u.totalTokens)} total`)),
      ),
    );
  }
  if (metadata?.grounding?.sources) {
    root.append(el("div", { class: "footer sources" }, `🔍 Sources (${metadata.grounding.sources.length}):`));
  }
  if (metadata?.citations) {
    root.append(el("div", { class: "footer citations" }, `📝 Citations (${metadata.citations.length}):`));
  }
  if (metadata?.cache) {
    root.append(el("div", { class: "footer cache" }, `💾 Cache: ${jsx(metadata.cache.hits)} hits / ${jsx(metadata.cache.misses)} misses`));
  }
  if (metadata?.modelVersion) {
    root.append(el("div", { class: "footer model" }, el("span", {}, "🤖 Model: ", el("span", {}, jsx(metadata.modelVersion)))));
  }
  return root;
}
