// WebSocket driver (draft for conformance/lib/ws-driver.mjs): runs Countersign's WebSocket chat
// endpoint (ws://<host>/api/chat) through ai@7's own AbstractChat + WebSocketChatTransport, the
// way useChat({ transport: new WebSocketChatTransport({ url: '/api/chat' }) }) does.
//
// Node 20 has no global WebSocket, so the transport gets the `ws` package's WebSocket through its
// documented `webSocket` option. The only thing wrapped is that constructor: a subclass records
// every frame each way (per socket, and per requestId) and can drop the TCP connection
// (`ws.terminate()`, close code 1006 on the client) to simulate a network loss. The transport
// still reads the untouched frames, validates every chunk with the package's uiMessageChunkSchema
// and drives the Chat's reducer; we only observe.
//
// Needs one change in lib/driver.mjs: Harness accepts a `transport` factory (see
// /tmp/notes/driver.mjs.patch), so WsHarness inherits everything else (send/approve/deny/
// toolOutput, the auto-send predicates, waitIdle, assertHealthy).
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import {
  SDKS, BASE_URL, Harness, describeError, isToolPart, sleep,
} from './driver.mjs';

export const WS_VERSION = 'ai7'; // WebSocketChatTransport only exists in ai@7
const ai7 = SDKS.ai7.sdk;
const ai6 = SDKS.ai6.sdk;

/** ws://host:port/api/chat for an http://host:port base URL (the socket URL adds only `params`). */
export const wsChatUrl = (baseUrl) => `${baseUrl.replace(/^http/, 'ws')}/api/chat`;

const SERVER_TYPES = new Set(['start', 'chunk', 'end', 'error', 'no-active']);

/** Every link made, so an `after` hook can close sockets that a timed-out test left open. */
const LINKS = new Set();
export function closeAllLinks() {
  for (const link of LINKS) link.close();
  LINKS.clear();
}

/**
 * One WebSocketChatTransport (so: at most one open socket at a time) and the record of every
 * socket it opened. Several harnesses (chats) may share a link: that is the multiplexing case.
 */
export class WsLink {
  /**
   * @param {object} o
   * @param {string} [o.baseUrl]
   * @param {object} [o.headers]  WebSocketChatTransport `headers`: sent inside every send/resume frame
   * @param {object} [o.params]   WebSocketChatTransport `params`: query of the upgrade URL
   * @param {'progressive'|'hold'} [o.timing]  text timing (ADR 0004), asked for both ways:
   *   `x-countersign-text` in the frames' headers and `?text=` on the socket URL
   */
  constructor({ baseUrl = BASE_URL, headers, params, timing } = {}) {
    if (timing) {
      headers = { 'x-countersign-text': timing, ...headers };
      params = { text: timing, ...params };
    }
    this.baseUrl = baseUrl;
    this.url = wsChatUrl(baseUrl);
    this.sockets = []; // {index, url, ws, frames: [{dir, t, frame|raw, binary}], closed?: {code, reason}}
    this.entries = []; // one per send/resume request, in the order the client sent them
    this.byRequestId = new Map();
    this.harnesses = new Map(); // chatId -> WsHarness (budget, answers bookkeeping)
    this.protocolProblems = []; // frames the transport would reject (it would also kill the socket)
    const link = this;
    this.WebSocket = class RecordingWebSocket extends WebSocket {
      constructor(url, protocols) {
        super(url, protocols);
        const sock = { index: link.sockets.length, url: String(url), ws: this, frames: [], closed: undefined };
        this._sock = sock;
        link.sockets.push(sock);
        // Registered before the transport sets onmessage/onclose, so we see each frame first.
        this.on('message', (data, isBinary) => link.onServerFrame(sock, data, isBinary));
        this.on('close', (code, reason) => link.onClose(sock, code, String(reason)));
      }
      send(data, ...rest) {
        link.onClientFrame(this._sock, data); // may throw (request budget): the frame is not sent
        return super.send(data, ...rest);
      }
    };
    this.headers = headers;
    this.transport = new ai7.WebSocketChatTransport({ url: this.url, webSocket: this.WebSocket, headers, params });
    LINKS.add(this);
  }

  register(h) {
    this.harnesses.set(h.chatId, h);
  }

  /** The socket currently in use (the last one opened). */
  get socket() {
    return this.sockets.at(-1);
  }

  /** Cuts the TCP connection without a close handshake (a network loss, client sees 1006). */
  dropSocket() {
    const sock = this.socket;
    assert.ok(sock && sock.ws.readyState === WebSocket.OPEN, 'no open socket to drop');
    sock.ws.terminate();
    return sock;
  }

  close() {
    this.transport.close();
    LINKS.delete(this);
  }

  onClientFrame(sock, data) {
    const text = typeof data === 'string' ? data : Buffer.from(data).toString('utf8');
    const frame = JSON.parse(text);
    if (frame.type === 'send') {
      const h = this.harnesses.get(frame.id);
      if (h) {
        const sends = this.entries.filter((e) => e.kind === 'send' && e.chatId === frame.id).length;
        if (sends >= h.maxPosts) {
          h.budgetExceeded = true;
          throw new Error(`request budget exceeded: send #${sends + 1} > ${h.maxPosts} (an automatic resend loop?)`);
        }
        h.noteSentAnswers(frame); // same shape as the POST body: {id, messages, trigger, messageId}
      }
    }
    sock.frames.push({ dir: 'out', t: Date.now(), frame });
    if (frame.type === 'send' || frame.type === 'resume') {
      const entry = {
        kind: frame.type,
        requestId: frame.requestId,
        chatId: frame.id,
        request: frame,
        body: frame.type === 'send' ? frame : undefined, // driver's noteSentAnswers/summary shape
        socket: sock.index,
        frames: [], // server frames for this requestId, in arrival order
        chunks: [],
        sequences: [],
        validations: [],
        settled: undefined, // 'end' | 'no-active' | 'error' | 'abort' | 'socket-closed'
        errorText: undefined,
        abortSent: false,
        framesAfterSettle: 0,
      };
      this.entries.push(entry);
      this.byRequestId.set(frame.requestId, entry);
    } else if (frame.type === 'abort') {
      const entry = this.byRequestId.get(frame.requestId);
      if (entry) {
        entry.abortSent = true;
        entry.settled ??= 'abort';
      }
    }
  }

  onServerFrame(sock, data, isBinary) {
    const text = Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.from(data).toString('utf8');
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      sock.frames.push({ dir: 'in', t: Date.now(), raw: text, binary: isBinary });
      this.protocolProblems.push(`socket #${sock.index}: not JSON: ${text.slice(0, 200)}`);
      return;
    }
    sock.frames.push({ dir: 'in', t: Date.now(), frame, binary: isBinary });
    if (isBinary) this.protocolProblems.push(`socket #${sock.index}: binary frame ${text.slice(0, 200)}`);
    if (typeof frame?.type !== 'string' || typeof frame?.requestId !== 'string') {
      this.protocolProblems.push(`socket #${sock.index}: frame without string type/requestId: ${text.slice(0, 200)}`);
      return;
    }
    const entry = this.byRequestId.get(frame.requestId);
    if (!entry) {
      this.protocolProblems.push(`socket #${sock.index}: frame for a requestId the client never sent: ${text.slice(0, 200)}`);
      return;
    }
    if (entry.settled !== undefined) {
      // Ignored by the client (the request is gone); after an abort it is allowed, after
      // end/no-active/error it is a server bug.
      entry.framesAfterSettle += 1;
      if (entry.settled !== 'abort' && entry.settled !== 'socket-closed')
        this.protocolProblems.push(`request ${entry.requestId}: ${frame.type} after ${entry.settled}`);
      return;
    }
    entry.frames.push(frame);
    switch (frame.type) {
      case 'chunk': {
        entry.sequences.push(frame.sequence);
        entry.chunks.push(frame.chunk);
        const i = entry.chunks.length - 1;
        entry.validations.push(validateChunk(frame.chunk).then((problems) => problems.map((p) => `chunk #${i} (seq ${frame.sequence}): ${p}`)));
        break;
      }
      case 'end':
      case 'no-active':
        entry.settled = frame.type;
        break;
      case 'error':
        entry.settled = 'error';
        entry.errorText = frame.errorText;
        break;
      case 'start':
        break;
      default:
        this.protocolProblems.push(`request ${entry.requestId}: unknown frame type ${frame.type}`);
    }
  }

  onClose(sock, code, reason) {
    sock.closed = { code, reason };
    for (const e of this.entries) if (e.socket === sock.index && e.settled === undefined) e.settled = 'socket-closed';
  }
}

/**
 * Problems of one chunk under ai@7's schema (what WebSocketChatTransport checks) and, with
 * strictV6, under ai@6.0.0's strict schema (the server's default dialect sends only ai@6.0.0 keys,
 * as on SSE without `x-countersign-dialect: full`).
 */
export async function validateChunk(chunk, { strictV6 = true } = {}) {
  const problems = [];
  const r7 = await ai7.uiMessageChunkSchema().validate(chunk);
  if (!r7.success) problems.push(`ai@7 uiMessageChunkSchema: ${describeError(r7.error)} in ${JSON.stringify(chunk).slice(0, 300)}`);
  if (strictV6) {
    const r6 = await ai6.uiMessageChunkSchema().validate(chunk);
    if (!r6.success) problems.push(`ai@6.0.0 strict uiMessageChunkSchema: ${describeError(r6.error)} in ${JSON.stringify(chunk).slice(0, 300)}`);
  }
  return problems;
}

/**
 * A harness whose chat talks over WebSocketChatTransport. Everything else is the SSE Harness.
 * Views: `log` = this chat's requests (send and resume entries), `sends` / `posts` = its sends,
 * `resumes` = its resumes; `link` = the transport and its sockets.
 */
export class WsHarness extends Harness {
  /** @param {object} o  Harness options (version is always ai7), plus `link` to share a socket. */
  constructor({ link, headers, params, timing, baseUrl = BASE_URL, ...rest }) {
    const theLink = link ?? new WsLink({ baseUrl, headers, params, timing });
    super({
      ...rest,
      baseUrl,
      version: WS_VERSION,
      transport: (h) => {
        h.link = theLink;
        return theLink.transport;
      },
    });
    this.ownsLink = link == null;
    this.strictV6 = !/^full$/i.test(theLink.headers?.['x-countersign-dialect'] ?? '');
    this.link.register(this);
  }

  // The base constructor assigns these; the WS views are derived from the link.
  get log() {
    return this.link ? this.link.entries.filter((e) => e.chatId === this.chatId) : [];
  }
  set log(_) {}
  get inflight() {
    return this.log.filter((e) => e.settled === undefined).length;
  }
  set inflight(_) {}

  get sends() {
    return this.log.filter((e) => e.kind === 'send');
  }
  get posts() {
    return this.sends;
  }
  get resumes() {
    return this.log.filter((e) => e.kind === 'resume');
  }

  dropSocket() {
    return this.link.dropSocket();
  }

  /** Closes the transport (an open socket keeps the test process alive). */
  close() {
    if (this.ownsLink) this.link.close();
  }

  assertHealthy() {
    assert.deepEqual(this.link.protocolProblems, [], `[ws] protocol problems\n${this.dump()}`);
    super.assertHealthy();
  }

  dump(maxFrames = 60) {
    const out = [`--- chat ${this.chatId} (ws ${SDKS.ai7.version}) status=${this.chat.status} url=${this.link.url}`];
    for (const s of this.link.sockets) out.push(`  socket #${s.index} ${s.url}${s.closed ? ` closed ${s.closed.code} ${s.closed.reason}` : ' open'}`);
    this.log.forEach((e, i) => {
      out.push(`#${i + 1} ${e.kind} ${e.requestId} on socket #${e.socket} -> ${e.settled ?? 'in flight'}${e.errorText ? ` errorText=${JSON.stringify(e.errorText)}` : ''}${e.abortSent ? ' (abort sent)' : ''}${e.framesAfterSettle ? ` (+${e.framesAfterSettle} frames after)` : ''}`);
      if (e.kind === 'send') out.push(`  request: ${summarize(e.request)}`);
      const lines = e.frames.map((f) => (f.type === 'chunk' ? `${f.sequence} ${JSON.stringify(f.chunk)}` : `[${f.type}]`));
      const shown = lines.length > maxFrames ? [...lines.slice(0, maxFrames / 2), `…[${lines.length - maxFrames} frames cut]…`, ...lines.slice(-maxFrames / 2)] : lines;
      for (const l of shown) out.push(`  | ${l.slice(0, 300)}`);
    });
    if (this.link.protocolProblems.length) out.push(`  protocol problems: ${this.link.protocolProblems.join(' / ')}`);
    out.push(`  final messages: ${JSON.stringify(this.messages, null, 0).slice(0, 4000)}`);
    return out.join('\n');
  }
}

function summarize(frame) {
  const last = frame.messages?.at(-1);
  const parts = (last?.parts ?? [])
    .map((p) =>
      isToolPart(p)
        ? `${p.type}[${p.state}${p.approval ? ` approval=${JSON.stringify(p.approval)}` : ''}${p.output !== undefined ? ' +output' : ''}]`
        : p.type === 'text'
          ? `text(${JSON.stringify(p.text.slice(0, 40))})`
          : p.type,
    )
    .join(', ');
  return `id=${frame.id} trigger=${frame.trigger} messageId=${frame.messageId} headers=${JSON.stringify(frame.headers)} messages=${frame.messages?.length} last=${last?.role}:${last?.id} [${parts}]`;
}

/**
 * The WebSocket equivalent of assertSseFraming for one completed request:
 *  - it ended with `end` (not error / no-active / a dropped socket), and nothing came after;
 *  - only start/chunk/end frames, `start` (mandatory for a resume) before the first chunk;
 *  - chunk sequences exactly 0, 1, 2, … (what the transport requires: a gap kills the socket);
 *  - first chunk `start`, last chunk `finish`;
 *  - every chunk valid under ai@7's schema (and ai@6.0.0's strict one for the default dialect).
 */
export async function assertWsFraming(entry, label = '', { strictV6 = true } = {}) {
  const where = `${label} ${entry.kind} ${entry.requestId}`;
  assert.equal(entry.settled, 'end', `${where}: response did not end with an end frame (settled=${entry.settled}${entry.errorText ? `, errorText=${entry.errorText}` : ''})`);
  const types = entry.frames.map((f) => f.type);
  for (const t of types) assert.ok(SERVER_TYPES.has(t), `${where}: unknown frame type ${t}`);
  assert.equal(types.at(-1), 'end', `${where}: last frame is end`);
  assert.equal(types.filter((t) => t === 'end').length, 1, `${where}: one end frame`);
  const firstChunk = types.indexOf('chunk');
  types.forEach((t, i) => {
    if (t === 'start') assert.ok(firstChunk === -1 || i < firstChunk, `${where}: start frame after a chunk`);
  });
  if (entry.kind === 'resume') assert.equal(types[0], 'start', `${where}: a resume that has a stream answers start first`);
  assert.deepEqual(entry.sequences, entry.sequences.map((_, i) => i), `${where}: chunk sequences must be 0,1,2,… per request`);
  assert.ok(entry.chunks.length > 0, `${where}: no chunks`);
  assert.equal(entry.chunks[0]?.type, 'start', `${where}: first chunk is not start`);
  assert.equal(entry.chunks.at(-1)?.type, 'finish', `${where}: last chunk is not finish`);
  // Every chunk was validated on arrival against both schemas; the strict ai@6.0.0 verdict only
  // counts for the default dialect.
  const problems = (await Promise.all(entry.validations)).flat();
  assert.deepEqual(problems.filter((p) => strictV6 || !p.includes('ai@6.0.0')), [], `${where}: chunk schema`);
}

/** Contract checks shared by the approval scenarios (WS version of assertPauseResponse). */
export async function assertWsPauseResponse(h, entry, label) {
  await assertWsFraming(entry, label, { strictV6: h.strictV6 });
  assert.equal(entry.chunks.at(-1).finishReason, 'tool-calls', `${label}: a response that waits for approval must finish with finishReason "tool-calls"`);
  const text = entry.chunks.filter((c) => c.type?.startsWith('text-'));
  assert.deepEqual(text, [], `${label}: text is held (ADR 0004): a response that ends waiting for approval must carry no text`);
}

/** Every send's `start` reuses the assistant message id of the first response; one assistant message. */
export function assertWsSameMessageId(h) {
  const ids = h.sends.map((e) => e.chunks.find((c) => c.type === 'start')?.messageId);
  assert.ok(ids[0], 'the first response must send start.messageId');
  for (const [i, id] of ids.entries())
    assert.equal(id, ids[0], `response #${i + 1}: start.messageId must reuse the assistant message id (${ids[0]})`);
  const assistants = h.messages.filter((m) => m.role === 'assistant');
  assert.equal(assistants.length, 1, 'the continuation must extend ONE assistant message, not add another');
  assert.equal(assistants[0].id, ids[0]);
}

/** All of this chat's requests went over one socket (the transport reuses it between turns). */
export function assertOneSocket(h) {
  assert.equal(h.link.sockets.length, 1, 'one WebSocket for the whole chat');
  for (const e of h.log) assert.equal(e.socket, 0, `${e.kind} ${e.requestId} went over socket #${e.socket}`);
}

/** The text a response streamed (text-delta concatenated, in order). */
export const wsStreamedText = (entry) =>
  entry.chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('');

/** HTTP status of GET /api/chat/{id}/stream (the SSE resume endpoint), body discarded. */
export async function sseResumeStatus(baseUrl, chatId) {
  const ctl = new AbortController();
  const res = await fetch(`${baseUrl}/api/chat/${encodeURIComponent(chatId)}/stream`, { signal: ctl.signal });
  ctl.abort();
  return res.status;
}

/** GET /api/chats/{id}: {chat_id, messages, pending, server_now_ms, streaming}. */
export async function chatSnapshot(baseUrl, chatId) {
  const res = await fetch(`${baseUrl}/api/chats/${encodeURIComponent(chatId)}`);
  assert.equal(res.status, 200, `GET /api/chats/{id}: ${res.status}`);
  return res.json();
}

/** Polls an async condition. */
export async function pollUntil(cond, timeoutMs, what) {
  const t0 = Date.now();
  for (;;) {
    if (await cond()) return;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}
