// Browser-executed tool that needs approval (get_location), both ways the answers can travel:
//
// Pattern A — approval and browser output in ONE request. sendAutomaticallyWhen = the harness's
//   patternA predicate (lib/driver.mjs): an approved browser tool only counts as answered once it
//   has its output. addToolApprovalResponse(approved) therefore sends nothing; addToolOutput then
//   fires the ONE automatic request, whose last message has the get_location part in state
//   output-available with approval {id, approved: true} and the output.
//
// Pattern B — approval first, output in a separate request. sendAutomaticallyWhen = patternB: an
//   approval-responded part counts as answered. addToolApprovalResponse(approved) fires request
//   #2 at once (part in approval-responded); we wait until that response has ended; then
//   addToolOutput fires request #3 with the output.
//
// Why custom predicates: with the package's lastAssistantMessageIsCompleteWithApprovalResponses
// alone, the approval fires a request immediately (status becomes "submitted" synchronously), so
// an addToolOutput right after it lands while that request is in flight and is never sent (that
// helper needs an approval-responded part, and the output replaced it); and if the server's
// answer to the approval leaves the part in approval-responded, the helper is true again when the
// stream ends and the chat resends the same approval in a loop. Both predicates only fire for an
// answer that no request has carried yet.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  VERSIONS, SDKS, Harness, withEvidence, assertSseFraming, assertPauseResponse, assertSameMessageId,
  chunksOf, toolParts, textOf, assertTextDone, sleep,
} from '../lib/driver.mjs';

const GEO = { latitude: 48.8566, longitude: 2.3522, accuracy: 25, city: 'Paris' };

async function askLocation(h) {
  await h.send('Where am I?');
  h.assertHealthy();
  assert.equal(h.posts.length, 1);
  assertPauseResponse(h, h.posts[0], 'response #1');
  const [p, ...more] = toolParts(h.assistant, 'get_location');
  assert.ok(p, 'a tool-get_location part');
  assert.deepEqual(more, []);
  assert.equal(p.type, 'tool-get_location');
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
  assert.equal(chunksOf(h.posts.at(-1)).at(-1).finishReason, 'stop');
}

for (const version of VERSIONS) {
  describe(`${version} (ai@${SDKS[version].version})`, () => {
    it('get_location, Pattern A: approval + browser output in one request', { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'geo-a', autoSend: 'patternA' });
      await withEvidence(h, async () => {
        const p = await askLocation(h);
        await h.approve(p.approval.id);
        await h.waitIdle();
        await sleep(50);
        h.assertHealthy();
        assert.equal(h.posts.length, 1, 'Pattern A: the approval alone sends nothing');
        assert.equal(toolParts(h.assistant, 'get_location')[0].state, 'approval-responded');

        // The browser runs the Geolocation API and reports.
        await h.toolOutput('get_location', p.toolCallId, GEO);
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.posts.length, 2, 'one request carrying approval and output');
        const sent = toolParts(h.posts[1].body.messages.at(-1), 'get_location')[0];
        assert.equal(sent.state, 'output-available');
        assert.deepEqual(sent.output, GEO);
        assert.equal(sent.approval?.id, p.approval.id);
        assert.equal(sent.approval?.approved, true);
        assertSseFraming(h.posts[1], 'response #2');
        assertSameMessageId(h);
        assertLocated(h);
      });
    });

    it('get_location, Pattern B: approval request, then a separate output request', { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'geo-b', autoSend: 'patternB' });
      await withEvidence(h, async () => {
        const p = await askLocation(h);
        await h.approve(p.approval.id);
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.posts.length, 2, 'Pattern B: the approval is sent on its own');
        const sentApproval = toolParts(h.posts[1].body.messages.at(-1), 'get_location')[0];
        assert.equal(sentApproval.state, 'approval-responded');
        assert.equal(sentApproval.approval?.approved, true);
        assertSseFraming(h.posts[1], 'response #2');
        assert.equal(chunksOf(h.posts[1]).at(-1).finishReason, 'tool-calls', 'response #2 ends waiting for the browser');
        assert.deepEqual(chunksOf(h.posts[1]).filter((c) => c.type?.startsWith('text-')), [], 'no text while waiting (held)');
        const waiting = toolParts(h.assistant, 'get_location')[0];
        assert.notEqual(waiting.state, 'output-available', 'no output before the browser reports');

        await h.toolOutput('get_location', p.toolCallId, GEO);
        await h.waitIdle();
        h.assertHealthy();
        assert.equal(h.posts.length, 3, 'a separate request carrying the output');
        const sentOutput = toolParts(h.posts[2].body.messages.at(-1), 'get_location')[0];
        assert.equal(sentOutput.state, 'output-available');
        assert.deepEqual(sentOutput.output, GEO);
        assertSseFraming(h.posts[2], 'response #3');
        assertSameMessageId(h);
        assertLocated(h);
      });
    });
  });
}
