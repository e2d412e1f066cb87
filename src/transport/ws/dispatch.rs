//! What a client's frame does once it is read: a `message` starts a turn or answers one, a
//! `tool_result` answers an approval or a browser tool, `resume` re-attaches to the chat's turn,
//! `interrupt` stops it, `ping` is answered, and audio goes to [`super::voice`]. Whoever sends a
//! frame is looked up again first: a removal or role change counts from the next frame.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{ChatScope, close, connection::Connection, inbound::Next, socket::Socket};
use crate::{
    agent::people::Ending,
    agent::{
        ApprovalDecision, BrowserResult, PersonInput, Session, TurnEntry,
        answer::{AnswerOutcome, Answers},
    },
    protocol::{
        ChatRequest, Chunk, ClientFrame, ServerControl, ToolReport, ToolReportError,
        sse::encode_chunk,
    },
    transport::{error::ApiError, request::ChatCommand, segment::read_answers},
};

impl Connection {
    pub(super) async fn on_frame(&mut self, frame: ClientFrame, socket: &mut Socket) -> Next {
        // Who sends it, as the directory has them now: nothing a socket does rests on who they
        // were when it opened (a role change takes effect at the next frame).
        match self.client.principal_now(self.runtime.people()) {
            Some(principal) => self.client.principal = Some(principal),
            None => return Next::Close(close::SIGNED_OUT, Ending::Removed.words().into()),
        }
        match frame {
            ClientFrame::Ping { timestamp } => {
                let pong = ServerControl::Pong { timestamp }.to_json();
                self.send_text(socket, pong).await
            }
            ClientFrame::Interrupt { reason } => {
                if let Some(chat) = &self.chat {
                    let reason = reason.unwrap_or_else(|| "interrupted by the person".into());
                    self.runtime.interrupt(chat, &reason).await;
                }
                Next::Continue
            }
            ClientFrame::AudioControl { action, id, mode } => {
                self.on_audio_control(action, id, mode, socket).await
            }
            ClientFrame::AudioChunk {
                chunk,
                sample_rate,
                channels,
                bit_depth,
            } => {
                self.on_audio_chunk(&chunk, (sample_rate, channels, bit_depth), socket)
                    .await
            }
            ClientFrame::Resume { id, received } => self.on_resume(id, received, socket).await,
            ClientFrame::ToolResult {
                tool_call_id,
                result,
            } => {
                let Some(chat) = self.chat.clone() else {
                    return self
                        .send_error(socket, "Send a message first: this socket has no chat yet.")
                        .await;
                };
                match self.tool_result_input(&chat, tool_call_id, result).await {
                    Ok(input) => self.submit(&chat, vec![input], socket).await,
                    Err(e) => self.refuse_frame(socket, &e.to_string()).await,
                }
            }
            ClientFrame::Message {
                id,
                messages,
                trigger,
                message_id,
            } => {
                let request = ChatRequest {
                    id,
                    messages,
                    trigger,
                    message_id,
                };
                self.on_chat(request, socket).await
            }
        }
    }

    /// A `tool_result` frame: a browser tool's output, or — as in the seed's draft — a
    /// confirmation addressed to an approval id ([`tool_result`]).
    async fn tool_result_input(
        &self,
        chat: &str,
        id: String,
        result: Value,
    ) -> Result<PersonInput, ToolReportError> {
        let session = self.runtime.session_head(chat).await.ok().flatten();
        tool_result(id, result, |id| {
            session.as_ref().is_some_and(|s| s.has_pending_approval(id))
        })
    }

    async fn on_chat(&mut self, mut request: ChatRequest, socket: &mut Socket) -> Next {
        if self.scope == ChatScope::Connection {
            request.id = self.connection_chat(&request.id).to_string();
        }
        // A socket serves one chat: a frame for another is refused whatever else it holds.
        if let Some(bound) = &self.chat
            && !request.id.trim().is_empty()
            && **bound != *request.id.trim()
        {
            let chat_id = request.id.trim();
            return self
                .send_error(
                    socket,
                    &format!(
                        "This socket belongs to chat {bound}; open another socket for {chat_id}."
                    ),
                )
                .await;
        }
        let command = match ChatCommand::decode(request, &self.profile) {
            Ok(command) => command,
            Err(e) => return self.send_api_error(socket, e).await,
        };
        let chat_id = command.chat_id().to_owned();
        if let Some(refusal) = self.foreign(&chat_id).await {
            return self.send_api_error(socket, refusal).await;
        }
        self.bind(&chat_id);
        let runtime = self.runtime.clone();
        let principal = self.client.principal();
        match command {
            ChatCommand::Answer { message, .. } => {
                match read_answers(&runtime, &chat_id, &message, principal.id(), &self.profile)
                    .await
                {
                    Ok((session, answers)) => self.answer(&chat_id, session, answers, socket).await,
                    Err(e) => self.send_api_error(socket, e).await,
                }
            }
            ChatCommand::Start { user, context, .. } => {
                match runtime
                    .start_turn_as(&chat_id, user, context, self.timing, principal.id())
                    .await
                {
                    Ok(started) => {
                        tracing::info!(connection = self.id, chat = %chat_id, turn = %started.turn_id, "turn started");
                        self.follow(started.turn_id, &started.log, 0);
                        Next::Continue
                    }
                    Err(e) => self.send_api_error(socket, ApiError::from(e)).await,
                }
            }
        }
    }

    async fn submit(&mut self, chat: &str, inputs: Vec<PersonInput>, socket: &mut Socket) -> Next {
        let session = match self.runtime.session_head(chat).await {
            Ok(session) => session,
            Err(e) => return self.send_api_error(socket, ApiError::from(e)).await,
        };
        self.answer(chat, session, Answers::Given(inputs), socket)
            .await
    }

    /// Gives the chat the person's answers and follows what they cause; answers the chat holds
    /// already (a client's resent copy) change nothing and are not an error here.
    async fn answer(
        &mut self,
        chat: &str,
        session: Option<Arc<Session>>,
        answers: Answers,
        socket: &mut Socket,
    ) -> Next {
        let actor = self.client.actor(self.profile.transport);
        match self.runtime.answer(chat, session, answers, &actor).await {
            Ok(AnswerOutcome::Applied(receipt)) => {
                match &mut self.turn {
                    // Already reading it, or waiting at its pause: go on from there.
                    Some(turn) if turn.turn_id == receipt.turn_id => {
                        if turn.reader.is_none() {
                            turn.reader = Some(receipt.log.subscribe(turn.sent));
                        }
                    }
                    _ => self.follow(receipt.turn_id, &receipt.log, receipt.from),
                }
                Next::Continue
            }
            Ok(AnswerOutcome::Nothing(_)) => Next::Continue,
            Err(e) => self.send_api_error(socket, ApiError::from(e)).await,
        }
    }

    /// Why this socket's principal may not touch `chat_id` (someone else's chat), if they may
    /// not.
    pub(super) async fn foreign(&self, chat_id: &str) -> Option<ApiError> {
        crate::transport::access::may_touch_chat(
            &self.runtime,
            self.client.principal().id(),
            chat_id,
        )
        .await
        .err()
    }

    /// `resume`: re-attach to the chat's current turn after `received` frames.
    async fn on_resume(&mut self, chat_id: String, received: u64, socket: &mut Socket) -> Next {
        if let Some(refusal) = self.foreign(&chat_id).await {
            return self.send_api_error(socket, refusal).await;
        }
        self.bind(&chat_id);
        let session = match self.runtime.existing_session(&chat_id).await {
            Ok(Some(session)) => session,
            Ok(None) => {
                return self
                    .send_error(socket, &format!("There is no chat {chat_id} to resume."))
                    .await;
            }
            Err(e) => return self.send_api_error(socket, ApiError::from(e)).await,
        };
        let Some((turn_id, log)) = session.current_turn() else {
            return self
                .send_error(socket, "This chat has no turn to resume.")
                .await;
        };
        let entries = log.entries_from(0);
        let mut frames = 0u64;
        let mut position = entries.len();
        for (index, entry) in entries.iter().enumerate() {
            if frames == received {
                position = index;
                break;
            }
            if !matches!(entry, TurnEntry::Pause) {
                frames += 1;
            }
        }
        if frames < received {
            return self
                .send_error(
                    socket,
                    &format!(
                        "Resume asked to skip {received} frames but the turn has only {frames}."
                    ),
                )
                .await;
        }
        // Say what still waits for the person before replaying, as a transient data chunk the
        // client's reducer does not store.
        let record = session.snapshot();
        let pending: Vec<Value> = record
            .turn
            .iter()
            .flat_map(|t| t.calls.iter())
            .filter(|c| c.is_waiting())
            .map(|c| {
                json!({
                    "toolCallId": c.call.id,
                    "toolName": c.call.name,
                    "approvalId": c.approval_id(),
                    "waitingFor": if c.approval_id().is_some() { "approval" } else { "browser" },
                })
            })
            .collect();
        let announce = Chunk::transient_data(
            crate::protocol::countersign::PENDING_PART,
            json!({ "pending": pending, "resumedAt": received }),
        );
        // Only a client that speaks our protocol resumes (the seed's never does), so this goes
        // out past the profile's encoder (the seed's drops data chunks), in its keys.
        if let Some(frame) = encode_chunk(&announce, self.keys)
            && let Next::Gone = self.send_text(socket, frame).await
        {
            return Next::Gone;
        }
        self.follow(turn_id, &log, position);
        Next::Continue
    }
}

/// A `tool_result` frame as the person's input: a confirmation addressed to an approval id (the
/// seed's draft), or a browser tool's output or failure ([`ToolReport::read`] says which;
/// `is_pending_approval`: whether the chat has a waiting approval with an id). A confirmation
/// that says neither yes nor no is refused.
fn tool_result(
    id: String,
    result: Value,
    is_pending_approval: impl FnOnce(&str) -> bool,
) -> Result<PersonInput, ToolReportError> {
    Ok(match ToolReport::read(id, result, is_pending_approval)? {
        ToolReport::Confirmation {
            approval_id,
            approved,
            reason,
        } => PersonInput::Approval {
            approval_id,
            decision: if approved {
                ApprovalDecision::Approve
            } else {
                ApprovalDecision::Deny { reason }
            },
            step_up: None,
        },
        ToolReport::Failed {
            tool_call_id,
            message,
        } => PersonInput::BrowserResult {
            tool_call_id,
            result: BrowserResult::Error { message },
        },
        ToolReport::Output {
            tool_call_id,
            output,
        } => PersonInput::BrowserResult {
            tool_call_id,
            result: BrowserResult::Output { output },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_result_frame_is_an_answer_or_a_browser_result_by_what_it_says() {
        let pending = |id: &str| id == "apv-1";
        let approval = |input: PersonInput| match input {
            PersonInput::Approval {
                approval_id,
                decision,
                ..
            } => Some((approval_id, decision)),
            _ => None,
        };
        assert_eq!(
            approval(tool_result("apv-1".into(), json!({"approved": true}), pending).unwrap()),
            Some(("apv-1".into(), ApprovalDecision::Approve))
        );
        assert_eq!(
            approval(
                tool_result(
                    "confirmation-apv-9".into(),
                    json!({"confirmed": false, "reason": "no"}),
                    |_| false
                )
                .unwrap()
            ),
            Some((
                "apv-9".into(),
                ApprovalDecision::Deny {
                    reason: Some("no".into())
                }
            ))
        );
        let browser = |input: PersonInput| match input {
            PersonInput::BrowserResult { result, .. } => Some(result),
            _ => None,
        };
        for (value, failed) in [
            (json!({"latitude": 1.0, "longitude": 2.0}), false),
            (json!({"latitude": 1.0, "error": "coarse fix"}), false),
            (json!({"success": true, "track": 2}), false),
            (json!({"success": false, "error": "blocked"}), true),
            (json!({"error": "permission denied"}), true),
            (json!({"error": "no", "message": "denied"}), true),
            (json!("plain"), false),
        ] {
            let result =
                browser(tool_result("call-1".into(), value.clone(), |_| false).unwrap()).unwrap();
            assert_eq!(
                matches!(result, BrowserResult::Error { .. }),
                failed,
                "{value}"
            );
        }
    }
}
