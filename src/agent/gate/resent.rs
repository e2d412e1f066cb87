//! A client's copy of the turn's message, sent again: which of its answers are new.
//!
//! AI SDK clients send the whole conversation with every request. The server trusts none of it
//! except the answers only the person can give, found in the last assistant message (decoded by
//! the transport into [`PersonInput`]s, in the message's order). Everything the chat already
//! holds is an echo and is skipped: approvals resolved the same way, one's own signature, one's
//! own proposal ([`Gate::repeats`]), outputs the server produced itself. An answer that
//! contradicts what the chat holds, or that names a tool call the turn never made, is refused;
//! approval ids the chat never issued are kept, so [`Gate::answer`] can say precisely why they
//! are refused (unknown, or another chat's).

use std::collections::BTreeMap;

use super::{ApprovalResolution, CallPhase, Gate, InputError, PersonInput, StepCall};
use crate::{agent::journal::Entries, protocol::UiMessage};

/// The answers a client's copy of the turn's assistant message carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Resent {
    /// The message's id (empty: the client named none).
    pub message_id: String,
    /// Its answers in the message's order (a part's approval before its output).
    pub answers: Vec<PersonInput>,
}

/// What the chat holds that a resent answer is judged against.
#[derive(Clone, Copy)]
pub struct Held<'a> {
    /// The chat's current turn, if it has one: its assistant message id and its calls.
    pub turn: Option<(&'a str, &'a [StepCall])>,
    pub resolved: &'a BTreeMap<String, ApprovalResolution>,
    /// Every message of the chat, as the server wrote them (read only when an answer names
    /// another message than the turn's: most are not decoded, ADR 0045).
    pub messages: &'a Entries<UiMessage>,
}

impl Resent {
    /// The answers the chat does not hold yet, approvals first (an approval and its browser
    /// output may come together: seed "Pattern A"). `signer` is who sends them: an approval
    /// they already signed, of a call still waiting for others' signatures, is an echo.
    pub fn fresh(self, held: Held<'_>, signer: &str) -> Result<Vec<PersonInput>, InputError> {
        if let Some((current, _)) = held.turn
            && self.message_id != current
            && !self.message_id.is_empty()
            // An unreadable message is not the one named: the answer is refused, not applied.
            && !held
                .messages
                .iter()
                .rev()
                .any(|m| m.is_ok_and(|m| m.id == self.message_id))
        {
            return Err(InputError::StaleMessage {
                message_id: self.message_id,
                current: current.to_owned(),
            });
        }
        let calls = held.turn.map(|(_, calls)| calls);
        let mut approvals = Vec::new();
        let mut outputs = Vec::new();
        for answer in self.answers {
            match &answer {
                PersonInput::Approval {
                    approval_id,
                    decision,
                    step_up,
                } => {
                    let waiting = calls
                        .filter(|calls| calls.iter().any(|c| c.approval_id() == Some(approval_id)));
                    if !Gate::repeats(
                        waiting,
                        held.resolved,
                        approval_id,
                        decision,
                        step_up.is_some(),
                        signer,
                    )? {
                        approvals.push(answer);
                    }
                }
                PersonInput::BrowserResult { tool_call_id, .. } => {
                    if browser_output_is_new(held, calls, tool_call_id)? {
                        outputs.push(answer);
                    }
                }
            }
        }
        approvals.extend(outputs);
        Ok(approvals)
    }
}

/// Whether a browser tool's output is new: the call waits for exactly this (its approval, if
/// any, comes first); not when the call has its result already, or when it is a call of an
/// earlier step whose output the server sent itself. A call the chat never made is refused.
fn browser_output_is_new(
    held: Held<'_>,
    calls: Option<&[StepCall]>,
    tool_call_id: &str,
) -> Result<bool, InputError> {
    let current = calls
        .into_iter()
        .flatten()
        .find(|c| c.call.id == tool_call_id);
    match current {
        Some(call) => Ok(matches!(
            call.phase,
            CallPhase::AwaitingBrowser { .. } | CallPhase::AwaitingApproval { .. }
        )),
        None => {
            let known = held
                .messages
                .iter()
                .rev()
                .any(|m| m.is_ok_and(|m| m.find_tool_part(tool_call_id).is_some()));
            if known {
                Ok(false)
            } else {
                Err(InputError::UnknownToolCall {
                    tool_call_id: tool_call_id.to_owned(),
                })
            }
        }
    }
}
