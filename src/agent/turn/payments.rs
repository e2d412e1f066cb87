//! Payments about to start (issue #33): a payment no rule or grant let run — a person approved
//! it, or its tool runs it by its own setting — is checked once more against the rules with the
//! day's total as it is now, and reserves what it pays in the same step of the store, before it
//! starts. Two approvals answered at once, on one instance or two, never both fit under a daily
//! limit only one of them fits under; and what they pay counts for every decision after them.
//! (Calls a rule or a grant let run reserved when they were decided.)

use serde_json::Value;

use super::{TurnDriver, audit::audit_event};
use crate::agent::{
    clock::Millis,
    gate::CallPhase,
    history::Outcome,
    policy::{ChatWallet, Refusal},
    store::{AuditEvent, AuditKind},
};
use crate::protocol::grant::Ruling;

/// What a payment that could not reserve what it pays is told (it did not start).
const UNRECORDED: &str = "Not run: what it would pay could not be checked against \
     the day's limits (the database did not answer). Nothing was paid.";

/// A payment cleared to run that nobody reserved for yet: its call's id, its tool's name and
/// the arguments it runs with.
struct Unreserved {
    id: String,
    tool: String,
    args: Value,
}

/// The payments to check, and what they are checked against: the chat's wallet and its owner.
struct ToClear {
    payments: Vec<Unreserved>,
    wallet: ChatWallet,
    owner: String,
}

impl TurnDriver {
    /// Checks and reserves the payments cleared to run that nobody reserved for yet: one a rule
    /// forbids now ends refused by that rule (the model told its reason, the refusal audited);
    /// one whose reservation cannot be kept ends without running.
    pub(super) async fn clear_payments(&mut self) {
        let Some(to_clear) = self.unreserved_payments() else {
            return;
        };
        if to_clear.payments.is_empty() {
            return;
        }
        let now = self.rt.clock.now_ms();
        let verdicts = self.check_and_reserve(&to_clear, now).await;
        let events = self.end_refused(verdicts, now);
        self.commits.record_all(events);
    }

    /// The turn's calls ready to run that pay something, that no rule or grant let run (those
    /// reserved when they were decided) and that the policy holds no reservation for yet.
    /// `None` when there is no turn.
    fn unreserved_payments(&self) -> Option<ToClear> {
        let rt = &self.rt;
        let state = self.session.state();
        let turn = state.record.turn.as_ref()?;
        let payments = turn
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
            .map(|(c, args)| Unreserved {
                id: c.call.id.clone(),
                tool: c.call.name.clone(),
                args: args.clone(),
            })
            .collect();
        Some(ToClear {
            payments,
            wallet: ChatWallet::of(&state.record.wallet),
            owner: state.record.owner().to_owned(),
        })
    }

    /// Each payment checked against the rules with the day's total as it is now, and what it
    /// pays reserved in the same step of the store: by call id, `Ok` for one that may start.
    async fn check_and_reserve(
        &self,
        to_clear: &ToClear,
        now: Millis,
    ) -> Vec<(String, Result<(), Refusal>)> {
        let rt = &self.rt;
        let requester = rt.requester(&to_clear.owner);
        rt.policy()
            .decide(
                &rt.tools,
                &self.session.id,
                &requester,
                &to_clear.wallet,
                now,
                |decider| {
                    to_clear
                        .payments
                        .iter()
                        .map(|Unreserved { id, tool, args }| {
                            let verdict = match rt.tools.get(tool) {
                                Some(tool) => decider.clear_to_run(id, &tool.spec, args, now),
                                None => Ok(()),
                            };
                            (id.clone(), verdict)
                        })
                        .collect()
                },
            )
            .await
    }

    /// Ends each refused payment that is still ready to run: refused by the rule that forbids
    /// it, or failed when what it pays could not be reserved. Its audit events.
    fn end_refused(
        &self,
        verdicts: Vec<(String, Result<(), Refusal>)>,
        now: Millis,
    ) -> Vec<AuditEvent> {
        let version = self.rt.policy().status().version;
        let mut events = Vec::new();
        let mut state = self.session.state();
        let Some(turn) = state.record.turn.as_mut() else {
            return events;
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
        events
    }
}
