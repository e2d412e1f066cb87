// Server tool that needs approval (process_payment): approve, deny with a reason, two parallel
// calls in one response, and a sequential chain (weather, then a payment) — driven with the
// package's own lastAssistantMessageIsCompleteWithApprovalResponses as sendAutomaticallyWhen,
// exactly what the AI SDK docs tell a tool-approval app to do.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  VERSIONS, SDKS, Harness, withEvidence, assertSseFraming, assertPauseResponse, assertSameMessageId,
  chunksOf, toolParts, textOf, assertTextDone, sleep,
} from '../lib/driver.mjs';

/** Starts a payment turn and returns the approval-requested parts. */
async function startPayment(h, prompt, count) {
  await h.send(prompt);
  h.assertHealthy();
  assert.equal(h.posts.length, 1, 'the first response ends waiting for approval (no automatic send yet)');
  assertPauseResponse(h, h.posts[0], 'response #1');
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

function assertContinuation(h, entry, label) {
  assertSseFraming(entry, label);
  assert.equal(entry.body.trigger, 'submit-message');
  assert.equal(entry.body.id, h.chatId);
  assert.equal(entry.body.messageId, h.posts[0] && chunksOf(h.posts[0])[0].messageId, 'messageId = the assistant message id (lastMessage.id)');
  assert.equal(chunksOf(entry).at(-1).finishReason, 'stop');
}

for (const version of VERSIONS) {
  describe(`${version} (ai@${SDKS[version].version})`, () => {
    it('payment approved: "Send $50 to Hanako"', { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'pay-approve' });
      await withEvidence(h, async () => {
        const [p] = await startPayment(h, 'Send $50 to Hanako', 1);
        assert.deepEqual(p.input, { amount: 50, recipient: 'Hanako', currency: 'USD', description: '' });
        await h.approve(p.approval.id);
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.posts.length, 2, 'exactly one automatic request after the approval');
        const sent = toolParts(h.posts[1].body.messages.at(-1), 'process_payment')[0];
        assert.equal(sent.state, 'approval-responded', 'request #2 carries the approval');
        assert.equal(sent.approval.id, p.approval.id);
        assert.equal(sent.approval.approved, true);
        assertContinuation(h, h.posts[1], 'response #2');
        assertSameMessageId(h);
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
      const h = new Harness({ version, scenario: 'pay-deny' });
      const reason = 'I do not know this Hanako';
      await withEvidence(h, async () => {
        const [p] = await startPayment(h, 'Send $50 to Hanako', 1);
        await h.deny(p.approval.id, reason);
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.posts.length, 2, 'exactly one automatic request after the denial');
        const sent = toolParts(h.posts[1].body.messages.at(-1), 'process_payment')[0];
        assert.equal(sent.state, 'approval-responded');
        assert.equal(sent.approval.id, p.approval.id);
        assert.equal(sent.approval.approved, false);
        assert.equal(sent.approval.reason, reason, 'the reason travels in approval.reason');
        assertContinuation(h, h.posts[1], 'response #2');
        assertSameMessageId(h);
        const done = toolParts(h.assistant, 'process_payment')[0];
        assert.equal(done.state, 'output-denied');
        assert.equal(done.output, undefined, 'no output on a denied call');
        assert.equal(done.approval?.approved, false);
        assert.equal(done.approval?.reason, reason);
        const text = textOf(h.assistant);
        assert.ok(text.includes(reason), `text mentions the reason: ${JSON.stringify(text)}`);
        assertTextDone(h.assistant);
      });
    });

    it('two parallel payments in one response: approve Alice, deny Bob', { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'pay-parallel' });
      await withEvidence(h, async () => {
        const parts = await startPayment(h, 'Pay Alice 30 dollars and Bob 40 dollars', 2);
        const alice = parts.find((p) => p.input?.recipient === 'Alice');
        const bob = parts.find((p) => p.input?.recipient === 'Bob');
        assert.ok(alice && bob, `one call for Alice and one for Bob: ${JSON.stringify(parts.map((p) => p.input))}`);
        assert.equal(alice.input.amount, 30);
        assert.equal(bob.input.amount, 40);
        assert.notEqual(alice.approval.id, bob.approval.id, 'each call has its own approval id');
        // Both in the same step (parallel), not in two steps.
        const a = h.assistant;
        const stepOf = (part) => a.parts.slice(0, a.parts.indexOf(part)).filter((x) => x.type === 'step-start').length;
        assert.equal(stepOf(alice), stepOf(bob), 'both calls are in the same step');

        await h.approve(alice.approval.id);
        await h.waitIdle();
        await sleep(50);
        h.assertHealthy();
        assert.equal(h.posts.length, 1, 'no request while Bob is still unanswered');

        await h.deny(bob.approval.id, 'Not Bob');
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.posts.length, 2, 'one request carrying both answers');
        const sent = toolParts(h.posts[1].body.messages.at(-1), 'process_payment');
        assert.deepEqual(
          sent.map((p) => [p.input.recipient, p.state, p.approval.approved]).sort(),
          [['Alice', 'approval-responded', true], ['Bob', 'approval-responded', false]],
        );
        assertContinuation(h, h.posts[1], 'response #2');
        assertSameMessageId(h);
        const done = toolParts(h.assistant, 'process_payment');
        const doneAlice = done.find((p) => p.toolCallId === alice.toolCallId);
        const doneBob = done.find((p) => p.toolCallId === bob.toolCallId);
        assert.equal(doneAlice.state, 'output-available');
        assert.equal(doneAlice.output?.success, true);
        assert.equal(doneAlice.output?.wallet_balance, 970);
        assert.equal(doneBob.state, 'output-denied');
        assert.ok(textOf(h.assistant).trim().length > 0, 'final text');
        assertTextDone(h.assistant);
      });
    });

    it('sequential chain: weather in Paris, then a $5 payment to Bob', { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'chain' });
      await withEvidence(h, async () => {
        const [p] = await startPayment(h, 'check the weather in Paris, then send Bob $5', 1);
        const a = h.assistant;
        const [w] = toolParts(a, 'get_weather');
        assert.ok(w, 'the weather call ran in the same response');
        assert.equal(w.state, 'output-available');
        assert.match(String(w.output?.location), /paris/i);
        assert.equal(p.input.recipient, 'Bob');
        assert.equal(p.input.amount, 5);
        const stepOf = (part) => a.parts.slice(0, a.parts.indexOf(part)).filter((x) => x.type === 'step-start').length;
        assert.ok(stepOf(p) > stepOf(w), 'the payment is asked in a later step than the weather (sequential)');

        await h.approve(p.approval.id);
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.posts.length, 2);
        assertContinuation(h, h.posts[1], 'response #2');
        assertSameMessageId(h);
        const done = toolParts(h.assistant, 'process_payment')[0];
        assert.equal(done.state, 'output-available');
        assert.equal(done.output?.success, true);
        assert.equal(done.output?.wallet_balance, 995);
        assert.equal(toolParts(h.assistant, 'get_weather')[0].state, 'output-available', 'weather part unchanged');
        const text = textOf(h.assistant);
        assert.match(text, /Paris/, 'text mentions Paris');
        assert.match(text, /Bob/, 'text mentions Bob');
        assertTextDone(h.assistant);
      });
    });
  });
}
