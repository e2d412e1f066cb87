// Plain text and a server tool without approval, through AbstractChat + DefaultChatTransport.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  VERSIONS, SDKS, Harness, withEvidence, assertSseFraming, chunksOf, toolParts, textOf, assertTextDone,
} from '../lib/driver.mjs';

for (const version of VERSIONS) {
  describe(`${version} (ai@${SDKS[version].version})`, () => {
    it('plain text: "What can you do?"', { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'text' });
      await withEvidence(h, async () => {
        await h.send('What can you do?');
        h.assertHealthy();
        assert.equal(h.posts.length, 1, 'one request');
        const body = h.posts[0].body;
        assert.equal(body.id, h.chatId);
        assert.equal(body.trigger, 'submit-message');
        assertSseFraming(h.posts[0], 'response #1');
        assert.equal(chunksOf(h.posts[0]).at(-1).finishReason, 'stop');
        assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant']);
        const a = h.assistant;
        assert.deepEqual(toolParts(a), [], 'no tool parts');
        assert.ok(textOf(a).trim().length > 0, 'assistant text is not empty');
        assertTextDone(a);
        assert.equal(h.finishes.at(-1)?.finishReason, 'stop', 'onFinish finishReason');
      });
    });

    it('server tool: "What\'s the weather in Tokyo?"', { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'weather' });
      await withEvidence(h, async () => {
        await h.send("What's the weather in Tokyo?");
        h.assertHealthy();
        assert.equal(h.posts.length, 1, 'one request: get_weather needs no approval');
        assertSseFraming(h.posts[0], 'response #1');
        assert.equal(chunksOf(h.posts[0]).at(-1).finishReason, 'stop');
        assert.deepEqual(h.messages.map((m) => m.role), ['user', 'assistant']);
        const a = h.assistant;
        const [w, ...more] = toolParts(a, 'get_weather');
        assert.ok(w, 'a tool-get_weather part');
        assert.deepEqual(more, [], 'exactly one get_weather call');
        assert.equal(w.type, 'tool-get_weather');
        assert.equal(w.state, 'output-available');
        assert.match(String(w.input?.location), /tokyo/i, 'input.location');
        assert.match(String(w.output?.location), /tokyo/i, 'output.location');
        assert.equal(w.approval, undefined, 'no approval on a tool that needs none');
        assert.match(textOf(a), /Tokyo/, 'text mentions Tokyo');
        assertTextDone(a);
        // The text comes after the tool part.
        const idxTool = a.parts.indexOf(w);
        const idxText = a.parts.findIndex((p) => p.type === 'text');
        assert.ok(idxText > idxTool, 'text follows the tool result');
      });
    });
  });
}
