// Calls decided by a policy rule, in a stock client's stream: the fourth server
// (CS_POLICY_BASE_URL, see run.sh) runs examples/policy.cedar. ai@7 asks for the full dialect
// (`x-countersign-dialect: full`) and sees AI SDK v7's automatic approval — a
// tool-approval-request with isAutomatic, then a tool-approval-response — before the call's
// output (or output-denied); ai@6.0.0's strict schema sees neither chunk, only a call that ran or
// was denied. Neither client sends a request by itself after an automatic decision, and a call
// the rules leave to the person still asks and is answered as any approval.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { VERSIONS, SDKS, Harness, withEvidence, toolParts, textOf } from '../lib/driver.mjs';

const POLICY_URL = (process.env.CS_POLICY_BASE_URL ?? '').replace(/\/$/, '');

/** ai@7 takes the full dialect; ai@6.0.0 the default (its keys only). */
const headersOf = (version) => (version === 'ai7' ? { 'x-countersign-dialect': 'full' } : undefined);

// The rules count what was paid today in every chat (at most 50 USD a day without asking), so
// the scenarios run in this order, each for both clients: the two payments a rule runs come
// before the ones that are approved.
describe('policy rules', { skip: !POLICY_URL && 'CS_POLICY_BASE_URL is not set (run.sh starts that server)' }, () => {
  for (const version of VERSIONS) {
      it(`${version} (ai@${SDKS[version].version}): a payment a rule lets run: "Send $5 to Jack"`, { timeout: 60000 }, async () => {
        const h = new Harness({ version, scenario: 'policy-run', baseUrl: POLICY_URL, headers: headersOf(version) });
        await withEvidence(h, async () => {
          await h.send('Send $5 to Jack');
          await h.waitIdle();
          h.assertHealthy();
          assert.equal(h.posts.length, 1, 'no request of its own after an automatic approval');
          const [part] = toolParts(h.assistant, 'process_payment');
          assert.equal(part.state, 'output-available');
          assert.equal(part.output.wallet_balance, 995);
          if (version === 'ai7') {
            assert.equal(part.approval?.isAutomatic, true, 'v7: an automatic approval');
            assert.equal(part.approval?.approved, true);
            assert.match(part.approval?.reason ?? '', /small-payments/);
            assert.deepEqual(part.approval?.descriptor, {
              countersign: { decision: 'allowed_by_rule', rule: 'small-payments' },
            });
          } else {
            assert.equal(part.approval, undefined, 'ai@6.0.0: no approval at all');
          }
          assert.equal(h.finishes.at(-1)?.finishReason, 'stop');
          assert.match(textOf(h.assistant), /995/);
        });
      });

  }
  for (const version of VERSIONS) {
      it(`${version} (ai@${SDKS[version].version}): a payment a rule refuses: "Send $600 to Jack"`, { timeout: 60000 }, async () => {
        const h = new Harness({ version, scenario: 'policy-deny', baseUrl: POLICY_URL, headers: headersOf(version) });
        await withEvidence(h, async () => {
          await h.send('Send $600 to Jack');
          await h.waitIdle();
          h.assertHealthy();
          assert.equal(h.posts.length, 1, 'no request of its own after an automatic refusal');
          const [part] = toolParts(h.assistant, 'process_payment');
          assert.equal(part.state, 'output-denied');
          if (version === 'ai7') {
            assert.equal(part.approval?.isAutomatic, true);
            assert.equal(part.approval?.approved, false);
            assert.equal(part.approval?.descriptor?.countersign?.rule, 'payment-limit');
          }
          assert.match(textOf(h.assistant), /policy does not allow/);
          assert.match(textOf(h.assistant), /500 USD/, 'the model was told the rule\'s reason');
        });
      });

  }
  for (const version of VERSIONS) {
      it(`${version} (ai@${SDKS[version].version}): a payment the rules leave to the person asks, and is approved`, { timeout: 60000 }, async () => {
        const h = new Harness({ version, scenario: 'policy-ask', baseUrl: POLICY_URL, headers: headersOf(version) });
        await withEvidence(h, async () => {
          await h.send('Send $50 to Jack');
          h.assertHealthy();
          assert.equal(h.posts.length, 1);
          const [part] = toolParts(h.assistant, 'process_payment');
          assert.equal(part.state, 'approval-requested');
          assert.notEqual(part.approval?.isAutomatic, true);
          if (version === 'ai7') {
            assert.deepEqual(part.approval?.descriptor, { countersign: { decision: 'asked', grantable: true } });
          }
          await h.approve(part.approval.id);
          await h.waitIdle();
          h.assertHealthy();
          assert.equal(h.posts.length, 2, 'exactly one automatic request after the approval');
          const [done] = toolParts(h.assistant, 'process_payment');
          assert.equal(done.state, 'output-available');
          assert.equal(done.output.wallet_balance, 950);
        });
      });

  }
  for (const version of VERSIONS) {
      it(`${version} (ai@${SDKS[version].version}): a refusal, an ask and a refusal in one chat: the history the client sends back is accepted`, { timeout: 60000 }, async () => {
        const h = new Harness({ version, scenario: 'policy-mixed', baseUrl: POLICY_URL, headers: headersOf(version) });
        await withEvidence(h, async () => {
          await h.send('Send $600 to Jack');
          await h.waitIdle();
          h.assertHealthy();
          // The client sends its history, automatic approvals in it, with the next message.
          await h.send('Send $50 to Jill');
          h.assertHealthy();
          const waiting = toolParts(h.assistant, 'process_payment').find((p) => p.state === 'approval-requested');
          assert.ok(waiting, 'the second payment asks');
          await h.approve(waiting.approval.id);
          await h.waitIdle();
          h.assertHealthy();
          await h.send('Send $600 to Jim');
          await h.waitIdle();
          h.assertHealthy();
          assert.equal(toolParts(h.assistant, 'process_payment').at(-1).state, 'output-denied');
        });
      });
  }
  for (const version of VERSIONS) {
      it(`${version} (ai@${SDKS[version].version}): a payment that needs two approvers keeps its data-countersign part, and the client's answer is refused with the reason`, { timeout: 60000 }, async () => {
        const h = new Harness({ version, scenario: 'policy-countersign', baseUrl: POLICY_URL, headers: headersOf(version) });
        await withEvidence(h, async () => {
          await h.send('Send $150 to Jack');
          h.assertHealthy();
          const [part] = toolParts(h.assistant, 'process_payment');
          assert.equal(part.state, 'approval-requested');
          // The progress travels as a data part, which even ai@6.0.0's strict schema keeps.
          const progress = h.assistant.parts.filter((p) => p.type === 'data-countersign');
          assert.equal(progress.length, 1, JSON.stringify(h.assistant.parts));
          assert.equal(progress[0].id, part.approval.id);
          assert.equal(progress[0].data.state, 'waiting');
          assert.equal(progress[0].data.needs.approvers, 2);
          assert.equal(progress[0].data.needs.role, 'approver');
          assert.deepEqual(progress[0].data.signatures, []);
          if (version === 'ai7') {
            assert.equal(part.approval?.descriptor?.countersign?.needs?.approvers, 2);
          }
          // This server has one local person: a click cannot approve it, and the answer says why.
          await h.approve(part.approval.id);
          await h.waitIdle();
          assert.equal(h.posts.length, 2);
          assert.equal(h.chat.status, 'error');
          assert.match(h.chat.error?.message ?? '', /not_an_approver/);
          assert.match(h.chat.error?.message ?? '', /people signed in with a passkey/);
        });
      });
  }
});
