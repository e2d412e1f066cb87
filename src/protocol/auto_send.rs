//! When Countersign's own browser client (SSE mode) sends the next request by itself: its
//! `sendAutomaticallyWhen`, next to the AI SDK's two predicates in [`super::message`].
//!
//! The AI SDK's [`last_assistant_message_is_complete_with_approval_responses`] does not fit a
//! client that runs tools itself: it would send while an approved browser tool has not reported
//! yet, and never sends the result of a browser tool that needed no approval. Countersign's rule
//! is [`answers_to_send`]: the answers go out exactly when every approval of the last
//! assistant message's last step has an answer and every browser tool of that step has its
//! output — and, through [`AnswerSet::fingerprint`], never twice for the same answers (the seed
//! system looped here, ADR 0006/0007).
//!
//! [`last_assistant_message_is_complete_with_approval_responses`]:
//! super::message::last_assistant_message_is_complete_with_approval_responses

use super::message::{Role, ToolPart, ToolState, UiMessage, UiPart};

/// The answers of a step that is ready to go to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerSet {
    /// The assistant message the answers belong to (the request's `messageId`).
    pub message_id: String,
    /// The message id and every answer (`call:true`, `call:false` for an approval, `call:out`
    /// for a browser tool's result), sorted: equal answers give an equal fingerprint, so a client
    /// that remembers the fingerprints it sent sends each set once.
    pub fingerprint: String,
}

/// Countersign's auto-send rule: the answers of the last assistant message's last step, once
/// nothing in that step still waits for the person or the browser; `None` while something does,
/// or when the step holds no answer at all.
///
/// `runs_in_browser(tool_name)` says which tools the browser runs. In the last step:
///
/// * an approval still requested, or a tool whose input is still streaming, waits;
/// * a browser tool waits while it runs: input available (it needs no approval), or approved
///   and without its output yet;
/// * every answered approval is an answer, approved or denied (a denied browser tool never
///   runs, so it does not wait);
/// * a browser tool's output (or error) is an answer;
/// * server tools that ran or were denied, and parts of earlier steps, neither wait nor answer.
pub fn answers_to_send(
    messages: &[UiMessage],
    runs_in_browser: impl Fn(&str) -> bool,
) -> Option<AnswerSet> {
    let last = messages.last()?;
    if last.role != Role::Assistant {
        return None;
    }
    let mut answers = Vec::new();
    for tool in last.last_step_parts().iter().filter_map(UiPart::as_tool) {
        match standing(tool, &runs_in_browser) {
            Standing::Waits => return None,
            Standing::Answered(answer) => answers.push(answer),
            Standing::Settled => {}
        }
    }
    if answers.is_empty() {
        return None;
    }
    answers.sort();
    Some(AnswerSet {
        fingerprint: format!("{}|{}", last.id, answers.join(",")),
        message_id: last.id.clone(),
    })
}

/// Where one tool part of the last step stands for the rule.
enum Standing {
    /// The person or the browser still has to act on it.
    Waits,
    /// It carries an answer for the server.
    Answered(String),
    /// Nothing to wait for and nothing to send.
    Settled,
}

fn standing(tool: &ToolPart, runs_in_browser: &dyn Fn(&str) -> bool) -> Standing {
    let browser = || runs_in_browser(&tool.tool_name);
    match tool.state {
        ToolState::ApprovalRequested | ToolState::InputStreaming => Standing::Waits,
        ToolState::InputAvailable if browser() => Standing::Waits,
        ToolState::ApprovalResponded => {
            let approved = tool.approval.as_ref().and_then(|a| a.approved) == Some(true);
            if approved && browser() {
                Standing::Waits
            } else {
                Standing::Answered(format!("{}:{}", tool.tool_call_id, approved))
            }
        }
        ToolState::OutputAvailable | ToolState::OutputError if browser() => {
            Standing::Answered(format!("{}:out", tool.tool_call_id))
        }
        ToolState::InputAvailable
        | ToolState::OutputAvailable
        | ToolState::OutputError
        | ToolState::OutputDenied => Standing::Settled,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{AnswerSet, answers_to_send};
    use crate::protocol::{
        Approval, Chunk, Conversation, Role, ToolPart, ToolState, ToolState::*, Trigger, UiMessage,
        UiPart,
    };

    /// `get_location` and `change_bgm` run in the browser; anything else on the server.
    fn runs_in_browser(name: &str) -> bool {
        matches!(name, "get_location" | "change_bgm")
    }

    /// A tool part; `approved` is the approval's answer (`None`: requested, or no approval for
    /// states before one).
    fn tool(name: &str, call: &str, state: ToolState, approved: Option<bool>) -> UiPart {
        let mut part = ToolPart::new(name, call, state);
        if matches!(
            state,
            ToolState::ApprovalRequested | ToolState::ApprovalResponded | ToolState::OutputDenied
        ) || approved.is_some()
        {
            part.approval = Some(Approval {
                id: format!("appr-{call}"),
                approved,
                ..Approval::default()
            });
        }
        UiPart::Tool(part)
    }

    fn assistant(parts: Vec<UiPart>) -> UiMessage {
        let mut message = UiMessage::assistant("m1");
        message.parts = parts;
        message
    }

    fn chat(last: UiMessage) -> Vec<UiMessage> {
        vec![UiMessage::user_text("u1", "Pay Ada 30 and Ben 40"), last]
    }

    fn fingerprint(messages: &[UiMessage]) -> Option<String> {
        answers_to_send(messages, runs_in_browser).map(|set| set.fingerprint)
    }

    #[test]
    fn the_rule_table() {
        let pay = "process_payment";
        let geo = "get_location";
        let bgm = "change_bgm";
        let weather = "get_weather";
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<UiPart>, Option<&str>)> = vec![
            ("all approvals answered",
                vec![tool(pay, "a", ApprovalResponded, Some(true)), tool(pay, "b", ApprovalResponded, Some(true))],
                Some("m1|a:true,b:true")),
            ("one approval still pending",
                vec![tool(pay, "a", ApprovalResponded, Some(true)), tool(pay, "b", ApprovalRequested, None)],
                None),
            ("a denied one is an answer",
                vec![tool(pay, "a", ApprovalResponded, Some(true)), tool(pay, "b", ApprovalResponded, Some(false))],
                Some("m1|a:true,b:false")),
            ("a lone denial is sent too",
                vec![tool(pay, "a", ApprovalResponded, Some(false))],
                Some("m1|a:false")),
            ("an answer without its approved flag counts as a denial",
                vec![tool(pay, "a", ApprovalResponded, None)],
                Some("m1|a:false")),
            ("an approved browser tool waits for its output",
                vec![tool(geo, "g", ApprovalResponded, Some(true))],
                None),
            ("a denied browser tool does not wait",
                vec![tool(geo, "g", ApprovalResponded, Some(false))],
                Some("m1|g:false")),
            ("a browser tool's output is an answer",
                vec![tool(geo, "g", OutputAvailable, Some(true))],
                Some("m1|g:out")),
            ("a browser tool's error is an answer",
                vec![tool(geo, "g", OutputError, Some(true))],
                Some("m1|g:out")),
            ("a browser tool without approval runs: it waits",
                vec![tool(bgm, "t", InputAvailable, None)],
                None),
            ("a browser tool without approval that finished",
                vec![tool(bgm, "t", OutputAvailable, None)],
                Some("m1|t:out")),
            ("an approval answered while a browser tool still runs",
                vec![tool(pay, "a", ApprovalResponded, Some(true)), tool(bgm, "t", InputAvailable, None)],
                None),
            ("an approval answered and a browser tool done",
                vec![tool(pay, "a", ApprovalResponded, Some(true)), tool(geo, "g", OutputAvailable, Some(true))],
                Some("m1|a:true,g:out")),
            ("input still streaming waits",
                vec![tool(pay, "a", ApprovalResponded, Some(true)), tool(pay, "b", InputStreaming, None)],
                None),
            ("server tools that ran are no answers",
                vec![tool(weather, "w", OutputAvailable, None), tool(pay, "p", OutputError, None)],
                None),
            ("server tools that ran beside an answer",
                vec![tool(weather, "w", OutputAvailable, None), tool(pay, "a", ApprovalResponded, Some(true))],
                Some("m1|a:true")),
            ("a server tool with its input is not waited for",
                vec![tool(weather, "w", InputAvailable, None), tool(pay, "a", ApprovalResponded, Some(true))],
                Some("m1|a:true")),
            ("a denial the server already applied is no answer",
                vec![tool(pay, "a", OutputDenied, Some(false))],
                None),
            ("no tool parts",
                vec![UiPart::StepStart],
                None),
            ("only the last step counts",
                vec![
                    tool(pay, "old", ApprovalRequested, None),
                    UiPart::StepStart,
                    tool(pay, "a", ApprovalResponded, Some(true)),
                ],
                Some("m1|a:true")),
            ("an answer of an earlier step is not resent",
                vec![tool(pay, "a", ApprovalResponded, Some(true)), UiPart::StepStart],
                None),
            ("answers are sorted by call",
                vec![tool(pay, "b", ApprovalResponded, Some(false)), tool(pay, "a", ApprovalResponded, Some(true))],
                Some("m1|a:true,b:false")),
        ];
        for (name, parts, expected) in cases {
            let messages = chat(assistant(parts));
            assert_eq!(fingerprint(&messages).as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn only_an_assistant_message_last_is_sent() {
        assert_eq!(answers_to_send(&[], runs_in_browser), None, "no messages");
        let answered = assistant(vec![tool(
            "process_payment",
            "a",
            ApprovalResponded,
            Some(true),
        )]);
        let user_last = vec![answered.clone(), UiMessage::user_text("u2", "and Ben?")];
        assert_eq!(fingerprint(&user_last), None, "a user message last");
        let mut system = answered.clone();
        system.role = Role::System;
        assert_eq!(fingerprint(&chat(system)), None, "a system message last");
        assert_eq!(
            answers_to_send(&chat(answered), runs_in_browser),
            Some(AnswerSet {
                message_id: "m1".into(),
                fingerprint: "m1|a:true".into(),
            })
        );
    }

    #[test]
    fn which_tools_run_in_the_browser_is_the_callers_word() {
        let messages = chat(assistant(vec![tool(
            "get_location",
            "g",
            ApprovalResponded,
            Some(true),
        )]));
        assert_eq!(fingerprint(&messages), None);
        assert_eq!(
            answers_to_send(&messages, |_| false).map(|s| s.fingerprint),
            Some("m1|g:true".into()),
            "the same call run by the server is an approval to send"
        );
    }

    #[test]
    fn unlike_the_ai_sdk_rule_it_waits_for_the_browser_and_sends_its_results() {
        use crate::protocol::last_assistant_message_is_complete_with_approval_responses as sdk;
        let running = chat(assistant(vec![tool(
            "get_location",
            "g",
            ApprovalResponded,
            Some(true),
        )]));
        assert!(sdk(&running));
        assert_eq!(fingerprint(&running), None);
        let played = chat(assistant(vec![tool(
            "change_bgm",
            "t",
            OutputAvailable,
            None,
        )]));
        assert!(!sdk(&played));
        assert_eq!(fingerprint(&played).as_deref(), Some("m1|t:out"));
    }

    /// A stream as the server sends it, folded as the browser folds it; then the person answers
    /// one approval after the other and the browser's tool reports.
    #[test]
    fn a_streamed_step_is_sent_once_everything_is_answered() {
        let mut conversation =
            Conversation::new(vec![UiMessage::user_text("u1", "Pay and locate")]);
        conversation.begin_stream(Trigger::SubmitMessage, "m1");
        let chunks = [
            json!({"type": "start", "messageId": "m1"}),
            json!({"type": "start-step"}),
            json!({"type": "tool-input-available", "toolCallId": "a", "toolName": "process_payment", "input": {"amount": 30, "recipient": "Ada"}}),
            json!({"type": "tool-approval-request", "approvalId": "appr-a", "toolCallId": "a"}),
            json!({"type": "tool-input-available", "toolCallId": "g", "toolName": "get_location", "input": {}}),
            json!({"type": "tool-approval-request", "approvalId": "appr-g", "toolCallId": "g"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish"}),
        ];
        for chunk in chunks {
            let chunk = Chunk::from_json(&chunk.to_string()).unwrap_or_else(|e| panic!("{e}"));
            conversation
                .apply(&chunk)
                .unwrap_or_else(|e| panic!("{chunk:?}: {e}"));
        }
        conversation.end_stream();
        let send = |c: &Conversation| fingerprint(c.messages());
        assert_eq!(send(&conversation), None, "both approvals pending");

        conversation.add_tool_approval_response("appr-a", true, None);
        assert_eq!(send(&conversation), None, "the location is still pending");

        conversation.add_tool_approval_response("appr-g", true, None);
        assert_eq!(send(&conversation), None, "the browser runs the location");

        conversation.add_tool_output("g", json!({"latitude": 35.6, "longitude": 139.7}));
        assert_eq!(send(&conversation).as_deref(), Some("m1|a:true,g:out"));
    }
}
