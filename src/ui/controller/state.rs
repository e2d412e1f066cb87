//! The chat page's state types and the pure rules over the conversation that the controller
//! applies: whether the turn waits for the person, which approvals are overdue, which calls
//! already ran, which call an answer is for, what a sent message looks like.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::grant::GrantRequest;

use crate::{
    protocol::{Role, ToolState, UiMessage, UiPart, message::FilePart},
    ui::platform::PickedFile,
};

/// Which transport the page uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    Sse,
    Bidi,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sse => "sse",
            Mode::Bidi => "bidi",
        }
    }
}

/// Where the current request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ready,
    /// Sent; nothing received yet.
    Submitted,
    Streaming,
}

/// The BIDI socket's state, as the connection indicator shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Offline,
    Connecting,
    Live,
    Reconnecting,
}

impl Link {
    pub fn label(self) -> &'static str {
        match self {
            Link::Offline => "Offline",
            Link::Connecting => "Connecting",
            Link::Live => "Live",
            Link::Reconnecting => "Reconnecting",
        }
    }
}

/// An error the person can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct Banner {
    pub message: String,
    /// Whether "Try again" re-sends the last request.
    pub retry: bool,
}

/// The person's answer to an approval card.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Approve,
    ApproveWithEdits(Value),
    Deny(Option<String>),
    /// Approve (with these edited arguments, if any) and remember it as a grant.
    Remember(Option<Value>, GrantRequest),
    /// "Not now": no decision; the call ends undecided and can be asked again.
    Dismiss,
}

impl Answer {
    pub fn approved(&self) -> bool {
        !matches!(self, Answer::Deny(_) | Answer::Dismiss)
    }

    /// What the answer adds to the approval object the AI SDK sends (Countersign's
    /// extensions).
    pub(super) fn extension(&self) -> Extension {
        match self {
            Answer::ApproveWithEdits(args) => Extension {
                edited: Some(args.clone()),
                ..Extension::default()
            },
            Answer::Remember(args, grant) => Extension {
                edited: args.clone(),
                grant: Some(grant.clone()),
                ..Extension::default()
            },
            Answer::Dismiss => Extension {
                dismissed: true,
                ..Extension::default()
            },
            Answer::Approve | Answer::Deny(_) => Extension::default(),
        }
    }

    /// A denial's reason, if it says anything.
    pub(super) fn reason(&self) -> Option<String> {
        match self {
            Answer::Deny(reason) => reason.clone().filter(|r| !r.trim().is_empty()),
            _ => None,
        }
    }

    /// The arguments the person edited before approving.
    pub fn edited(&self) -> Option<&Value> {
        match self {
            Answer::ApproveWithEdits(args) | Answer::Remember(Some(args), _) => Some(args),
            _ => None,
        }
    }
}

/// Countersign's extensions of one approval answer: edited arguments, a grant, "not now", a
/// passkey confirmation.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Extension {
    pub edited: Option<Value>,
    pub grant: Option<GrantRequest>,
    pub dismissed: bool,
    pub step_up: Option<Value>,
}

impl Extension {
    pub(super) fn is_empty(&self) -> bool {
        *self == Extension::default()
    }
}

/// The call an approval belongs to, with the arguments it runs with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ApprovedCall {
    pub call_id: String,
    pub tool_name: String,
    /// The edited arguments if there are any, else the call's input (`null` without one).
    pub args: Value,
}

/// The call of the last message that waits for approval `approval_id` (any state: the caller
/// answers it next).
pub(super) fn call_of_approval(
    messages: &[UiMessage],
    approval_id: &str,
    edited: Option<&Value>,
) -> Option<ApprovedCall> {
    let tool = messages
        .last()?
        .tool_parts()
        .find(|t| t.approval.as_ref().is_some_and(|a| a.id == approval_id))?;
    Some(ApprovedCall {
        call_id: tool.tool_call_id.clone(),
        tool_name: tool.tool_name.clone(),
        args: edited
            .cloned()
            .or_else(|| tool.input.clone())
            .unwrap_or(Value::Null),
    })
}

/// Whether the last message is an assistant message with an approval the person has not
/// answered yet (then the composer stays usable while the turn waits).
pub(super) fn waits_for_person(messages: &[UiMessage]) -> bool {
    messages.last().is_some_and(|last| {
        last.role == Role::Assistant
            && last
                .tool_parts()
                .any(|t| t.state == ToolState::ApprovalRequested)
    })
}

/// Whether the last message has an approval that waits for a decision — this person's, or
/// others' (a signature given here, and more wanted): a decision made elsewhere changes it.
pub(super) fn awaits_decision(messages: &[UiMessage]) -> bool {
    let Some(last) = messages.last().filter(|m| m.role == Role::Assistant) else {
        return false;
    };
    let waiting_for_others = last.parts.iter().any(|part| match part {
        crate::protocol::UiPart::Data(data)
            if data.name == crate::protocol::countersign::PROGRESS_PART =>
        {
            data.data.get("state").and_then(serde_json::Value::as_str) == Some("waiting")
        }
        _ => false,
    });
    // A call decided (here or elsewhere) whose result is not shown yet counts too: the commit
    // of what it ran is the news that brings the result.
    waiting_for_others
        || last.tool_parts().any(|t| {
            matches!(
                t.state,
                ToolState::ApprovalRequested | ToolState::ApprovalResponded
            )
        })
}

/// The calls that already ran, failed or were denied: this browser does not run them again.
pub(super) fn finished_calls(messages: &[UiMessage]) -> impl Iterator<Item = String> + '_ {
    messages
        .iter()
        .flat_map(UiMessage::tool_parts)
        .filter(|tool| {
            matches!(
                tool.state,
                ToolState::OutputAvailable | ToolState::OutputError | ToolState::OutputDenied
            )
        })
        .map(|tool| tool.tool_call_id.clone())
}

/// The messages to show when a snapshot of the chat (`snapshot`: the server's messages as they
/// were when it was taken) arrives while the page shows `local`: the snapshot's, then what the
/// page shows after the last message the snapshot has — a message it sent and the answer to it,
/// which reached the server after the snapshot was taken (a snapshot asked for by "New chat"
/// can arrive after the first message was sent, or even answered). So the page shows what it
/// sent whatever the order of arrivals; a message both have is the snapshot's copy (the
/// server's: stored attachments, decisions made elsewhere).
pub(super) fn merge_snapshot(local: &[UiMessage], snapshot: Vec<UiMessage>) -> Vec<UiMessage> {
    let known: std::collections::HashSet<&str> = snapshot.iter().map(|m| m.id.as_str()).collect();
    let newer = local
        .iter()
        .rposition(|m| known.contains(m.id.as_str()))
        .map_or(0, |last_known| last_known + 1);
    let tail = local[newer..].to_vec();
    let mut merged = snapshot;
    merged.extend(tail);
    merged
}

/// A grace after a deadline before asking the server what it did (clocks and timers differ).
const DEADLINE_GRACE_MS: i64 = 1000;

/// The approvals of the last message still requested more than a second after their deadline
/// (approval id → deadline on this browser's clock).
pub(super) fn overdue_approvals(
    messages: &[UiMessage],
    deadlines: &HashMap<String, i64>,
    now: i64,
) -> Vec<String> {
    let Some(last) = messages.last() else {
        return Vec::new();
    };
    last.tool_parts()
        .filter(|t| t.state == ToolState::ApprovalRequested)
        .filter_map(|t| t.approval.as_ref().map(|a| a.id.clone()))
        .filter(|id| {
            deadlines
                .get(id)
                .is_some_and(|d| now > d + DEADLINE_GRACE_MS)
        })
        .collect()
}

/// The messages as they are sent: our extensions (`editedInput`, `grant`, `dismissed`) added
/// to the last message's approvals they belong to (approval id → what the person added).
pub(super) fn with_extensions(
    mut messages: Vec<UiMessage>,
    extensions: &HashMap<String, Extension>,
) -> Vec<UiMessage> {
    if let Some(last) = messages.last_mut() {
        for part in &mut last.parts {
            if let Some(approval) = part.as_tool_mut().and_then(|t| t.approval.as_mut())
                && let Some(extension) = extensions.get(&approval.id)
            {
                if let Some(args) = &extension.edited {
                    approval.edited_input = Some(args.clone());
                }
                if let Some(grant) = &extension.grant {
                    approval.grant = serde_json::to_value(grant).ok();
                }
                if extension.dismissed {
                    approval.dismissed = Some(true);
                }
                if let Some(assertion) = &extension.step_up {
                    approval.step_up = Some(assertion.clone());
                }
            }
        }
    }
    messages
}

/// The person's message: its text (already trimmed; none if empty) and its images.
pub(super) fn user_message(id: String, text: &str, files: Vec<PickedFile>) -> UiMessage {
    let mut message = UiMessage::user_text(id, text);
    if text.is_empty() {
        message.parts.clear();
    }
    for file in files {
        message.parts.push(UiPart::File(FilePart {
            media_type: file.media_type,
            url: file.url,
            filename: Some(file.name),
            provider_metadata: None,
        }));
    }
    message
}

/// What the chat list calls a chat begun with `text` (an image alone has no words).
pub(super) fn chat_title(text: &str) -> &str {
    if text.is_empty() { "(image)" } else { text }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::{Approval, ToolPart};

    fn tool(call: &str, state: ToolState, input: Option<Value>) -> UiPart {
        let mut part = ToolPart::new("process_payment", call, state);
        part.input = input;
        part.approval = Some(Approval {
            id: format!("appr-{call}"),
            ..Approval::default()
        });
        UiPart::Tool(part)
    }

    fn assistant(parts: Vec<UiPart>) -> UiMessage {
        let mut message = UiMessage::assistant("m1");
        message.parts = parts;
        message
    }

    #[test]
    fn answers_say_what_they_send() {
        let edited = json!({"amount": 20});
        assert!(Answer::Approve.approved());
        assert!(Answer::ApproveWithEdits(edited.clone()).approved());
        assert!(!Answer::Deny(None).approved());
        assert_eq!(
            Answer::Deny(Some("too much".into())).reason().as_deref(),
            Some("too much")
        );
        assert_eq!(Answer::Deny(Some("  ".into())).reason(), None, "blank");
        assert_eq!(Answer::Approve.reason(), None);
        assert_eq!(
            Answer::ApproveWithEdits(edited.clone()).edited(),
            Some(&edited)
        );
        assert_eq!(Answer::Deny(None).edited(), None);
    }

    #[test]
    fn an_answer_finds_its_call_with_the_arguments_it_runs_with() {
        let input = json!({"amount": 50, "recipient": "Hanako"});
        let messages = vec![
            UiMessage::user_text("u1", "Send $50 to Hanako"),
            assistant(vec![
                tool("a", ToolState::ApprovalRequested, Some(input.clone())),
                tool("b", ToolState::ApprovalRequested, None),
            ]),
        ];
        let call = call_of_approval(&messages, "appr-a", None);
        assert_eq!(
            call,
            Some(ApprovedCall {
                call_id: "a".into(),
                tool_name: "process_payment".into(),
                args: input,
            })
        );
        let edited = json!({"amount": 20, "recipient": "Hanako"});
        assert_eq!(
            call_of_approval(&messages, "appr-a", Some(&edited)).map(|c| c.args),
            Some(edited)
        );
        assert_eq!(
            call_of_approval(&messages, "appr-b", None).map(|c| c.args),
            Some(Value::Null),
            "no input"
        );
        assert_eq!(call_of_approval(&messages, "appr-x", None), None);
        assert_eq!(
            call_of_approval(&messages[..1], "appr-a", None),
            None,
            "only the last message"
        );
    }

    #[test]
    fn a_turn_waits_for_the_person_while_an_approval_is_requested() {
        let requested = assistant(vec![tool("a", ToolState::ApprovalRequested, None)]);
        let answered = assistant(vec![tool("a", ToolState::ApprovalResponded, None)]);
        assert!(waits_for_person(std::slice::from_ref(&requested)));
        assert!(!waits_for_person(&[answered]));
        assert!(!waits_for_person(&[]));
        assert!(!waits_for_person(&[
            requested,
            UiMessage::user_text("u2", "never mind")
        ]));
    }

    #[test]
    fn a_snapshot_never_hides_what_the_page_sent_whatever_the_order_of_arrivals() {
        let ids = |messages: &[UiMessage]| -> Vec<String> {
            messages.iter().map(|m| m.id.clone()).collect()
        };
        let sent = UiMessage::user_text("u1", "Send $12 to Hanako");
        let mut answer = assistant(vec![tool("a", ToolState::OutputAvailable, None)]);
        answer.id = "m1".into();
        // "New chat", then a message sent at once: the new chat's (empty) snapshot arrives
        // before the answer, after it, or after the server kept the message.
        let server_had = [
            vec![],
            vec![sent.clone()],
            vec![sent.clone(), answer.clone()],
        ];
        let page_had = [
            vec![],
            vec![sent.clone()],
            vec![sent.clone(), answer.clone()],
        ];
        for snapshot in &server_had {
            for local in &page_had {
                let merged = merge_snapshot(local, snapshot.clone());
                let longest = if local.len() > snapshot.len() {
                    local
                } else {
                    snapshot
                };
                assert_eq!(
                    ids(&merged),
                    ids(longest),
                    "page {:?}, snapshot {:?}",
                    ids(local),
                    ids(snapshot)
                );
            }
        }
        // An earlier chat opened and written to before its snapshot came: its history, then
        // the new message.
        let history = vec![UiMessage::user_text("u0", "hi"), UiMessage::assistant("m0")];
        assert_eq!(
            ids(&merge_snapshot(
                std::slice::from_ref(&sent),
                history.clone()
            )),
            ["u0", "m0", "u1"]
        );
        // What both have is the server's copy (an attachment it keeps by URL).
        let mut kept = sent.clone();
        kept.parts.push(UiPart::File(FilePart {
            media_type: "image/png".into(),
            url: "/api/chats/c/files/abc".into(),
            filename: None,
            provider_metadata: None,
        }));
        let merged = merge_snapshot(&[sent.clone(), answer.clone()], vec![kept.clone()]);
        assert_eq!(merged, vec![kept, answer]);
        // A newer snapshot (a message from another device) is shown as it is.
        let mut later = history.clone();
        later.push(sent.clone());
        assert_eq!(ids(&merge_snapshot(&history, later)), ["u0", "m0", "u1"]);
    }

    #[test]
    fn calls_that_ended_are_not_run_again() {
        let messages = vec![assistant(vec![
            tool("ran", ToolState::OutputAvailable, None),
            tool("failed", ToolState::OutputError, None),
            tool("denied", ToolState::OutputDenied, None),
            tool("waiting", ToolState::ApprovalRequested, None),
            tool("ready", ToolState::InputAvailable, None),
        ])];
        assert_eq!(
            finished_calls(&messages).collect::<Vec<_>>(),
            ["ran", "failed", "denied"]
        );
    }

    #[test]
    fn an_approval_is_overdue_a_second_after_its_deadline() {
        let messages = vec![assistant(vec![
            tool("a", ToolState::ApprovalRequested, None),
            tool("b", ToolState::ApprovalRequested, None),
            tool("c", ToolState::ApprovalResponded, None),
        ])];
        let deadlines = HashMap::from([
            ("appr-a".to_string(), 10_000),
            ("appr-b".to_string(), 20_000),
            ("appr-c".to_string(), 0),
        ]);
        assert!(overdue_approvals(&messages, &deadlines, 11_000).is_empty());
        assert_eq!(overdue_approvals(&messages, &deadlines, 11_001), ["appr-a"]);
        assert_eq!(
            overdue_approvals(&messages, &deadlines, 30_000),
            ["appr-a", "appr-b"]
        );
        assert!(overdue_approvals(&messages, &HashMap::new(), 30_000).is_empty());
        assert!(overdue_approvals(&[], &deadlines, 30_000).is_empty());
    }

    #[test]
    fn extensions_go_out_on_the_last_message_only() {
        let edited = json!({"amount": 20});
        let grant = GrantRequest {
            scope: crate::protocol::grant::GrantScope::Budget,
            seconds: 3600,
            max_cents: Some(5_000),
        };
        let messages = vec![
            assistant(vec![tool("a", ToolState::ApprovalResponded, None)]),
            assistant(vec![
                tool("a", ToolState::ApprovalResponded, None),
                tool("b", ToolState::ApprovalResponded, None),
                tool("c", ToolState::ApprovalResponded, None),
            ]),
        ];
        let extensions = HashMap::from([
            (
                "appr-a".to_string(),
                Answer::Remember(Some(edited.clone()), grant.clone()).extension(),
            ),
            ("appr-c".to_string(), Answer::Dismiss.extension()),
        ]);
        let sent = with_extensions(messages, &extensions);
        let approval = |m: &UiMessage, call: &str| {
            m.find_tool_part(call)
                .and_then(|t| t.approval.clone())
                .unwrap_or_default()
        };
        assert_eq!(approval(&sent[1], "a").edited_input, Some(edited));
        assert_eq!(
            approval(&sent[1], "a").grant,
            Some(json!({"scope": "budget", "seconds": 3600, "maxCents": 5000}))
        );
        assert_eq!(approval(&sent[1], "b").edited_input, None);
        assert_eq!(approval(&sent[1], "b").grant, None);
        assert_eq!(approval(&sent[1], "c").dismissed, Some(true));
        assert_eq!(
            approval(&sent[0], "a").edited_input,
            None,
            "an earlier message"
        );
        assert!(Answer::Approve.extension().is_empty());
        assert!(!Answer::Dismiss.approved());
    }

    #[test]
    fn a_message_carries_its_text_and_images() {
        let file = PickedFile {
            name: "cat.png".into(),
            media_type: "image/png".into(),
            size: 3,
            url: "data:image/png;base64,AAAA".into(),
        };
        let message = user_message("u1".into(), "Look", vec![file.clone()]);
        assert_eq!(message.role, Role::User);
        assert_eq!(message.text(), "Look");
        assert_eq!(message.parts.len(), 2);
        let UiPart::File(part) = &message.parts[1] else {
            panic!("not a file part: {:?}", message.parts[1]);
        };
        assert_eq!(part.filename.as_deref(), Some("cat.png"));
        assert_eq!(part.url, file.url);

        let image_only = user_message("u2".into(), "", vec![file]);
        assert_eq!(image_only.parts.len(), 1, "no empty text part");
        assert!(matches!(image_only.parts[0], UiPart::File(_)));
        assert_eq!(chat_title(""), "(image)");
        assert_eq!(chat_title("Look"), "Look");
    }
}
