//! Reading the person's answers out of the client's copy of the conversation.
//!
//! AI SDK clients send the whole history with every request; the server trusts none of it except
//! the answers only the person can give, found in the last assistant message:
//! * a tool part in state `approval-responded` with `approval {id, approved, reason}` (plus our
//!   `editedInput` extension);
//! * a client's own answer parts, where its profile has them ([`super::profile::Profile::own_answer`]:
//!   the seed system's ADK confirmation);
//! * a browser tool's `output-available` / `output-error` part (the AI SDK's `addToolOutput`).
//!
//! This file only decodes them ([`decode`]): which of them the chat already holds (echoes) and
//! which it refuses is the gate's to say ([`crate::agent::gate::Resent::fresh`]), on the chat
//! the answer goes to ([`crate::agent::answer`]).

use serde_json::Value;

use super::{error::ApiError, profile::OwnAnswer};
use crate::{
    agent::{ApprovalDecision, BrowserResult, PersonInput, gate::Resent},
    protocol::{ToolPart, ToolState, UiMessage, UiPart, grant::GrantRequest},
};

/// The answers `message` carries, in its order (a part's approval before its output), a part
/// of the client's own read by `own_answer` (its profile's); a grant that does not decode is
/// refused.
pub fn decode(
    message: &UiMessage,
    own_answer: fn(&ToolPart) -> Option<OwnAnswer>,
) -> Result<Resent, ApiError> {
    let mut answers = Vec::new();
    for part in &message.parts {
        let tool = match part {
            UiPart::Tool(tool) | UiPart::DynamicTool(tool) => tool,
            _ => continue,
        };
        if let Some(own) = own_answer(tool) {
            answers.extend(own);
            continue;
        }
        if let Some(approval) = &tool.approval
            && let Some(approved) = approval.approved
        {
            let decision = if approved {
                match (&approval.grant, &approval.edited_input) {
                    (Some(grant), args) => ApprovalDecision::ApproveAndGrant {
                        args: args.clone(),
                        grant: GrantRequest::from_value(grant).map_err(|e| {
                            ApiError::bad_request(
                                "invalid_grant",
                                format!("approval {}: {e}", approval.id),
                            )
                        })?,
                    },
                    (None, Some(args)) => ApprovalDecision::ApproveWithEdits { args: args.clone() },
                    (None, None) => ApprovalDecision::Approve,
                }
            } else if approval.dismissed == Some(true) {
                ApprovalDecision::Dismiss
            } else {
                ApprovalDecision::Deny {
                    reason: approval.reason.clone(),
                }
            };
            answers.push(PersonInput::Approval {
                approval_id: approval.id.clone(),
                decision,
                step_up: approval.step_up.clone(),
            });
        }
        answers.extend(browser_output(tool));
    }
    Ok(Resent {
        message_id: message.id.clone(),
        answers,
    })
}

/// A browser tool's output, if the part carries one.
fn browser_output(tool: &ToolPart) -> Option<PersonInput> {
    let result = match tool.state {
        ToolState::OutputAvailable => BrowserResult::Output {
            output: tool.output.clone().unwrap_or(Value::Null),
        },
        ToolState::OutputError => BrowserResult::Error {
            message: tool.error_text.clone().unwrap_or_default(),
        },
        _ => return None,
    };
    Some(PersonInput::BrowserResult {
        tool_call_id: tool.tool_call_id.clone(),
        result,
    })
}

/// Whether the request's last message answers the chat's waiting turn (rather than starting a
/// new one): an assistant message, or — as the seed system sends them — any message carrying
/// approval answers or tool outputs.
pub fn is_answer(message: &UiMessage) -> bool {
    message.role == crate::protocol::Role::Assistant
        || message.parts.iter().any(|p| match p {
            UiPart::Tool(t) | UiPart::DynamicTool(t) => {
                t.approval.as_ref().is_some_and(|a| a.approved.is_some())
                    || t.output.is_some()
                    || t.error_text.is_some()
            }
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Transport, gate::ApprovalResolution};
    use crate::transport::profile::{Profile, ai_sdk};
    use crate::{
        agent::{
            SessionRecord,
            gate::{CallPhase, StepCall},
            history::{Outcome, ToolCall},
            session::{TurnRecord, TurnStatus},
            tools::ToolLocation,
        },
        protocol::Approval,
    };
    use serde_json::json;

    /// The new answers in `message` for the chat of `record`, from an AI SDK client: decoded
    /// here, judged by the gate.
    fn extract(
        message: &UiMessage,
        record: &SessionRecord,
        signer: &str,
    ) -> Result<Vec<PersonInput>, ApiError> {
        extract_from(&ai_sdk(Transport::Sse), message, record, signer)
    }

    /// [`extract`] from a client of `profile`.
    fn extract_from(
        profile: &Profile,
        message: &UiMessage,
        record: &SessionRecord,
        signer: &str,
    ) -> Result<Vec<PersonInput>, ApiError> {
        Ok(decode(message, profile.own_answer)?.fresh(record.held(), signer)?)
    }

    fn record_with(calls: Vec<StepCall>) -> SessionRecord {
        let mut record = SessionRecord::new("chat", 0);
        record.turn = Some(TurnRecord {
            id: "turn-1".into(),
            message_id: "msg-1".into(),
            status: TurnStatus::AwaitingPerson,
            steps: 1,
            calls,
            held_text: vec![],
            usage: Default::default(),
            inputs: 0,
            transport: crate::agent::Transport::Sse,
            timing: None,
        });
        record
    }

    fn call(id: &str, name: &str, location: ToolLocation, phase: CallPhase) -> StepCall {
        StepCall {
            gated_by: None,
            ruling: None,
            call: ToolCall {
                id: id.into(),
                name: name.into(),
                args: json!({}),
                provider_data: None,
            },
            location,
            phase,
            announced: false,
            signatures: Vec::new(),
            signed_args: None,
            proposed_by: None,
            denied_by: None,
            revision: 0,
            revision_shown: 0,
            dropped: Vec::new(),
            countersign_closed: false,
        }
    }

    fn awaiting(approval: &str) -> CallPhase {
        CallPhase::AwaitingApproval {
            approval_id: approval.into(),
            requested_at_ms: 0,
            deadline_ms: 1,
        }
    }

    fn part(
        name: &str,
        id: &str,
        state: ToolState,
        approval: Option<(&str, bool, Option<&str>)>,
    ) -> UiPart {
        let mut tool = ToolPart::new(name, id, state);
        tool.approval = approval.map(|(id, approved, reason)| Approval {
            id: id.into(),
            approved: Some(approved),
            reason: reason.map(str::to_string),
            ..Approval::default()
        });
        UiPart::Tool(tool)
    }

    fn message(parts: Vec<UiPart>) -> UiMessage {
        let mut m = UiMessage::assistant("msg-1");
        m.parts = parts;
        m
    }

    #[test]
    fn approval_responses_become_decisions() {
        let record = record_with(vec![
            call(
                "c1",
                "process_payment",
                ToolLocation::Server,
                awaiting("a1"),
            ),
            call(
                "c2",
                "process_payment",
                ToolLocation::Server,
                awaiting("a2"),
            ),
        ]);
        let inputs = extract(
            &message(vec![
                part(
                    "process_payment",
                    "c1",
                    ToolState::ApprovalResponded,
                    Some(("a1", true, None)),
                ),
                part(
                    "process_payment",
                    "c2",
                    ToolState::ApprovalResponded,
                    Some(("a2", false, Some("no"))),
                ),
            ]),
            &record,
            "local",
        )
        .unwrap();
        assert_eq!(
            inputs,
            vec![
                PersonInput::Approval {
                    approval_id: "a1".into(),
                    decision: ApprovalDecision::Approve,
                    step_up: None,
                },
                PersonInput::Approval {
                    approval_id: "a2".into(),
                    decision: ApprovalDecision::Deny {
                        reason: Some("no".into())
                    },
                    step_up: None,
                },
            ]
        );
    }

    #[test]
    fn edited_input_approves_with_edits() {
        let record = record_with(vec![call(
            "c1",
            "process_payment",
            ToolLocation::Server,
            awaiting("a1"),
        )]);
        let mut tool = ToolPart::new("process_payment", "c1", ToolState::ApprovalResponded);
        tool.approval = Some(Approval {
            id: "a1".into(),
            approved: Some(true),
            edited_input: Some(json!({"amount": 5, "recipient": "B"})),
            ..Approval::default()
        });
        let inputs = extract(&message(vec![UiPart::Tool(tool)]), &record, "local").unwrap();
        assert_eq!(
            inputs,
            vec![PersonInput::Approval {
                approval_id: "a1".into(),
                decision: ApprovalDecision::ApproveWithEdits {
                    args: json!({"amount": 5, "recipient": "B"})
                },
                step_up: None,
            }]
        );
    }

    #[test]
    fn approval_and_browser_output_in_one_message_keep_that_order() {
        let record = record_with(vec![call(
            "c1",
            "get_location",
            ToolLocation::Browser,
            awaiting("a1"),
        )]);
        let mut tool = ToolPart::new("get_location", "c1", ToolState::OutputAvailable);
        tool.output = Some(json!({"latitude": 1}));
        tool.approval = Some(Approval {
            id: "a1".into(),
            approved: Some(true),
            ..Approval::default()
        });
        let inputs = extract(&message(vec![UiPart::Tool(tool)]), &record, "local").unwrap();
        assert!(matches!(inputs[0], PersonInput::Approval { .. }));
        assert!(matches!(inputs[1], PersonInput::BrowserResult { .. }));
    }

    #[test]
    fn echoes_of_known_answers_are_skipped_and_contradictions_refused() {
        let mut record = record_with(vec![call(
            "c1",
            "process_payment",
            ToolLocation::Server,
            CallPhase::Done {
                outcome: Outcome::Output { output: json!({}) },
                edited_args: None,
            },
        )]);
        record.resolved_approvals.insert(
            "a1".into(),
            ApprovalResolution::Approved {
                at_ms: 0,
                edited: false,
            },
        );
        let echo = message(vec![part(
            "process_payment",
            "c1",
            ToolState::OutputAvailable,
            Some(("a1", true, None)),
        )]);
        assert_eq!(extract(&echo, &record, "local").unwrap(), vec![]);
        let flip = message(vec![part(
            "process_payment",
            "c1",
            ToolState::ApprovalResponded,
            Some(("a1", false, None)),
        )]);
        assert_eq!(
            extract(&flip, &record, "local").unwrap_err().code,
            "approval_already_answered"
        );
    }

    #[test]
    fn the_seed_confirmation_part_is_understood_from_the_seeds_client_only() {
        let record = record_with(vec![call(
            "c1",
            "process_payment",
            ToolLocation::Server,
            awaiting("confirm-1"),
        )]);
        let mut tool = ToolPart::new(
            "adk_request_confirmation",
            "confirm-1",
            ToolState::OutputAvailable,
        );
        tool.output = Some(json!({"confirmed": false}));
        let confirmation = message(vec![UiPart::Tool(tool)]);
        // From an AI SDK client it is a part like any other: the output of a call the chat
        // never made, refused.
        assert_eq!(
            extract(&confirmation, &record, "local").unwrap_err().code,
            "unknown_tool_call"
        );
        let inputs = extract_from(
            &super::super::seed::stream(),
            &confirmation,
            &record,
            "local",
        )
        .unwrap();
        assert_eq!(
            inputs,
            vec![PersonInput::Approval {
                approval_id: "confirm-1".into(),
                decision: ApprovalDecision::Deny { reason: None },
                step_up: None,
            }]
        );
    }

    #[test]
    fn outputs_for_calls_the_chat_never_made_are_refused() {
        let record = record_with(vec![]);
        let forged = message(vec![part(
            "get_location",
            "c-forged",
            ToolState::OutputAvailable,
            None,
        )]);
        assert_eq!(
            extract(&forged, &record, "local").unwrap_err().code,
            "unknown_tool_call"
        );
    }

    #[test]
    fn a_message_of_another_turn_is_stale() {
        let record = record_with(vec![]);
        let mut other = message(vec![]);
        other.id = "msg-somewhere-else".into();
        assert_eq!(
            extract(&other, &record, "local").unwrap_err().code,
            "stale_message"
        );
    }
}
