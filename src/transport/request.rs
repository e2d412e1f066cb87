//! One decoder for what every client asks of a chat: the AI SDK's `POST /api/chat` body, the
//! original system's envelope (`transport::seed` turns it into the same request), a WebSocket
//! `message` frame. Each becomes a [`ChatCommand`] through the same checks, so the transports
//! cannot disagree about what a valid request is. The messages before the last are read only
//! for what a new chat may adopt as context ([`super::context`], ADR 0020).

use axum::http::StatusCode;

use super::{answers::is_answer, context::earlier_context, error::ApiError, profile::Profile};
use crate::{
    agent::{UserTurn, history::HistoryItem},
    protocol::{
        ChatRequest, Role, Trigger, UiMessage, UiPart,
        envelope::{ReadError, ReadLimits},
    },
    transport::state::AppState,
};

/// The longest chat id accepted.
pub const MAX_CHAT_ID: usize = 200;

/// Bodies from this size on are read on a blocking thread ([`off_thread`]).
const LARGE: usize = 256 * 1024;

/// How much of a request's messages this server reads, on every route: at most
/// `COUNTERSIGN_MAX_MESSAGES` of them, and of those only the last and, for a new turn, the ones
/// a new chat may adopt as context ([`super::context::MAX_MESSAGES`]).
pub fn read_limits(state: &AppState) -> ReadLimits {
    ReadLimits {
        max_messages: state.edge_settings.max_messages,
        earlier: super::context::MAX_MESSAGES,
    }
}

/// A request with more messages than this server reads (413 `too_many_messages`).
pub fn too_many_messages(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_many_messages",
        format!(
            "the request carries more than {max} messages, the most this server reads \
             (COUNTERSIGN_MAX_MESSAGES); the server keeps the conversation, so send the new \
             message (and, to start a chat, the few before it)"
        ),
    )
}

/// [`ReadError`] as the route's answer: `invalid` says what a body that is not JSON of the
/// right shape is.
pub fn read_error(e: ReadError, invalid: impl FnOnce(serde_json::Error) -> ApiError) -> ApiError {
    match e {
        ReadError::TooManyMessages { max } => too_many_messages(max),
        ReadError::Json(e) => invalid(e),
    }
}

/// A request's body, whole, in one buffer of its declared size: at most `limit` bytes (else 413
/// `body_too_large`), 408 `body_too_slow` when it trickles in (the edge's pace), 400 when it
/// breaks off. (Gathered frame by frame and then copied into one buffer, as a body extractor
/// does, a large body would be held twice at once.)
pub async fn read_body(
    body: axum::body::Body,
    limit: usize,
) -> Result<axum::body::Bytes, ApiError> {
    use futures::StreamExt;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than the {limit} bytes this route accepts"),
        )
    };
    let declared = http_body::Body::size_hint(&body).exact();
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut buffer = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    let mut data = body.into_data_stream();
    while let Some(chunk) = data.next().await {
        let chunk = chunk.map_err(|e| {
            let status = if super::edge::connections::is_too_slow(&e) {
                StatusCode::REQUEST_TIMEOUT
            } else {
                StatusCode::BAD_REQUEST
            };
            ApiError::from_body_rejection(status, &e)
        })?;
        if buffer.len() + chunk.len() > limit {
            return Err(too_large());
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer.into())
}

/// `read(input)`, on a blocking thread when the input is large (`size` bytes): decoding a body
/// of megabytes takes milliseconds of CPU, which the few worker threads that answer everyone
/// else (`/healthz` too) must not spend.
pub async fn off_thread<I, T>(
    input: I,
    size: usize,
    read: impl FnOnce(I) -> T + Send + 'static,
) -> Result<T, ApiError>
where
    I: Send + 'static,
    T: Send + 'static,
{
    if size < LARGE {
        return Ok(read(input));
    }
    tokio::task::spawn_blocking(move || read(input))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "reading a request failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the request could not be read; try again",
            )
        })
}

/// What a chat request asks.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatCommand {
    /// A new turn with the person's message, and the client's earlier messages as context
    /// (only text; adopted only if the chat is new: `Runtime::start_turn_with_context`).
    Start {
        chat_id: String,
        user: UserTurn,
        context: Vec<HistoryItem>,
    },
    /// Answers for the chat's waiting turn, in `message` (the client's copy of the assistant
    /// message, or the seed's message carrying them): read against the session by
    /// `answers::extract`, which trusts only what the person alone can say.
    Answer { chat_id: String, message: UiMessage },
}

impl ChatCommand {
    /// Decodes `request`, which a client of `profile` sent.
    pub fn decode(request: ChatRequest, profile: &Profile) -> Result<Self, ApiError> {
        let transport = profile.transport;
        let chat_id = request.id.trim().to_owned();
        if chat_id.is_empty() {
            return Err(ApiError::bad_request(
                "missing_chat_id",
                "the request has no chat `id`",
            ));
        }
        if chat_id.chars().count() > MAX_CHAT_ID {
            return Err(ApiError::bad_request(
                "invalid_chat_id",
                format!("the chat id is longer than {MAX_CHAT_ID} characters"),
            ));
        }
        let mut messages = request.messages;
        let Some(last) = messages.pop() else {
            return Err(ApiError::bad_request(
                "empty_messages",
                "the request has no messages",
            ));
        };
        if is_answer(&last) {
            return Ok(ChatCommand::Answer {
                chat_id,
                message: last,
            });
        }
        if last.role != Role::User {
            return Err(ApiError::bad_request(
                "invalid_last_message",
                "the last message must be the person's new message or the assistant message with their answers",
            ));
        }
        if request.trigger == Some(Trigger::RegenerateMessage) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "regenerate_unsupported",
                "regenerating an answer is not supported; send the message again instead",
            ));
        }
        let (text, attachments) = user_content(&last);
        Ok(ChatCommand::Start {
            chat_id,
            user: UserTurn {
                message_id: (!last.id.is_empty()).then(|| last.id.clone()),
                text,
                attachments,
                transport,
                ask_again: ask_again(&last)?,
            },
            context: earlier_context(&messages),
        })
    }

    pub fn chat_id(&self) -> &str {
        match self {
            ChatCommand::Start { chat_id, .. } | ChatCommand::Answer { chat_id, .. } => chat_id,
        }
    }
}

/// The call a user message asks to be asked again (Countersign's
/// `metadata.countersign.askAgain`), if it names one.
fn ask_again(message: &UiMessage) -> Result<Option<String>, ApiError> {
    let Some(value) = message.ask_again() else {
        return Ok(None);
    };
    match value.as_str().map(str::trim) {
        Some(id) if !id.is_empty() && id.len() <= 200 => Ok(Some(id.to_owned())),
        _ => Err(ApiError::bad_request(
            "invalid_ask_again",
            "metadata.countersign.askAgain must be the id of a call of this chat",
        )),
    }
}

/// The text and attachments of a user message.
pub fn user_content(message: &UiMessage) -> (String, Vec<crate::agent::history::Attachment>) {
    let mut text = String::new();
    let mut attachments = Vec::new();
    for part in &message.parts {
        match part {
            UiPart::Text(t) => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&t.text);
            }
            UiPart::File(f) => attachments.push(crate::agent::history::Attachment {
                media_type: f.media_type.clone(),
                url: f.url.clone(),
                filename: f.filename.clone(),
            }),
            _ => {}
        }
    }
    (text, attachments)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        agent::Transport,
        transport::{profile::ai_sdk, seed},
    };

    fn request(value: serde_json::Value) -> ChatRequest {
        serde_json::from_value(value).unwrap()
    }

    fn user(text: &str) -> serde_json::Value {
        json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]})
    }

    #[test]
    fn a_new_message_starts_a_turn_and_every_bad_request_says_why() {
        let started = ChatCommand::decode(
            request(json!({"id": " c1 ", "messages": [user("hi")]})),
            &ai_sdk(Transport::Sse),
        )
        .unwrap();
        assert_eq!(
            started,
            ChatCommand::Start {
                chat_id: "c1".into(),
                user: UserTurn {
                    message_id: Some("u1".into()),
                    text: "hi".into(),
                    attachments: vec![],
                    transport: Transport::Sse,
                    ask_again: None,
                },
                context: vec![],
            }
        );
        for (body, code) in [
            (
                json!({"id": "", "messages": [user("hi")]}),
                "missing_chat_id",
            ),
            (
                json!({"id": "  ", "messages": [user("hi")]}),
                "missing_chat_id",
            ),
            (
                json!({"id": "x".repeat(201), "messages": [user("hi")]}),
                "invalid_chat_id",
            ),
            (json!({"id": "c", "messages": []}), "empty_messages"),
            (
                json!({"id": "c", "messages": [{"id": "s", "role": "system", "parts": []}]}),
                "invalid_last_message",
            ),
            (
                json!({"id": "c", "trigger": "regenerate-message", "messages": [user("again")]}),
                "regenerate_unsupported",
            ),
        ] {
            for profile in [
                ai_sdk(Transport::Sse),
                ai_sdk(Transport::Bidi),
                seed::stream(),
            ] {
                let transport = profile.transport;
                let err = ChatCommand::decode(request(body.clone()), &profile).unwrap_err();
                assert_eq!(err.code, code, "{body} on {transport}");
            }
        }
        // 200 characters (not bytes) is still fine.
        let id = "é".repeat(200);
        assert!(
            ChatCommand::decode(
                request(json!({"id": id, "messages": [user("hi")]})),
                &ai_sdk(Transport::Bidi)
            )
            .is_ok()
        );
    }

    #[test]
    fn earlier_messages_come_along_as_context_and_only_as_text() {
        let earlier = json!({"id": "a0", "role": "assistant", "parts": [
            {"type": "text", "text": "Hello!"},
            {"type": "tool-process_payment", "toolCallId": "c", "state": "approval-requested",
             "input": {"amount": 900}, "approval": {"id": "apv-9"}}]});
        for profile in [
            ai_sdk(Transport::Sse),
            ai_sdk(Transport::Bidi),
            seed::stream(),
        ] {
            let command = ChatCommand::decode(
                request(json!({"id": "c", "messages": [user("hi"), earlier.clone(), user("pay")]})),
                &profile,
            )
            .unwrap();
            let ChatCommand::Start { user, context, .. } = command else {
                panic!("{command:?}");
            };
            assert_eq!(user.text, "pay");
            assert_eq!(
                context,
                crate::agent::history::context_items([
                    (crate::agent::history::ContextRole::User, "hi".to_owned()),
                    (
                        crate::agent::history::ContextRole::Assistant,
                        "Hello!".to_owned()
                    ),
                ])
            );
        }
    }

    #[test]
    fn an_assistant_message_with_answers_answers() {
        let answer = json!({"id": "m1", "role": "assistant", "parts": [{
            "type": "tool-process_payment", "toolCallId": "call-1", "state": "approval-responded",
            "input": {}, "approval": {"id": "apv-1", "approved": true}}]});
        match ChatCommand::decode(
            request(json!({"id": "c", "messages": [user("pay"), answer]})),
            &ai_sdk(Transport::Sse),
        )
        .unwrap()
        {
            ChatCommand::Answer { chat_id, message } => {
                assert_eq!(chat_id, "c");
                assert_eq!(message.id, "m1");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn user_content_joins_text_and_collects_files() {
        let mut m = UiMessage::user_text("u", "hello");
        m.parts
            .push(UiPart::File(crate::protocol::message::FilePart {
                media_type: "image/png".into(),
                url: "data:image/png;base64,AAAA".into(),
                filename: Some("a.png".into()),
                provider_metadata: None,
            }));
        let (text, files) = user_content(&m);
        assert_eq!(text, "hello");
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].media_type, "image/png");
    }
}
