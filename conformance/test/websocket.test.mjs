// The WebSocket chat endpoint (ws://<host>/api/chat) driven by ai@7's own AbstractChat +
// WebSocketChatTransport over the npm `ws` package (Node 20 has no global WebSocket) — what
// useChat({ transport: new WebSocketChatTransport({ url: '/api/chat' }) }) does in a browser.
//
// Wire protocol (ai@7.0.173, src/ui/websocket-chat-transport.ts): the client sends JSON text
// frames {type: 'send', requestId, id, trigger, messageId?, messages, headers, body},
// {type: 'resume', requestId, id, headers, body} and {type: 'abort', requestId}; the server answers
// per requestId with {type: 'start'}, {type: 'chunk', sequence: 0,1,2,…, chunk}, {type: 'end'},
// {type: 'error', errorText} or {type: 'no-active'}. One socket carries every turn (and every
// chat sharing the transport). The transport validates each chunk with the package's
// uiMessageChunkSchema and kills the socket on a malformed frame or a sequence gap; the recorder
// (lib/ws-driver.mjs) additionally checks each chunk against ai@6.0.0's strict schema (the
// server's default dialect) and the framing (assertWsFraming).
//
// Options: the transport's `headers` travel inside every send/resume frame (names lower-cased):
// `x-countersign-text: progressive|hold`, `x-countersign-dialect: full`; its `params` go on the
// upgrade URL (`?text=`, ADR 0004). A `timing` asks for a text timing both ways.
//
// Scenarios: plain text; server tool (weather); approval approved / denied with a reason; two
// parallel approvals answered in either order; browser tool (get_location) Pattern A and B;
// abort (chat.stop() sends `abort`: the turn must really stop, GET /api/chat/{id}/stream -> 204,
// resume -> no-active, the chat goes on on the same socket); resume after a dropped socket
// (slow server, "/lorem 2000", both text timings, same chat and reloaded page); two chats
// multiplexed on one socket; a request-level error (`error` frame, socket kept).
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  SDKS, SLOW_BASE_URL, BASE_URL, withEvidence, toolParts, textOf, textParts, assertTextDone, wordCount, waitFor, sleep,
} from '../lib/driver.mjs';
import {
  WsHarness, WsLink, assertWsFraming, assertWsPauseResponse, assertWsSameMessageId, assertOneSocket,
  wsStreamedText, wsChatUrl, sseResumeStatus, chatSnapshot, pollUntil, closeAllLinks,
} from '../lib/ws-driver.mjs';

const GEO = { latitude: 48.8566, longitude: 2.3522, accuracy: 25, city: 'Paris' };
const WORDS = 2000;
const CUT_AFTER = 100;
// Both timings are asked for explicitly (ADR 0004: /api/chat streams text by default, hold is
// opt-in), so the test does not depend on the server's default.
const TIMINGS = ['progressive', 'hold'];

/** Runs fn with evidence, and always closes the harness's socket (an open ws keeps node alive). */
async function run(h, fn) {
  try {
    await withEvidence(h, fn);
  } finally {
    h.close();
  }
}

async function startPayment(h, prompt, count) {
  await h.send(prompt);
  h.assertHealthy();
  assert.equal(h.sends.length, 1, 'the first response ends waiting for approval (no automatic send yet)');
  await assertWsPauseResponse(h, h.sends[0], 'response #1');
  assert.equal(h.finishes.at(-1)?.finishReason, 'tool-calls', 'onFinish finishReason of the pause');
  assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant']);
  const parts = toolParts(h.assistant, 'process_payment');
  assert.equal(parts.length, count, `${count} process_payment part(s)`);
  for (const p of parts) {
    assert.equal(p.state, 'approval-requested', 'tool part waits for approval');
    assert.equal(typeof p.approval?.id, 'string', 'approval.id');
  }
  assert.equal(textOf(h.assistant), '', 'no text before the decision (held)');
  return parts;
}

async function assertContinuation(h, entry, label) {
  await assertWsFraming(entry, label, { strictV6: h.strictV6 });
  assert.equal(entry.request.trigger, 'submit-message');
  assert.equal(entry.request.id, h.chatId);
  assert.equal(entry.request.messageId, h.sends[0].chunks[0].messageId, 'messageId = the assistant message id (lastMessage.id)');
  assert.equal(entry.chunks.at(-1).finishReason, 'stop');
}

async function askLocation(h) {
  await h.send('Where am I?');
  h.assertHealthy();
  assert.equal(h.sends.length, 1);
  await assertWsPauseResponse(h, h.sends[0], 'response #1');
  const [p, ...more] = toolParts(h.assistant, 'get_location');
  assert.ok(p, 'a tool-get_location part');
  assert.deepEqual(more, []);
  assert.deepEqual(p.input, {});
  assert.equal(p.state, 'approval-requested');
  assert.equal(typeof p.approval?.id, 'string');
  return p;
}

function assertLocated(h) {
  const done = toolParts(h.assistant, 'get_location')[0];
  assert.equal(done.state, 'output-available');
  assert.deepEqual(done.output, GEO);
  assert.equal(done.approval?.approved, true);
  assert.match(textOf(h.assistant), /Paris/, 'text mentions Paris');
  assertTextDone(h.assistant);
  assert.equal(h.sends.at(-1).chunks.at(-1).finishReason, 'stop');
}

/** Sends "/lorem 2000", waits until mid-stream, then cuts the TCP connection (no abort frame). */
async function startAndDrop(h, timing) {
  const sending = h.chat.sendMessage({ text: `/lorem ${WORDS}` });
  if (timing === 'progressive') {
    await waitFor(() => h.chat.status === 'error' || wordCount(textOf(h.assistant)) >= CUT_AFTER, 20000, `${CUT_AFTER} words of /lorem`);
  } else {
    await waitFor(() => h.chat.status === 'error' || h.assistant != null, 20000, 'the start chunk of /lorem');
    await sleep(200);
  }
  h.assertHealthy();
  const dropped = h.dropSocket();
  await sending;
  await h.waitIdle();
  // The transport reports a lost socket as a TypeError "…network connection closed (code 1006)."
  // and the Chat classifies it as a disconnect (resumable), not as an abort.
  assert.equal(h.chat.status, 'error', 'a dropped socket leaves the chat in error (disconnect)');
  assert.equal(h.errors.length, 1, `one error: ${h.errors.map(String).join(' / ')}`);
  assert.ok(h.errors[0] instanceof TypeError && /network connection closed/.test(h.errors[0].message), `disconnect error: ${h.errors[0]}`);
  assert.equal(h.finishes.at(-1)?.isDisconnect, true, 'onFinish isDisconnect');
  assert.equal(h.finishes.at(-1)?.isAbort, false, 'not an abort');
  assert.equal(h.sends.length, 1);
  assert.equal(h.sends[0].settled, 'socket-closed');
  assert.equal(h.sends[0].abortSent, false, 'a dropped socket sends no abort');
  assert.equal(dropped.closed?.code, 1006);
  h.errors.length = 0; // expected; resumeStream() clears chat.error itself
  const partial = textOf(h.assistant);
  assert.ok(wordCount(partial) < WORDS, `the whole text arrived before the drop (${wordCount(partial)} words): raise COUNTERSIGN_DEMO_DELAY_MS`);
  if (timing === 'hold') assert.equal(partial, '', 'hold: no text before the step ends');
  return { partial, partialId: h.assistant.id, user: h.messages.find((m) => m.role === 'user') };
}

/** The resume request: start first, a full replay from sequence 0 with the same message id, end. */
async function assertWsReplay(h, messageId, partial) {
  assert.equal(h.resumes.length, 1, 'one resume request');
  const r = h.resumes[0];
  assert.equal(r.request.id, h.chatId);
  assert.equal(r.request.lastSequence, undefined, 'ai@7 omits lastSequence (asks for a complete replay)');
  await assertWsFraming(r, 'resume', { strictV6: h.strictV6 });
  assert.equal(r.chunks[0].messageId, messageId, 'the replay start carries the same assistant message id');
  const replayText = wsStreamedText(r);
  assert.equal(wordCount(replayText), WORDS, 'the replay carries all 2000 words');
  assert.ok(replayText.startsWith(partial), 'the replay begins with exactly what the dropped socket had delivered');
  assert.equal(r.chunks.filter((c) => c.type === 'start').length, 1, 'one start in the replay');
  assert.equal(r.chunks.filter((c) => c.type === 'text-start').length, 1, 'one text part in the replay');
  assert.equal(r.chunks.at(-1).finishReason, 'stop');
  return replayText;
}

/** After the turn: a WS resume answers no-active (messages untouched) and the SSE GET 204. */
async function assertNothingToResume(h, baseUrl) {
  const before = JSON.stringify(h.messages);
  const resumes = h.resumes.length;
  await h.chat.resumeStream();
  await h.waitIdle();
  h.assertHealthy();
  assert.equal(h.resumes.length, resumes + 1);
  const r = h.resumes.at(-1);
  assert.equal(r.settled, 'no-active', 'resume after the turn ended answers no-active');
  assert.deepEqual(r.frames.map((f) => f.type), ['no-active'], 'no-active alone (no start, no chunks)');
  assert.equal(h.chat.status, 'ready');
  assert.equal(JSON.stringify(h.messages), before, 'no-active leaves the messages unchanged');
  assert.equal(await sseResumeStatus(baseUrl, h.chatId), 204, 'GET /api/chat/{id}/stream answers 204');
}

describe(`ai7 (ai@${SDKS.ai7.version}) over WebSocketChatTransport`, { concurrency: true }, () => {
  // A timed-out test never reaches its finally: close what it left open, or node never exits.
  after(() => closeAllLinks());

  it('plain text: "What can you do?"', { timeout: 60000 }, async () => {
    const h = new WsHarness({ scenario: 'ws-text' });
    await run(h, async () => {
      await h.send('What can you do?');
      h.assertHealthy();
      assert.equal(h.link.sockets[0].url, wsChatUrl(BASE_URL), 'the socket opened at ws://<host>/api/chat, nothing appended');
      assert.equal(h.sends.length, 1, 'one request');
      const req = h.sends[0].request;
      assert.equal(req.id, h.chatId);
      assert.equal(req.trigger, 'submit-message');
      assert.equal(req.messageId, undefined);
      await assertWsFraming(h.sends[0], 'response #1', { strictV6: h.strictV6 });
      assert.equal(h.sends[0].chunks.at(-1).finishReason, 'stop');
      assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant']);
      assert.deepEqual(toolParts(h.assistant), [], 'no tool parts');
      assert.ok(textOf(h.assistant).trim().length > 0, 'assistant text is not empty');
      assertTextDone(h.assistant);
      assert.equal(h.finishes.at(-1)?.finishReason, 'stop', 'onFinish finishReason');
      // The socket stays open for the next turn.
      await h.send('What can you do?');
      h.assertHealthy();
      assert.equal(h.sends.length, 2);
      assert.notEqual(h.sends[1].requestId, h.sends[0].requestId, 'a fresh requestId per request');
      await assertWsFraming(h.sends[1], 'response #2', { strictV6: h.strictV6 });
      assertOneSocket(h);
      assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    });
  });

  it('server tool: "What\'s the weather in Tokyo?"', { timeout: 60000 }, async () => {
    const h = new WsHarness({ scenario: 'ws-weather' });
    await run(h, async () => {
      await h.send("What's the weather in Tokyo?");
      h.assertHealthy();
      assert.equal(h.sends.length, 1, 'one request: get_weather needs no approval');
      await assertWsFraming(h.sends[0], 'response #1', { strictV6: h.strictV6 });
      assert.equal(h.sends[0].chunks.at(-1).finishReason, 'stop');
      const a = h.assistant;
      const [w, ...more] = toolParts(a, 'get_weather');
      assert.ok(w, 'a tool-get_weather part');
      assert.deepEqual(more, [], 'exactly one get_weather call');
      assert.equal(w.state, 'output-available');
      assert.match(String(w.input?.location), /tokyo/i, 'input.location');
      assert.match(String(w.output?.location), /tokyo/i, 'output.location');
      assert.equal(w.approval, undefined, 'no approval on a tool that needs none');
      assert.match(textOf(a), /Tokyo/, 'text mentions Tokyo');
      assertTextDone(a);
      assert.ok(a.parts.findIndex((p) => p.type === 'text') > a.parts.indexOf(w), 'text follows the tool result');
    });
  });

  it('payment approved: "Send $50 to Hanako"', { timeout: 60000 }, async () => {
    const h = new WsHarness({ scenario: 'ws-pay-approve' });
    await run(h, async () => {
      const [p] = await startPayment(h, 'Send $50 to Hanako', 1);
      assert.deepEqual(p.input, { amount: 50, recipient: 'Hanako', currency: 'USD', description: '' });
      await h.approve(p.approval.id);
      await h.waitIdle();
      h.assertHealthy();
      assert.equal(h.sends.length, 2, 'exactly one automatic send after the approval');
      const sent = toolParts(h.sends[1].request.messages.at(-1), 'process_payment')[0];
      assert.equal(sent.state, 'approval-responded', 'send #2 carries the approval');
      assert.equal(sent.approval.id, p.approval.id);
      assert.equal(sent.approval.approved, true);
      await assertContinuation(h, h.sends[1], 'response #2');
      assertWsSameMessageId(h);
      assertOneSocket(h);
      const done = toolParts(h.assistant, 'process_payment')[0];
      assert.equal(done.state, 'output-available');
      assert.equal(done.output?.success, true);
      assert.equal(done.output?.wallet_balance, 950);
      assert.equal(done.approval?.approved, true, 'approval kept on the part');
      assert.match(textOf(h.assistant), /950/, 'text mentions the new balance 950');
      assertTextDone(h.assistant);
    });
  });

  it('payment denied with a reason', { timeout: 60000 }, async () => {
    const h = new WsHarness({ scenario: 'ws-pay-deny' });
    const reason = 'I do not know this Hanako';
    await run(h, async () => {
      const [p] = await startPayment(h, 'Send $50 to Hanako', 1);
      await h.deny(p.approval.id, reason);
      await h.waitIdle();
      h.assertHealthy();
      assert.equal(h.sends.length, 2, 'exactly one automatic send after the denial');
      const sent = toolParts(h.sends[1].request.messages.at(-1), 'process_payment')[0];
      assert.equal(sent.state, 'approval-responded');
      assert.equal(sent.approval.approved, false);
      assert.equal(sent.approval.reason, reason, 'the reason travels in approval.reason');
      await assertContinuation(h, h.sends[1], 'response #2');
      assertWsSameMessageId(h);
      assertOneSocket(h);
      const done = toolParts(h.assistant, 'process_payment')[0];
      assert.equal(done.state, 'output-denied');
      assert.equal(done.output, undefined, 'no output on a denied call');
      assert.equal(done.approval?.approved, false);
      assert.equal(done.approval?.reason, reason);
      assert.ok(textOf(h.assistant).includes(reason), `text mentions the reason: ${JSON.stringify(textOf(h.assistant))}`);
      assertTextDone(h.assistant);
    });
  });

  for (const order of ['Alice first', 'Bob first']) {
    it(`two parallel payments, answered ${order}: approve Alice, deny Bob`, { timeout: 60000 }, async () => {
      const h = new WsHarness({ scenario: `ws-pay-parallel-${order === 'Alice first' ? 'ab' : 'ba'}` });
      await run(h, async () => {
        const parts = await startPayment(h, 'Pay Alice 30 dollars and Bob 40 dollars', 2);
        const alice = parts.find((p) => p.input?.recipient === 'Alice');
        const bob = parts.find((p) => p.input?.recipient === 'Bob');
        assert.ok(alice && bob, `one call for Alice and one for Bob: ${JSON.stringify(parts.map((p) => p.input))}`);
        assert.notEqual(alice.approval.id, bob.approval.id, 'each call has its own approval id');
        const a = h.assistant;
        const stepOf = (part) => a.parts.slice(0, a.parts.indexOf(part)).filter((x) => x.type === 'step-start').length;
        assert.equal(stepOf(alice), stepOf(bob), 'both calls are in the same step');

        const answers = [() => h.approve(alice.approval.id), () => h.deny(bob.approval.id, 'Not Bob')];
        if (order === 'Bob first') answers.reverse();
        await answers[0]();
        await h.waitIdle();
        await sleep(50);
        h.assertHealthy();
        assert.equal(h.sends.length, 1, 'no send while one approval is still unanswered');
        await answers[1]();
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.sends.length, 2, 'one send carrying both answers');
        const sent = toolParts(h.sends[1].request.messages.at(-1), 'process_payment');
        assert.deepEqual(
          sent.map((p) => [p.input.recipient, p.state, p.approval.approved]).sort(),
          [['Alice', 'approval-responded', true], ['Bob', 'approval-responded', false]],
        );
        await assertContinuation(h, h.sends[1], 'response #2');
        assertWsSameMessageId(h);
        assertOneSocket(h);
        const done = toolParts(h.assistant, 'process_payment');
        const doneAlice = done.find((p) => p.toolCallId === alice.toolCallId);
        const doneBob = done.find((p) => p.toolCallId === bob.toolCallId);
        assert.equal(doneAlice.state, 'output-available');
        assert.equal(doneAlice.output?.wallet_balance, 970);
        assert.equal(doneBob.state, 'output-denied');
        assert.ok(textOf(h.assistant).trim().length > 0, 'final text');
        assertTextDone(h.assistant);
      });
    });
  }

  it('get_location, Pattern A: approval + browser output in one send', { timeout: 60000 }, async () => {
    const h = new WsHarness({ scenario: 'ws-geo-a', autoSend: 'patternA' });
    await run(h, async () => {
      const p = await askLocation(h);
      await h.approve(p.approval.id);
      await h.waitIdle();
      await sleep(50);
      h.assertHealthy();
      assert.equal(h.sends.length, 1, 'Pattern A: the approval alone sends nothing');
      await h.toolOutput('get_location', p.toolCallId, GEO);
      await h.waitIdle();
      h.assertHealthy();
      assert.equal(h.sends.length, 2, 'one send carrying approval and output');
      const sent = toolParts(h.sends[1].request.messages.at(-1), 'get_location')[0];
      assert.equal(sent.state, 'output-available');
      assert.deepEqual(sent.output, GEO);
      assert.equal(sent.approval?.id, p.approval.id);
      assert.equal(sent.approval?.approved, true);
      await assertWsFraming(h.sends[1], 'response #2', { strictV6: h.strictV6 });
      assertWsSameMessageId(h);
      assertOneSocket(h);
      assertLocated(h);
    });
  });

  it('get_location, Pattern B: approval send, then a separate output send', { timeout: 60000 }, async () => {
    const h = new WsHarness({ scenario: 'ws-geo-b', autoSend: 'patternB' });
    await run(h, async () => {
      const p = await askLocation(h);
      await h.approve(p.approval.id);
      await h.waitIdle();
      h.assertHealthy();
      assert.equal(h.sends.length, 2, 'Pattern B: the approval is sent on its own');
      const sentApproval = toolParts(h.sends[1].request.messages.at(-1), 'get_location')[0];
      assert.equal(sentApproval.state, 'approval-responded');
      await assertWsFraming(h.sends[1], 'response #2', { strictV6: h.strictV6 });
      assert.equal(h.sends[1].chunks.at(-1).finishReason, 'tool-calls', 'response #2 ends waiting for the browser (finish tool-calls, then end)');
      assert.deepEqual(h.sends[1].chunks.filter((c) => c.type?.startsWith('text-')), [], 'no text while waiting (held)');
      await h.toolOutput('get_location', p.toolCallId, GEO);
      await h.waitIdle();
      h.assertHealthy();
      assert.equal(h.sends.length, 3, 'a separate send carrying the output');
      const sentOutput = toolParts(h.sends[2].request.messages.at(-1), 'get_location')[0];
      assert.equal(sentOutput.state, 'output-available');
      assert.deepEqual(sentOutput.output, GEO);
      await assertWsFraming(h.sends[2], 'response #3', { strictV6: h.strictV6 });
      assertWsSameMessageId(h);
      assertOneSocket(h);
      assertLocated(h);
    });
  });

  it('abort: chat.stop() sends abort and the turn really stops; the chat goes on on the same socket', { timeout: 90000 }, async () => {
    const h = new WsHarness({ scenario: 'ws-abort', baseUrl: SLOW_BASE_URL, timing: 'progressive' });
    await run(h, async () => {
      const sending = h.chat.sendMessage({ text: `/lorem ${WORDS}` });
      await waitFor(() => h.chat.status === 'error' || wordCount(textOf(h.assistant)) >= CUT_AFTER, 20000, `${CUT_AFTER} words of /lorem`);
      h.assertHealthy();
      await h.chat.stop();
      await sending;
      await h.waitIdle();
      h.assertHealthy();
      const send = h.sends[0];
      assert.equal(send.settled, 'abort', 'the client ended the request by abort');
      const aborts = h.link.sockets[0].frames.filter((f) => f.dir === 'out' && f.frame.type === 'abort');
      assert.deepEqual(aborts.map((f) => f.frame), [{ type: 'abort', requestId: send.requestId }], 'one abort frame naming the send');
      assert.equal(h.finishes.at(-1)?.isAbort, true, 'onFinish isAbort');
      assert.equal(h.chat.status, 'ready', 'stop() leaves the chat ready');
      const partial = textOf(h.assistant);
      assert.ok(wordCount(partial) < WORDS, 'stopped mid-stream');

      // The turn really stops on the server (unlike a dropped socket): it no longer streams.
      await pollUntil(async () => (await sseResumeStatus(SLOW_BASE_URL, h.chatId)) === 204, 5000, 'GET /api/chat/{id}/stream -> 204 after abort');
      const snap = await chatSnapshot(SLOW_BASE_URL, h.chatId);
      assert.equal(snap.streaming, false, 'GET /api/chats/{id}: not streaming');
      const stored = snap.messages.filter((m) => m.role === 'assistant').at(-1);
      assert.ok(wordCount(textOf(stored)) < WORDS, `the server did not finish the 2000 words (${wordCount(textOf(stored))})`);
      await sleep(300);
      assert.equal(await sseResumeStatus(SLOW_BASE_URL, h.chatId), 204, 'still nothing streaming');
      await assertNothingToResume(h, SLOW_BASE_URL);

      // The chat goes on, on the same socket.
      await h.send('What can you do?');
      h.assertHealthy();
      await assertWsFraming(h.sends.at(-1), 'follow-up', { strictV6: h.strictV6 });
      assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
      assert.ok(textOf(h.messages.at(-1)).length > 0);
      assertOneSocket(h);
    });
  });

  for (const timing of TIMINGS) {
    it(`resume (${timing} text), same chat: socket dropped mid-stream, then resumeStream()`, { timeout: 90000 }, async () => {
      const h = new WsHarness({ scenario: `ws-resume-same-${timing}`, baseUrl: SLOW_BASE_URL, timing });
      await run(h, async () => {
        const { partial, partialId } = await startAndDrop(h, timing);
        await h.chat.resumeStream();
        await h.waitIdle(60000);
        h.assertHealthy();
        assert.equal(h.link.sockets.length, 2, 'the resume opened a new socket');
        assert.equal(h.resumes[0].socket, 1);
        const replayText = await assertWsReplay(h, partialId, partial);
        assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant'], 'no duplicated assistant message');
        assert.equal(h.assistant.id, partialId);
        // ai@7 resets the message on the replay's first start (resumeStreamIsReplay).
        assert.deepEqual(textParts(h.assistant).map((p) => p.text), [replayText], 'one text part with the replayed text');
        assert.equal(wordCount(textOf(h.assistant)), WORDS, 'all 2000 words, exactly once');
        assertTextDone(h.assistant);
        await assertNothingToResume(h, SLOW_BASE_URL);
      });
    });

    it(`resume (${timing} text), reloaded page: new chat with the persisted messages, resumeStream()`, { timeout: 90000 }, async () => {
      const first = new WsHarness({ scenario: `ws-resume-reload-${timing}`, baseUrl: SLOW_BASE_URL, timing });
      let dropped;
      await run(first, async () => {
        dropped = await startAndDrop(first, timing);
      });
      const h = new WsHarness({
        scenario: `ws-resume-reload-${timing}`, baseUrl: SLOW_BASE_URL, chatId: first.chatId, messages: [dropped.user], timing,
      });
      await run(h, async () => {
        await h.chat.resumeStream();
        await h.waitIdle(60000);
        h.assertHealthy();
        const replayText = await assertWsReplay(h, dropped.partialId, dropped.partial);
        assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant']);
        assert.equal(h.assistant.id, dropped.partialId, 'the assistant message has the server id');
        assert.deepEqual(textParts(h.assistant).map((p) => p.text), [replayText], 'one text part');
        assert.equal(wordCount(textOf(h.assistant)), WORDS, 'all 2000 words, exactly once');
        await assertNothingToResume(h, SLOW_BASE_URL);
      });
    });
  }

  it('two chats share one socket: concurrent turns multiplexed by requestId', { timeout: 90000 }, async () => {
    const link = new WsLink({ baseUrl: SLOW_BASE_URL, timing: 'progressive' });
    const a = new WsHarness({ scenario: 'ws-mux-a', baseUrl: SLOW_BASE_URL, link, timing: 'progressive' });
    const b = new WsHarness({ scenario: 'ws-mux-b', baseUrl: SLOW_BASE_URL, link, timing: 'progressive' });
    try {
      await withEvidence(a, async () => {
        await Promise.all([a.send('/lorem 300'), b.send('/lorem 200')]);
        a.assertHealthy();
        b.assertHealthy();
        assert.equal(link.sockets.length, 1, 'both chats on one socket');
        await assertWsFraming(a.sends[0], 'chat A', { strictV6: a.strictV6 });
        await assertWsFraming(b.sends[0], 'chat B', { strictV6: b.strictV6 });
        assert.equal(wordCount(textOf(a.assistant)), 300);
        assert.equal(wordCount(textOf(b.assistant)), 200);
        // Interleaved: the socket does not serialize the two turns.
        const owners = link.sockets[0].frames
          .filter((f) => f.dir === 'in' && f.frame?.type === 'chunk')
          .map((f) => f.frame.requestId);
        const firstB = owners.indexOf(b.sends[0].requestId);
        const lastA = owners.lastIndexOf(a.sends[0].requestId);
        assert.ok(firstB !== -1 && firstB < lastA, 'chunks of the two turns interleave on the socket');
      });
    } finally {
      link.close();
    }
  });

  it('unknown approval id -> an error frame for that request; the socket stays usable', { timeout: 60000 }, async () => {
    const BOGUS = 'appr-does-not-exist-0000';
    const forge = (messages) => {
      const forged = structuredClone(messages);
      for (const p of forged.at(-1).parts)
        if (p.type === 'tool-process_payment') {
          p.state = 'approval-responded';
          p.approval = { id: BOGUS, approved: true };
        }
      return forged;
    };
    const h = new WsHarness({ scenario: 'ws-bad-approval' });
    await run(h, async () => {
      await h.send('Send $50 to Hanako');
      h.assertHealthy();
      const [p] = toolParts(h.assistant, 'process_payment');
      assert.equal(p?.state, 'approval-requested');
      const genuine = structuredClone(h.messages);
      // What the HTTP endpoint answers to the same forged body (for the error code).
      const res = await fetch(h.api, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: h.chatId, messages: forge(genuine), trigger: 'submit-message', messageId: genuine.at(-1).id }),
      });
      const httpError = await res.json();
      assert.ok(res.status >= 400 && res.status < 500, `HTTP ${res.status}`);

      h.chat.messages = forge(genuine);
      await h.chat.sendMessage();
      await h.waitIdle();
      const bad = h.sends.at(-1);
      assert.equal(bad.settled, 'error', `the forged send is answered by an error frame (settled=${bad.settled})`);
      assert.deepEqual(bad.frames.map((f) => f.type), ['error'], 'an error frame alone');
      assert.ok(typeof bad.errorText === 'string' && bad.errorText.includes(httpError.error.code), `errorText carries the code ${httpError.error.code}: ${bad.errorText}`);
      assert.equal(h.chat.status, 'error');
      assert.equal(h.chat.error?.message, bad.errorText, 'chat.error.message = errorText');
      assert.ok(!(h.chat.error instanceof TypeError), 'an error frame is not a disconnect');
      assert.equal(h.link.sockets[0].closed, undefined, 'the socket stays open');

      h.errors.length = 0;
      h.chat.clearError();
      h.chat.messages = genuine;
      await h.approve(p.approval.id);
      await h.waitIdle();
      h.assertHealthy();
      const done = toolParts(h.assistant, 'process_payment')[0];
      assert.equal(done.state, 'output-available', 'the real approval still works after the rejected one');
      assert.equal(done.output?.wallet_balance, 950, 'the forged approval moved no money');
      assertOneSocket(h);
    });
  });
});
