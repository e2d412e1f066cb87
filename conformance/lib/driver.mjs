// Shared driver: runs Countersign's SSE endpoint through the AI SDK's own client code.
//
// Per version (ai@6.0.0 as "ai6", the latest ai@7 as "ai7") a Harness builds exactly what
// `useChat` builds, minus React:
//   new AbstractChat({ id, state: <in-memory ChatState>, transport: new DefaultChatTransport({ api }),
//                      sendAutomaticallyWhen, onError, onFinish, onToolCall })
// so the request bodies, the auto-send decisions, the chunk schema validation (strictObject in
// 6.0.0: any unknown key fails the stream) and the message reducer are the package's own.
//
// The only thing wrapped is `fetch` (passed to DefaultChatTransport's documented `fetch` option):
// it records each request body and tees each response body so the raw SSE text is kept as
// evidence. The chat still reads the untouched bytes.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import * as ai6 from 'ai6';
import * as ai7 from 'ai7';

const require = createRequire(import.meta.url);

export const SDKS = {
  ai6: { sdk: ai6, version: require('ai6/package.json').version },
  ai7: { sdk: ai7, version: require('ai7/package.json').version },
};
export const VERSIONS = Object.keys(SDKS);

/** Base URL of the normal server (COUNTERSIGN_DEMO_DELAY_MS=0). */
export const BASE_URL = (process.env.CS_BASE_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
/** Base URL of the slow server used by the resume test (falls back to BASE_URL). */
export const SLOW_BASE_URL = (process.env.CS_SLOW_BASE_URL ?? BASE_URL).replace(/\/$/, '');

/** Browser-executed tools of the server (their output comes from addToolOutput). */
export const BROWSER_TOOLS = new Set(['get_location', 'change_bgm']);

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let seq = 0;
/** A fresh chat id per scenario, so every scenario gets its own server session and wallet. */
export function freshChatId(version, scenario) {
  seq += 1;
  const rnd = Math.random().toString(36).slice(2, 8);
  return `conf-${version}-${scenario}-${process.pid}-${seq}-${rnd}`;
}

// ---------------------------------------------------------------------------------------------
// ChatState: what @ai-sdk/react's ReactChatState does, without React. Immutable updates (each
// push/replace makes a new array), so a request already in flight keeps the `messages` array it
// was given; snapshot = structuredClone, as in React.
// ---------------------------------------------------------------------------------------------
export class MemoryChatState {
  constructor(messages = []) {
    this.messages = messages;
    this._status = 'ready';
    this.error = undefined;
    this.statusHistory = ['ready'];
  }
  get status() {
    return this._status;
  }
  set status(s) {
    this._status = s;
    this.statusHistory.push(s);
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  };
  snapshot = (thing) => structuredClone(thing);
}

// ---------------------------------------------------------------------------------------------
// SSE helpers (for evidence and for framing checks; the chat itself uses the SDK's parser).
// ---------------------------------------------------------------------------------------------

/** Splits raw SSE text into events; returns [{raw, data}] where data is the joined data lines. */
export function sseEvents(text) {
  const events = [];
  for (const raw of text.replace(/\r\n/g, '\n').split('\n\n')) {
    if (raw === '') continue;
    const dataLines = raw
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''));
    events.push({ raw, data: dataLines.length ? dataLines.join('\n') : undefined });
  }
  return events;
}

/** The JSON chunks of a recorded response (no [DONE], no comments). */
export function chunksOf(entry) {
  return sseEvents(entry.sse)
    .filter((e) => e.data !== undefined && e.data !== '[DONE]')
    .map((e) => {
      try {
        return JSON.parse(e.data);
      } catch {
        return { __unparsable: e.data };
      }
    });
}

/**
 * A.1 framing of a completed SSE response: status 200, the headers, only `data: <one line>` events
 * (comment lines allowed), last event `data: [DONE]`, first chunk `start`, last chunk `finish`.
 */
export function assertSseFraming(entry, label = '') {
  const where = `${label} ${entry.method} ${entry.url}`;
  assert.equal(entry.status, 200, `${where}: HTTP status`);
  assert.match(entry.headers['content-type'] ?? '', /^text\/event-stream/, `${where}: content-type`);
  assert.equal(entry.headers['x-vercel-ai-ui-message-stream'], 'v1', `${where}: x-vercel-ai-ui-message-stream`);
  assert.ok(entry.done, `${where}: body did not end cleanly (aborted=${entry.aborted})`);
  assert.ok(entry.sse.endsWith('\n\n'), `${where}: body does not end with a blank line`);
  const events = sseEvents(entry.sse);
  for (const e of events) {
    const lines = e.raw.split('\n');
    const bad = lines.filter((l) => !(l.startsWith('data: ') || l.startsWith(':')));
    assert.deepEqual(bad, [], `${where}: unexpected SSE lines in event ${JSON.stringify(e.raw)}`);
    assert.ok(lines.filter((l) => l.startsWith('data:')).length <= 1, `${where}: event with several data lines`);
  }
  const dataEvents = events.filter((e) => e.data !== undefined);
  assert.equal(dataEvents.at(-1)?.data, '[DONE]', `${where}: last event is not data: [DONE]`);
  const chunks = chunksOf(entry);
  assert.equal(chunks[0]?.type, 'start', `${where}: first chunk is not start`);
  assert.equal(chunks.at(-1)?.type, 'finish', `${where}: last chunk is not finish`);
}

// ---------------------------------------------------------------------------------------------
// Message helpers
// ---------------------------------------------------------------------------------------------
export const isToolPart = (p) => typeof p?.type === 'string' && (p.type.startsWith('tool-') || p.type === 'dynamic-tool');
export const toolName = (p) => (p.type === 'dynamic-tool' ? p.toolName : p.type.slice('tool-'.length));
export const toolParts = (message, name) =>
  (message?.parts ?? []).filter(isToolPart).filter((p) => name == null || toolName(p) === name);
export const textParts = (message) => (message?.parts ?? []).filter((p) => p.type === 'text');
export const textOf = (message) => textParts(message).map((p) => p.text).join('');
export const wordCount = (s) => s.split(/\s+/).filter(Boolean).length;

/** Tool parts of the last step (after the last step-start), non-provider-executed. */
function lastStepToolParts(message) {
  const idx = message.parts.reduce((last, p, i) => (p.type === 'step-start' ? i : last), -1);
  return message.parts.slice(idx + 1).filter(isToolPart).filter((p) => !p.providerExecuted);
}

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

export class Harness {
  /**
   * @param {object} o
   * @param {'ai6'|'ai7'} o.version
   * @param {string} o.scenario           short name used in the chat id
   * @param {string} [o.baseUrl]
   * @param {'standard'|'patternA'|'patternB'|'none'|Function} [o.autoSend]
   *   standard: the package's own lastAssistantMessageIsCompleteWithApprovalResponses (what the
   *   AI SDK docs tell a tool-approval app to use). patternA/patternB: see predicates below.
   * @param {number} [o.maxPosts]         request budget: a POST beyond it fails (auto-send loop)
   * @param {Array}  [o.messages]         initial messages (a "reloaded page")
   * @param {string} [o.chatId]
   * @param {object} [o.headers]          extra request headers (DefaultChatTransport's `headers` option)
   * @param {Function} [o.transport]      (harness) => ChatTransport, instead of the recording
   *                                      DefaultChatTransport (lib/ws-driver.mjs: WebSocketChatTransport)
   */
  constructor({ version, scenario, baseUrl = BASE_URL, autoSend = 'standard', maxPosts = 6, messages = [], chatId, headers, transport }) {
    const { sdk } = SDKS[version];
    this.version = version;
    this.sdk = sdk;
    this.baseUrl = baseUrl;
    this.api = `${baseUrl}/api/chat`;
    this.chatId = chatId ?? freshChatId(version, scenario);
    this.log = []; // one entry per HTTP request
    this.inflight = 0;
    this.maxPosts = maxPosts;
    this.budgetExceeded = false;
    this.errors = []; // onError
    this.finishes = []; // onFinish
    this.toolCalls = []; // onToolCall
    this.answered = new Set(); // answers given through this harness: appr:<id>, out:<toolCallId>
    this.sentAnswers = new Set(); // answers that some POST body already carried
    this.clientOutputs = new Set(); // toolCallIds whose output came from addToolOutput
    this.state = new MemoryChatState(structuredClone(messages));

    const predicate =
      typeof autoSend === 'function'
        ? autoSend
        : {
            standard: sdk.lastAssistantMessageIsCompleteWithApprovalResponses,
            patternA: (o) => this.patternA(o),
            patternB: (o) => this.patternB(o),
            none: undefined,
          }[autoSend];
    if (autoSend !== 'none' && typeof predicate !== 'function') throw new Error(`unknown autoSend ${autoSend}`);

    this.transport = transport
      ? transport(this)
      : new sdk.DefaultChatTransport({ api: this.api, headers, fetch: this.recordingFetch() });
    this.chat = new sdk.AbstractChat({
      id: this.chatId,
      state: this.state,
      transport: this.transport,
      sendAutomaticallyWhen: predicate,
      onError: (error) => this.errors.push(error),
      onFinish: (info) =>
        this.finishes.push({
          finishReason: info.finishReason,
          isAbort: info.isAbort,
          isDisconnect: info.isDisconnect,
          isError: info.isError,
        }),
      onToolCall: ({ toolCall }) => {
        // The person has not approved anything yet: a real app must not run the tool here.
        this.toolCalls.push(structuredClone(toolCall));
      },
    });
  }

  // ---- fetch wrapper: records requests, tees responses -------------------------------------
  recordingFetch() {
    return async (url, init = {}) => {
      const method = init.method ?? 'GET';
      const entry = {
        method,
        url: String(url),
        body: init.body ? JSON.parse(init.body) : undefined,
        status: undefined,
        headers: {},
        sse: '',
        done: false,
        aborted: false,
      };
      if (method === 'POST') {
        const posts = this.log.filter((e) => e.method === 'POST').length;
        if (posts >= this.maxPosts) {
          this.budgetExceeded = true;
          throw new Error(
            `request budget exceeded: POST #${posts + 1} > ${this.maxPosts} (an automatic resend loop?)`,
          );
        }
        this.noteSentAnswers(entry.body);
      }
      this.log.push(entry);
      this.inflight += 1;
      let res;
      try {
        res = await fetch(url, init);
      } catch (e) {
        this.inflight -= 1;
        entry.fetchError = String(e);
        throw e;
      }
      entry.status = res.status;
      entry.headers = Object.fromEntries(res.headers);
      if (!res.body) {
        this.inflight -= 1;
        entry.done = true;
        return res;
      }
      const [forChat, forLog] = res.body.tee();
      (async () => {
        const reader = forLog.pipeThrough(new TextDecoderStream()).getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            entry.sse += value;
          }
          entry.done = true;
        } catch (e) {
          entry.aborted = true;
          entry.readError = String(e);
        } finally {
          this.inflight -= 1;
        }
      })();
      return new Response(forChat, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
  }

  /** Records which answers (approval decisions, browser outputs) a POST body carries. */
  noteSentAnswers(body) {
    const last = body?.messages?.at(-1);
    if (last?.role !== 'assistant') return;
    for (const p of last.parts.filter(isToolPart)) {
      if (p.approval?.approved !== undefined) this.sentAnswers.add(`appr:${p.approval.id}`);
      if ((p.state === 'output-available' || p.state === 'output-error') && this.clientOutputs.has(p.toolCallId))
        this.sentAnswers.add(`out:${p.toolCallId}`);
    }
  }

  hasUnsentAnswer() {
    for (const a of this.answered) if (!this.sentAnswers.has(a)) return true;
    return false;
  }

  // ---- automatic-send predicates for browser tools ------------------------------------------
  //
  // Both are synchronous (ai@6.0.0 calls sendAutomaticallyWhen without awaiting it: a Promise
  // would count as "true"), and both only fire when an answer given through this harness has
  // not been carried by any request yet (the loop guard the AI SDK docs recommend; the seed
  // system keeps the same kind of "already sent" Set).
  //
  // Pattern A ("approval and browser output in ONE request"): every tool part of the last step
  // is answered, and an APPROVED browser tool only counts as answered once it has its output.
  // So addToolApprovalResponse(approved) on get_location sends nothing; the following
  // addToolOutput makes the predicate true and ONE request carries the part in state
  // output-available with approval {id, approved: true} and the output.
  //
  // Pattern B ("approval first, output in a separate request"): every tool part of the last step
  // is answered, an approval-responded part counting as answered. So addToolApprovalResponse
  // sends the approval at once (part in approval-responded); after that response has ended,
  // addToolOutput makes the predicate true again and a second request carries the output.
  answeredParts(messages, { browserNeedsOutput }) {
    const message = messages.at(-1);
    if (message?.role !== 'assistant') return false;
    const parts = lastStepToolParts(message);
    if (parts.length === 0) return false;
    return parts.every((p) => {
      if (p.state === 'output-available') return p.preliminary !== true;
      if (p.state === 'output-error' || p.state === 'output-denied') return true;
      if (p.state === 'approval-responded')
        return !(browserNeedsOutput && p.approval?.approved === true && BROWSER_TOOLS.has(toolName(p)));
      if (p.state === 'input-available' && BROWSER_TOOLS.has(toolName(p))) return false;
      return false;
    });
  }
  patternA({ messages }) {
    return this.answeredParts(messages, { browserNeedsOutput: true }) && this.hasUnsentAnswer();
  }
  patternB({ messages }) {
    return this.answeredParts(messages, { browserNeedsOutput: false }) && this.hasUnsentAnswer();
  }

  // ---- person actions -------------------------------------------------------------------------
  async send(text) {
    await this.chat.sendMessage({ text });
    await this.waitIdle();
  }
  async approve(approvalId, { approved = true, reason } = {}) {
    this.answered.add(`appr:${approvalId}`);
    const args = reason === undefined ? { id: approvalId, approved } : { id: approvalId, approved, reason };
    await this.chat.addToolApprovalResponse(args);
  }
  async deny(approvalId, reason) {
    return this.approve(approvalId, { approved: false, reason });
  }
  async toolOutput(tool, toolCallId, output) {
    this.clientOutputs.add(toolCallId);
    this.answered.add(`out:${toolCallId}`);
    await this.chat.addToolOutput({ tool, toolCallId, output });
  }

  /** Waits until no request is in flight and the chat is ready/error (stable for 5 ticks). */
  async waitIdle(timeoutMs = 20000) {
    const t0 = Date.now();
    let stable = 0;
    for (;;) {
      const idle = (this.chat.status === 'ready' || this.chat.status === 'error') && this.inflight === 0;
      stable = idle ? stable + 1 : 0;
      if (stable >= 5) return;
      if (Date.now() - t0 > timeoutMs)
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for the chat to settle (status=${this.chat.status}, inflight=${this.inflight})\n${this.dump()}`,
        );
      await sleep(10);
    }
  }

  // ---- views --------------------------------------------------------------------------------
  get messages() {
    return this.chat.messages;
  }
  get posts() {
    return this.log.filter((e) => e.method === 'POST');
  }
  get assistant() {
    return this.messages.filter((m) => m.role === 'assistant').at(-1);
  }

  /** Fails loudly on any stream error: schema failure, HTTP error, reducer error. */
  assertHealthy() {
    const problems = [];
    if (this.budgetExceeded) problems.push('request budget exceeded (automatic resend loop)');
    const errors = new Set([...this.errors, ...(this.chat.error ? [this.chat.error] : [])]);
    for (const e of errors) problems.push(describeError(e));
    if (this.chat.status === 'error' && errors.size === 0) problems.push("chat.status === 'error' without an error");
    if (problems.length)
      assert.fail(
        `[${this.version}] stream error (chat.status=${this.chat.status}, ${this.errors.length} onError call(s)):\n  ${problems.join('\n  ')}\n${this.dump()}`,
      );
  }

  /** Evidence: every request (body summary) and its raw SSE. */
  dump(maxSse = 6000) {
    const out = [`--- chat ${this.chatId} (${this.version} ${SDKS[this.version].version}) status=${this.chat.status}`];
    this.log.forEach((e, i) => {
      out.push(`#${i + 1} ${e.method} ${e.url} -> ${e.status ?? e.fetchError ?? '?'}${e.aborted ? ' (aborted)' : ''}`);
      if (e.body) out.push(`  request: ${summarizeBody(e.body)}`);
      const sse = e.sse.length > maxSse ? `${e.sse.slice(0, maxSse / 2)}\n…[${e.sse.length - maxSse} chars cut]…\n${e.sse.slice(-maxSse / 2)}` : e.sse;
      if (sse) out.push(sse.trimEnd().replace(/\n\n/g, "\n").replace(/^/gm, "  | "));
    });
    out.push(`  final messages: ${JSON.stringify(this.messages, null, 0).slice(0, 4000)}`);
    return out.join('\n');
  }
}

export function describeError(e) {
  if (!e) return String(e);
  const extra = [];
  if (e.statusCode) extra.push(`statusCode=${e.statusCode}`);
  const cause = e.cause?.message ?? (e.cause ? String(e.cause) : '');
  if (cause && !String(e.message).includes(cause.slice(0, 60))) extra.push(`cause=${cause}`);
  return `${e.name ?? 'Error'}: ${e.message}${extra.length ? ` (${extra.join(', ')})` : ''}`;
}

function summarizeBody(body) {
  const last = body.messages?.at(-1);
  const parts = (last?.parts ?? [])
    .map((p) =>
      isToolPart(p)
        ? `${p.type}[${p.state}${p.approval ? ` approval=${JSON.stringify(p.approval)}` : ''}${p.output !== undefined ? ' +output' : ''}]`
        : p.type === 'text'
          ? `text(${JSON.stringify(p.text.slice(0, 40))})`
          : p.type,
    )
    .join(', ');
  return `id=${body.id} trigger=${body.trigger} messageId=${body.messageId} messages=${body.messages?.length} last=${last?.role}:${last?.id} [${parts}]`;
}

/** Runs fn and, if it throws, appends the harness dump (once) so the failure carries evidence. */
export async function withEvidence(h, fn) {
  try {
    await fn();
  } catch (e) {
    if (e && typeof e.message === 'string' && !e.message.includes('--- chat ')) {
      e.message += `\n${h.dump()}`;
    }
    throw e;
  }
}

/** Contract checks shared by the approval scenarios. */
export function assertPauseResponse(h, entry, label) {
  assertSseFraming(entry, label);
  const chunks = chunksOf(entry);
  const finish = chunks.at(-1);
  assert.equal(finish.finishReason, 'tool-calls', `${label}: a response that waits for approval must finish with finishReason "tool-calls"`);
  const text = chunks.filter((c) => c.type?.startsWith('text-'));
  assert.deepEqual(text, [], `${label}: text is held (ADR 0004): a response that ends waiting for approval must carry no text`);
}

/** The continuation's `start` reuses the assistant message id of the first response. */
export function assertSameMessageId(h) {
  const ids = h.posts.map((e) => chunksOf(e).find((c) => c.type === 'start')?.messageId);
  assert.ok(ids[0], 'the first response must send start.messageId');
  for (const [i, id] of ids.entries())
    assert.equal(id, ids[0], `response #${i + 1}: start.messageId must reuse the assistant message id (${ids[0]})`);
  const assistants = h.messages.filter((m) => m.role === 'assistant');
  assert.equal(assistants.length, 1, 'the continuation must extend ONE assistant message, not add another');
  assert.equal(assistants[0].id, ids[0]);
}

/** Every text part ended (state "done"). */
export function assertTextDone(message) {
  for (const p of textParts(message)) assert.equal(p.state, 'done', `text part not done: ${JSON.stringify(p).slice(0, 200)}`);
}

/** Polls until cond() is true. */
export async function waitFor(cond, timeoutMs, what) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(5);
  }
}

/** The text a response streamed (text-delta concatenated, in order). */
export function streamedText(entry) {
  return chunksOf(entry)
    .filter((c) => c.type === 'text-delta')
    .map((c) => c.delta)
    .join('');
}
