// A question an MCP server asks while its tool runs, in a stock client's stream: the third server
// (CS_MCP_BASE_URL, see run.sh) replays fixtures/mcp-question.jsonl, whose model calls
// @modelcontextprotocol/server-everything's trigger-elicitation-request. The question arrives as a
// `data-question` data part (`{type, id, data}`, the protocol's own data chunk) while the response
// is still streaming; it is answered out of band (POST /api/chats/{chat}/questions/{id}), the same
// part comes again with the same id when it closes, and the turn finishes — all through ai@6.0.0's
// strict chunk schema and ai@7's, with no stream error.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { VERSIONS, SDKS, Harness, withEvidence, toolParts, textOf, sleep } from '../lib/driver.mjs';

const MCP_URL = (process.env.CS_MCP_BASE_URL ?? '').replace(/\/$/, '');
const TOOL = 'everything__trigger-elicitation-request';

/** The assistant's data-question parts. */
function questions(h) {
  return (h.assistant?.parts ?? []).filter((p) => p.type === 'data-question');
}

describe('MCP questions', { skip: !MCP_URL && 'CS_MCP_BASE_URL is not set (run.sh starts that server)' }, () => {
  before(async () => {
    // The server offers its question tool once it knows the client can ask the person.
    const t0 = Date.now();
    for (;;) {
      const status = await (await fetch(`${MCP_URL}/api/mcp`)).json();
      if (JSON.stringify(status).includes(TOOL)) return;
      if (Date.now() - t0 > 20000) throw new Error(`the MCP server never offered ${TOOL}: ${JSON.stringify(status)}`);
      await sleep(100);
    }
  });

  for (const version of VERSIONS) {
    it(`${version} (ai@${SDKS[version].version}): a data-question part, answered while the response streams`, { timeout: 60000 }, async () => {
      const h = new Harness({ version, scenario: 'mcp-question', baseUrl: MCP_URL });
      await withEvidence(h, async () => {
        const sending = h.send('Ask me your questions');
        // The question arrives while the response is still open.
        const t0 = Date.now();
        while (questions(h).length === 0) {
          assert.ok(Date.now() - t0 < 20000, 'no data-question part within 20 s');
          await sleep(20);
        }
        const [open] = questions(h);
        assert.equal(typeof open.id, 'string');
        assert.equal(open.data.state, 'open');
        assert.equal(open.data.source, 'MCP server everything');
        assert.equal(open.data.message, 'Please provide inputs for the following fields:');
        assert.deepEqual(open.data.schema.required, ['name']);
        assert.equal(toolParts(h.assistant, TOOL)[0]?.state, 'input-available', 'the tool is running');

        const reply = await fetch(`${MCP_URL}/api/chats/${h.chatId}/questions/${open.id}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ action: 'accept', content: { name: 'Ada Lovelace', check: true } }),
        });
        assert.equal(reply.status, 204, await reply.text());
        await sending;
        await h.waitIdle();
        h.assertHealthy();

        // One part per question: the closing one replaced the open one (same id).
        const closed = questions(h);
        assert.equal(closed.length, 1);
        assert.equal(closed[0].id, open.id);
        assert.equal(closed[0].data.state, 'answered');
        assert.deepEqual(closed[0].data.answer, { name: 'Ada Lovelace', check: true });
        const tool = toolParts(h.assistant, TOOL)[0];
        assert.equal(tool.state, 'output-available');
        assert.match(JSON.stringify(tool.output), /Name: Ada Lovelace/);
        assert.match(textOf(h.assistant), /the server has your answers/);
      });
    });
  }
});
