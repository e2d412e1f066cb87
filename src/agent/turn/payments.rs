//! Payments about to start (issue #33): a payment no rule or grant let run — a person approved
//! it, or its tool runs it by its own setting — is checked once more against the rules with the
//! day's total as it is now, and reserves what it pays in the same step of the store, before it
//! starts. Two approvals answered at once, on one instance or two, never both fit under a daily
//! limit only one of them fits under; and what they pay counts for every decision after them.
//! (Calls a rule or a grant let run reserved when they were decided.)

use serde_json::Value;

use super::{TurnDriver, audit::audit_event};
use crate::agent::{
    gate::CallPhase,
    history::Outcome,
    policy::{ChatWallet, Refusal},
    store::AuditKind,
};
use crate::protocol::grant::Ruling;

/// What a payment that could not reserve what it pays is told (it did not start).
const UNRECORDED: &str = "Not run: what it would pay could not be checked against \
     the day's limits (the database did not answer). Nothing was paid.";

impl TurnDriver {
    /// Checks and reserves the payments cleared to run that nobody reserved for yet: one a rule
    /// forbids now ends refused by that rule (the model told its reason, the refusal audited);
    /// one whose reservation cannot be kept ends without running.
    pub(super) async fn clear_payments(&mut self) {
        let rt = self.rt.clone();
        let (payments, wallet, owner) = {
            let state = self.session.state();
            let Some(turn) = state.record.turn.as_ref() else {
                return;
            };
            let payments: Vec<(String, String, Value)> = turn
                .calls
                .iter()
                .filter(|c| {
                    !matches!(
                        c.ruling,
                        Some(Ruling::AllowedByRule { .. } | Ruling::AllowedByGrant { .. })
                    )
                })
                .filter_map(|c| match &c.phase {
                    CallPhase::Ready { args, .. } => Some((c, args)),
                    _ => None,
                })
                .filter(|(c, args)| {
                    rt.tools
                        .get(&c.call.name)
                        .and_then(|t| t.spec.pays)
                        .is_some_and(|pays| pays(args).is_some())
                })
                .filter(|(c, _)| !rt.policy().holds(&c.call.id))
                .map(|(c, args)| (c.call.id.clone(), c.call.name.clone(), args.clone()))
                .collect();
            (
                payments,
                ChatWallet::of(&state.record.wallet),
                state.record.owner().to_owned(),
            )
        };
        if payments.is_empty() {
            return;
        }
        let requester = rt.requester(&owner);
        let now = rt.clock.now_ms();
        let verdicts: Vec<(String, Result<(), Refusal>)> = rt
            .policy()
            .decide(
                &rt.tools,
                &self.session.id,
                &requester,
                &wallet,
                now,
                |decider| {
                    payments
                        .iter()
                        .map(|(id, name, args)| {
                            let verdict = match rt.tools.get(name) {
                                Some(tool) => decider.clear_to_run(id, &tool.spec, args, now),
                                None => Ok(()),
                            };
                            (id.clone(), verdict)
                        })
                        .collect()
                },
            )
            .await;
        let version = rt.policy().status().version;
        let mut events = Vec::new();
        {
            let mut state = self.session.state();
            let Some(turn) = state.record.turn.as_mut() else {
                return;
            };
            for (id, verdict) in verdicts {
                let Err(refusal) = verdict else {
                    continue;
                };
                let Some(call) = turn
                    .calls
                    .iter_mut()
                    .find(|c| c.call.id == id && matches!(c.phase, CallPhase::Ready { .. }))
                else {
                    continue;
                };
                let mut event = audit_event(
                    AuditKind::Refused,
                    &self.session.id,
                    &turn.id,
                    &call.call,
                    call.gated_by.as_deref().unwrap_or_default(),
                    now,
                );
                let outcome = match refusal {
                    Refusal::Rule { rule, reason } => {
                        tracing::info!(session = %self.session.id, call = %id, %rule, "a payment about to start is refused by a rule");
                        event.rule = Some(rule.clone());
                        event.reason = Some(reason.clone());
                        event.policy_version = version.clone();
                        Outcome::DeniedByRule { rule, reason }
                    }
                    Refusal::Unrecorded => {
                        event.reason = Some(UNRECORDED.to_owned());
                        Outcome::Error {
                            message: UNRECORDED.to_owned(),
                        }
                    }
                };
                call.phase = CallPhase::Done {
                    outcome,
                    edited_args: None,
                };
                call.announced = false;
                events.push(event);
            }
        }
        self.commits.record_all(events);
    }
}
