//! `useChat`'s message list around the reducer: which message a stream
//! starts from, and how each update is written back.

use serde_json::Value;

use super::{Applied, MessageReducer, ReduceError};
use crate::protocol::chunk::Chunk;
use crate::protocol::envelope::Trigger;
use crate::protocol::message::{Role, ToolPart, ToolState, UiMessage, UiPart};

/// `useChat`'s message list and the stream being applied to it.
///
/// Mirrors the SDK's `Chat.makeRequest` (`packages/ai/src/ui/chat.ts`):
///
/// * [`Conversation::begin_stream`] with `submit-message` continues the last
///   message if it is an assistant message, otherwise starts a fresh one; with
///   `regenerate-message` (and [`Conversation::begin_resume`]) it always
///   starts fresh.
/// * After every chunk that publishes ([`Applied::publishes`]) the message is
///   written back: it *replaces* the last message when the ids match, and is
///   *pushed* otherwise. So a continuation whose `start.messageId` differs
///   from the continued message's id duplicates it — the server must reuse
///   the id (§A.2, §A.9).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    messages: Vec<UiMessage>,
    active: Option<MessageReducer>,
}

impl Conversation {
    /// A conversation with this history and no active stream.
    pub fn new(messages: Vec<UiMessage>) -> Self {
        Self {
            messages,
            active: None,
        }
    }

    /// The messages as the UI shows them.
    pub fn messages(&self) -> &[UiMessage] {
        &self.messages
    }

    /// The messages, consuming the conversation (an active stream's
    /// unpublished changes are dropped, as in the SDK).
    pub fn into_messages(self) -> Vec<UiMessage> {
        self.messages
    }

    /// Appends a message (the user's turn).
    pub fn push(&mut self, message: UiMessage) {
        self.messages.push(message);
    }

    /// The reducer of the active stream, if any.
    pub fn active(&self) -> Option<&MessageReducer> {
        self.active.as_ref()
    }

    /// Starts applying a response stream. `fresh_message_id` is the
    /// client-generated id used when the stream does not continue the last
    /// message. For `regenerate-message` the caller has already cut the list
    /// back to the message being regenerated, as `Chat.regenerate` does.
    pub fn begin_stream(&mut self, trigger: Trigger, fresh_message_id: impl Into<String>) {
        let continued = match trigger {
            Trigger::SubmitMessage => self
                .messages
                .last()
                .filter(|message| message.role == Role::Assistant)
                .cloned(),
            Trigger::RegenerateMessage => None,
        };
        self.active = Some(match continued {
            Some(message) => MessageReducer::continuing(message),
            None => MessageReducer::new(fresh_message_id),
        });
    }

    /// Starts applying a resumed stream (`resume-stream`, `ai@6.0.264`): always
    /// from an empty message, so the replay must begin at the stream's
    /// `start` chunk (§A.8).
    pub fn begin_resume(&mut self, fresh_message_id: impl Into<String>) {
        self.active = Some(MessageReducer::new(fresh_message_id));
    }

    /// Applies one chunk of the active stream and writes the message back if
    /// it publishes.
    pub fn apply(&mut self, chunk: &Chunk) -> Result<Applied, ReduceError> {
        let reducer = self.active.as_mut().ok_or(ReduceError::NoActiveStream)?;
        let applied = reducer.apply(chunk)?;
        if applied.publishes() {
            let message = reducer.message();
            match self.messages.last_mut() {
                Some(last) if last.id == message.id => *last = message.clone(),
                _ => self.messages.push(message.clone()),
            }
        }
        Ok(applied)
    }

    /// Ends the active stream and returns its reducer (final message, finish
    /// reason, error). Unpublished changes are not written back, as in the SDK.
    pub fn end_stream(&mut self) -> Option<MessageReducer> {
        self.active.take()
    }

    /// `addToolApprovalResponse`: answers the approval `approval_id` in the
    /// *last* message (and in the active stream's message, if any). Only parts
    /// in `approval-requested` with that approval id change. Returns how many
    /// parts changed.
    pub fn add_tool_approval_response(
        &mut self,
        approval_id: &str,
        approved: bool,
        reason: Option<String>,
    ) -> usize {
        self.update_last_tools(|tool| {
            let Some(approval) = tool.approval.as_mut() else {
                return false;
            };
            if tool.state != ToolState::ApprovalRequested || approval.id != approval_id {
                return false;
            }
            tool.state = ToolState::ApprovalResponded;
            approval.approved = Some(approved);
            approval.reason.clone_from(&reason);
            true
        })
    }

    /// `addToolOutput` with a result: the tool part `tool_call_id` of the last
    /// message becomes `output-available`. Returns how many parts changed.
    pub fn add_tool_output(&mut self, tool_call_id: &str, output: Value) -> usize {
        self.update_last_tools(|tool| {
            if tool.tool_call_id != tool_call_id {
                return false;
            }
            tool.state = ToolState::OutputAvailable;
            tool.output = Some(output.clone());
            tool.error_text = None;
            true
        })
    }

    /// `addToolOutput` with `state: "output-error"`.
    pub fn add_tool_error(&mut self, tool_call_id: &str, error_text: impl Into<String>) -> usize {
        let error_text = error_text.into();
        self.update_last_tools(|tool| {
            if tool.tool_call_id != tool_call_id {
                return false;
            }
            tool.state = ToolState::OutputError;
            tool.output = None;
            tool.error_text = Some(error_text.clone());
            true
        })
    }

    /// Applies `update` to every tool part of the last message and of the
    /// active stream's message (the SDK updates both so the running stream
    /// does not overwrite the answer).
    fn update_last_tools(&mut self, mut update: impl FnMut(&mut ToolPart) -> bool) -> usize {
        let mut changed = 0;
        if let Some(last) = self.messages.last_mut() {
            for tool in last.parts.iter_mut().filter_map(UiPart::as_tool_mut) {
                if update(tool) {
                    changed += 1;
                }
            }
        }
        if let Some(reducer) = self.active.as_mut() {
            for tool in reducer
                .message
                .parts
                .iter_mut()
                .filter_map(UiPart::as_tool_mut)
            {
                update(tool);
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::reduce;
    use super::*;
    use crate::protocol::chunk::Chunk;

    // -- Conversation write-back. --

    #[test]
    fn submit_starts_fresh_after_a_user_message_and_pushes_on_first_publish() {
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "hi")]);
        conversation.begin_stream(Trigger::SubmitMessage, "fresh-1");
        // Quiet chunks do not publish: nothing pushed yet.
        conversation
            .apply(&Chunk::Start(Default::default()))
            .unwrap();
        conversation.apply(&Chunk::start_step()).unwrap();
        assert_eq!(conversation.messages().len(), 1);
        conversation.apply(&Chunk::text_start("t")).unwrap();
        assert_eq!(conversation.messages().len(), 2);
        assert_eq!(conversation.messages()[1].id, "fresh-1");
        conversation.apply(&Chunk::text_delta("t", "yo")).unwrap();
        assert_eq!(
            conversation.messages().len(),
            2,
            "replaced, not pushed again"
        );
        assert_eq!(conversation.messages()[1].text(), "yo");
        assert!(conversation.end_stream().is_some());
        assert_eq!(
            conversation.apply(&Chunk::text_start("t")),
            Err(ReduceError::NoActiveStream)
        );
    }

    #[test]
    fn continuation_with_the_same_id_extends_the_assistant_message() {
        let assistant = reduce(&[
            Chunk::start("a1"),
            Chunk::tool_input_available("c1", "t", json!({})),
        ])
        .into_message();
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "go"), assistant]);
        conversation.begin_stream(Trigger::SubmitMessage, "fresh");
        conversation.apply(&Chunk::start("a1")).unwrap();
        conversation
            .apply(&Chunk::tool_output_available("c1", json!(1)))
            .unwrap();
        assert_eq!(conversation.messages().len(), 2);
        assert_eq!(
            conversation.messages()[1]
                .find_tool_part("c1")
                .unwrap()
                .state,
            ToolState::OutputAvailable
        );
    }

    #[test]
    fn continuation_with_a_different_id_duplicates_the_message_like_the_sdk() {
        let assistant = reduce(&[
            Chunk::start("a1"),
            Chunk::tool_input_available("c1", "t", json!({})),
        ])
        .into_message();
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "go"), assistant]);
        conversation.begin_stream(Trigger::SubmitMessage, "fresh");
        conversation.apply(&Chunk::start("a2")).unwrap();
        let ids: Vec<_> = conversation
            .messages()
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(ids, ["u1", "a1", "a2"]);
        assert_eq!(
            conversation.messages()[2].parts,
            conversation.messages()[1].parts
        );
    }

    #[test]
    fn regenerate_and_resume_start_from_an_empty_message() {
        let assistant = reduce(&[Chunk::start("a1"), Chunk::text_start("t")]).into_message();
        for resume in [false, true] {
            let mut conversation =
                Conversation::new(vec![UiMessage::user_text("u1", "go"), assistant.clone()]);
            if resume {
                conversation.begin_resume("fresh");
            } else {
                conversation.begin_stream(Trigger::RegenerateMessage, "fresh");
            }
            assert_eq!(
                conversation.active().unwrap().message(),
                &UiMessage::assistant("fresh")
            );
            // Replaying the stream's own start with the same id replaces in place.
            conversation.apply(&Chunk::start("a1")).unwrap();
            assert_eq!(conversation.messages()[1].parts, vec![]);
        }
    }

    #[test]
    fn tool_outputs_from_the_browser_update_the_last_message() {
        let assistant = reduce(&[
            Chunk::start("a1"),
            Chunk::tool_input_available("geo", "get_location", json!({})),
        ])
        .into_message();
        let mut conversation = Conversation::new(vec![assistant]);
        assert_eq!(conversation.add_tool_output("geo", json!({"lat": 1})), 1);
        assert!(last_assistant_message_is_complete_with_tool_calls_for(
            &conversation
        ));
        assert_eq!(conversation.add_tool_error("geo", "denied by browser"), 1);
        let tool = conversation.messages()[0].find_tool_part("geo").unwrap();
        assert_eq!(
            (tool.state, tool.output.clone(), tool.error_text.as_deref()),
            (ToolState::OutputError, None, Some("denied by browser"))
        );
        assert_eq!(conversation.add_tool_output("nope", json!(1)), 0);
    }

    fn last_assistant_message_is_complete_with_tool_calls_for(conversation: &Conversation) -> bool {
        crate::protocol::message::last_assistant_message_is_complete_with_tool_calls(
            conversation.messages(),
        )
    }
}
