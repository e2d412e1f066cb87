//! What the gate asks of the policy ([`Decide`]), and the [`Decider`] that answers for one chat:
//! the rules, then the person's grants, read with the running totals — and what the calls it
//! lets run claim of the day's spending and of grants' budgets ([`Claim`]), kept in the store
//! by [`super::Policy::decide`] in the same step as the decision.

use std::{collections::HashMap, sync::Arc, sync::MutexGuard};

use serde_json::Value;

use super::{
    CallFacts, Judgement, Requester, RuleVerdict, Rules, ToolFacts, Verdict,
    grants::{self, Book, GrantQuery},
};
use crate::agent::{
    clock::Millis,
    store::Claim,
    tools::{ToolRegistry, ToolSpec},
};
use crate::protocol::grant::Ruling;

/// What a decision needs of a chat's wallet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatWallet {
    /// What it paid, in its cents (plus, while deciding a step, what calls let run will pay).
    pub paid_cents: i64,
    /// Whom it paid (as the payments named them).
    pub payees: Vec<String>,
}

impl ChatWallet {
    pub fn of(wallet: &crate::agent::tools::Wallet) -> Self {
        ChatWallet {
            paid_cents: wallet.paid_cents(),
            // As the wallet keeps them (trimmed, in lower case): compared as names are.
            payees: wallet.payees.iter().cloned().collect(),
        }
    }

    fn has_paid(&self, payee: &str) -> bool {
        let payee = payee.trim();
        self.payees.iter().any(|p| p.eq_ignore_ascii_case(payee))
    }
}

/// Why a payment cleared to run may not start ([`Decider::clear_to_run`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A rule forbids it with the day's total as it is now.
    Rule { rule: String, reason: String },
    /// What it will pay could not be reserved (the store failed): it does not run.
    Unrecorded,
}

/// Decides calls of one chat, holding the book (grants and spending) while it does. The calls
/// it lets run claim what they pay and the grants they use; later decisions of the same step
/// see those claims.
pub struct Decider<'a> {
    pub(super) rules: Arc<Rules>,
    pub(super) tools: &'a ToolRegistry,
    pub(super) book: MutexGuard<'a, Book>,
    pub(super) chat: &'a str,
    pub(super) requester: &'a Requester,
    pub(super) wallet: ChatWallet,
    /// What the calls let run so far claim (kept in the store after the step is decided).
    pub(super) claims: Vec<Claim>,
    /// Nothing can be reserved now (the store failed): a call that would claim asks the
    /// person instead, and a payment cleared to run does not start.
    pub(super) unreserved: bool,
    /// Whether a decision read or moved the running totals a limit is held to: a call that pays
    /// was decided (however), or a grant was used. Only then does the store's count matter.
    pub(super) spends: bool,
    /// What each call was decided from (by call id), for the audit log.
    pub(super) recorded: Vec<(String, Value)>,
}

/// What the gate asks of the policy.
pub trait Decide {
    /// What call `call_id` of `tool` with (validated) `args` needs, now. A call let run claims
    /// what it pays and the grant it uses.
    fn decide(&mut self, call_id: &str, tool: &ToolSpec, args: &Value, now_ms: Millis) -> Verdict;

    /// What the rules say of running `args` now (the person's approval, perhaps of edited
    /// arguments): refused, asking for someone (and for whom), or free. Reserves nothing.
    fn judge(&mut self, tool: &ToolSpec, args: &Value, now_ms: Millis) -> Judgement;

    /// Whether a rule forbids running `args` now: the rule and its reason.
    fn forbids(
        &mut self,
        tool: &ToolSpec,
        args: &Value,
        now_ms: Millis,
    ) -> Option<(String, String)> {
        match self.judge(tool, args, now_ms) {
            Judgement::Forbidden { rule, reason } => Some((rule, reason)),
            _ => None,
        }
    }

    /// Whether the person may grant `scope` for a call of `tool` they approve with `args`:
    /// `Err` says why not.
    fn may_grant(
        &mut self,
        tool: &ToolSpec,
        args: &Value,
        request: &crate::protocol::grant::GrantRequest,
    ) -> Result<(), String> {
        grants::check_request(tool, args, request)
    }
}

impl Decider<'_> {
    /// What each call decided so far was decided from, by call id, as the audit log keeps it
    /// ([`CallFacts::recorded`]; none without a policy file).
    pub fn take_facts(&mut self) -> Vec<(String, Value)> {
        std::mem::take(&mut self.recorded)
    }

    /// What the calls decided so far claim.
    pub fn claims(&self) -> &[Claim] {
        &self.claims
    }

    /// What calls decided in this step take of each grant, by grant id.
    fn pending(&self) -> HashMap<&str, i64> {
        let mut pending = HashMap::new();
        for claim in &self.claims {
            if let Some(grant) = &claim.grant {
                *pending.entry(grant.as_str()).or_default() += claim.cents;
            }
        }
        pending
    }

    /// The facts of a call of `tool` (whose policy facts are `facts`) with `args`, now: the
    /// day's total includes what this step's calls claimed.
    fn facts<'f>(
        &'f mut self,
        facts: &'f ToolFacts,
        tool: &ToolSpec,
        args: &'f Value,
        now_ms: Millis,
    ) -> CallFacts<'f> {
        let pays = tool.pays.and_then(|pays| pays(args));
        let new_payee = pays
            .as_ref()
            .is_some_and(|p| !self.wallet.has_paid(&p.payee));
        let claimed: i64 = self.claims.iter().map(|c| c.cents).sum();
        CallFacts {
            chat: self.chat,
            requester: self.requester,
            tool: facts,
            args,
            pays,
            new_payee,
            asks_by_default: tool.approval.requires_approval(args),
            spent_today_cents: self.book.spending.today(now_ms).saturating_add(claimed),
            spent_in_chat_cents: self.wallet.paid_cents,
            now_ms,
        }
    }

    /// Claims `cents` (and a use of `grant`) for `call`.
    fn claim(&mut self, call: &str, cents: Option<i64>, grant: Option<String>) {
        self.spends = true;
        self.claims.push(Claim {
            chat: self.chat.to_owned(),
            call: call.to_owned(),
            cents: cents.unwrap_or(0),
            grant,
        });
        self.wallet.paid_cents = self.wallet.paid_cents.saturating_add(cents.unwrap_or(0));
    }

    /// A payment cleared to run that no rule or grant let run (a person approved it, or its
    /// tool runs it by its own setting) is about to start: checked again against the rules
    /// with the day's total as it is now, and, when none forbids it, it claims what it pays
    /// (so later decisions count it). A call that pays nothing is let go as it is.
    pub fn clear_to_run(
        &mut self,
        call_id: &str,
        tool: &ToolSpec,
        args: &Value,
        now_ms: Millis,
    ) -> Result<(), Refusal> {
        let Some(cents) = tool
            .pays
            .and_then(|pays| pays(args))
            .map(|p| p.money.wallet_cents())
        else {
            return Ok(());
        };
        self.spends = true;
        if self.unreserved {
            return Err(Refusal::Unrecorded);
        }
        if let Some((rule, reason)) = self.forbids(tool, args, now_ms) {
            return Err(Refusal::Rule { rule, reason });
        }
        self.claim(call_id, Some(cents), None);
        Ok(())
    }
}

impl Decide for Decider<'_> {
    fn decide(&mut self, call_id: &str, tool: &ToolSpec, args: &Value, now_ms: Millis) -> Verdict {
        let _ = self.tools;
        let tool_facts = ToolFacts::of(tool);
        let chat = self.chat.to_owned();
        let rules = self.rules.clone();
        let facts = self.facts(&tool_facts, tool, args, now_ms);
        let cents = facts.pays.as_ref().map(|p| p.money.wallet_cents());
        let ruled = rules.verdict(&facts);
        if let Rules::Cedar(cedar) = &*rules {
            let recorded = facts.recorded(cedar.digest());
            self.recorded.push((call_id.to_owned(), recorded));
        }
        self.spends |= cents.is_some();
        let verdict = match ruled {
            RuleVerdict::Run { rule } if rule.is_empty() => return Verdict::Run,
            RuleVerdict::Run { rule } => Ruling::AllowedByRule { rule },
            RuleVerdict::Deny { rule, reason } => Ruling::DeniedByRule { rule, reason },
            RuleVerdict::Ask { rule, needs } => Ruling::Asked {
                rule: Some(rule),
                grantable: false,
                needs,
            },
            RuleVerdict::Error { message } => {
                tracing::warn!(tool = %tool.name, %message, "a policy rule failed to evaluate; the call asks");
                Ruling::Asked {
                    rule: None,
                    grantable: false,
                    needs: None,
                }
            }
            RuleVerdict::NoMatch => {
                let requester = self.requester.id.clone();
                let pending = self.pending();
                let call = GrantQuery {
                    chat: &chat,
                    requester: &requester,
                    tool,
                    args,
                    cents,
                };
                match self.book.grant_for(&call, &pending, now_ms) {
                    Some(grant) => Ruling::AllowedByGrant {
                        grant: grant.id,
                        label: grant.label,
                    },
                    None => Ruling::Asked {
                        rule: None,
                        grantable: true,
                        needs: None,
                    },
                }
            }
        };
        let grant = match &verdict {
            Ruling::AllowedByGrant { grant, .. } => Some(grant.clone()),
            Ruling::AllowedByRule { .. } if cents.is_some() => None,
            _ => return Verdict::Ruled(verdict),
        };
        if self.unreserved {
            // Without a reservation nothing may run that counts against a limit or a budget:
            // the person decides.
            tracing::warn!(tool = %tool.name, call = call_id, "what the call would spend cannot be reserved; it asks");
            return Verdict::Ruled(Ruling::Asked {
                rule: None,
                grantable: false,
                needs: None,
            });
        }
        self.claim(call_id, cents, grant);
        Verdict::Ruled(verdict)
    }

    fn judge(&mut self, tool: &ToolSpec, args: &Value, now_ms: Millis) -> Judgement {
        let tool_facts = ToolFacts::of(tool);
        let rules = self.rules.clone();
        let facts = self.facts(&tool_facts, tool, args, now_ms);
        match rules.verdict(&facts) {
            RuleVerdict::Deny { rule, reason } => Judgement::Forbidden { rule, reason },
            RuleVerdict::Ask { rule, needs } => Judgement::Asks {
                rule: Some(rule),
                needs: needs.unwrap_or_default(),
            },
            RuleVerdict::Error { .. } => Judgement::Asks {
                rule: None,
                needs: Default::default(),
            },
            RuleVerdict::Run { .. } | RuleVerdict::NoMatch => Judgement::Free,
        }
    }
}

/// The decider of a gate without a policy (tests): each tool's own setting, no grants.
pub struct ToolDefaults;

impl Decide for ToolDefaults {
    fn decide(&mut self, _: &str, tool: &ToolSpec, args: &Value, _: Millis) -> Verdict {
        if tool.approval.requires_approval(args) {
            Verdict::Ruled(Ruling::Asked {
                rule: None,
                grantable: false,
                needs: None,
            })
        } else {
            Verdict::Run
        }
    }

    fn judge(&mut self, _: &ToolSpec, _: &Value, _: Millis) -> Judgement {
        Judgement::Free
    }
}
