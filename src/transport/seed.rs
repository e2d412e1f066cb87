//! The original system's dialect, in one place: its client profiles ([`stream`] for
//! `POST /stream`, [`live`] for `/live`: ADR 0019, ADR 0031), its request envelope (`content`
//! strings, ADK confirmation parts, `tool-result` parts), its looser WebSocket `message` frames,
//! and its `tool_result` frames (a browser tool's output, or a confirmation addressed to an
//! approval id). Each is turned into what the rest of the server speaks; what it is sent back is
//! `protocol::seed`'s encoder, which [`Frames`] puts behind the profile's [`Encoder`].

use serde_json::{Value, json, value::RawValue};

use super::{
    context::MAX_MESSAGES,
    error::ApiError,
    profile::{Encoder, Out, OwnAnswer, Profile, SocketManners},
    request::read_error,
};
use crate::{
    agent::{ApprovalDecision, PersonInput, Transport, TurnEntry, TurnLog},
    protocol::{
        ChatRequest, Chunk, Dialect, Role, ToolPart, UiMessage, UiPart,
        envelope::{ReadLimits, latest_messages},
        message::TextPart,
        seed::{Entry, SeedEncoder, SeedTransport},
    },
};

/// The seed's frontend on `POST /stream`: its envelope; its stream (ADR 0019: no step markers,
/// approval requests at the end of a response that closes with `finish{stop}` and `[DONE]`,
/// the pause's `finish` reporting the usage so far, the seed's denial texts, Python-style
/// JSON); text timing from `COUNTERSIGN_TEXT_TIMING`; it runs browser calls by itself and never
/// reports them (`Transport::Seed`).
pub fn stream() -> Profile {
    Profile {
        transport: Transport::Seed,
        keys: Dialect::V6Strict,
        keys_by_client: false,
        timing: None,
        decode: request,
        encoder: |_| Box::new(Frames(SeedEncoder::new(SeedTransport::Sse))),
        own_answer,
        // No socket on this route.
        frame: |frame, _| frame,
        socket: SocketManners::default(),
    }
}

/// The seed's frontend on `/live`: one stream per user turn with one `[DONE]` at its end,
/// approval requests in their own step group at the pause; its backend closes the socket on
/// JSON it cannot parse and ignores frames it does not understand; its looser `message` frames
/// are made ours ([`normalise_frame`]); its `audio_chunk` and `audio_control` frames are voice
/// like ours (ADR 0035).
pub fn live() -> Profile {
    Profile {
        transport: Transport::Bidi,
        encoder: |_| Box::new(Frames(SeedEncoder::new(SeedTransport::Bidi))),
        frame: |frame, on| normalise_frame(frame, on.chat, || format!("live-{}", on.connection)),
        socket: SocketManners {
            close_on_bad_json: true,
            ignore_unknown_frames: true,
        },
        ..stream()
    }
}

/// The tool name of the seed system's confirmation parts.
const ADK_CONFIRMATION: &str = "adk_request_confirmation";

/// The seed's own answer parts: its confirmation ([`adk_confirmation`]).
fn own_answer(tool: &ToolPart) -> Option<OwnAnswer> {
    (tool.tool_name == ADK_CONFIRMATION).then(|| adk_confirmation(tool))
}

/// The seed system's confirmation part: `tool-adk_request_confirmation` answered in
/// `approval.approved` (AI SDK style) or `output.confirmed` (ADK function response style).
fn adk_confirmation(tool: &ToolPart) -> Option<PersonInput> {
    let approval_id = tool
        .approval
        .as_ref()
        .map(|a| a.id.clone())
        .unwrap_or_else(|| tool.tool_call_id.clone());
    let confirmed = tool
        .approval
        .as_ref()
        .and_then(|a| a.approved)
        .or_else(|| {
            tool.output
                .as_ref()
                .and_then(|o| o.get("confirmed"))
                .and_then(Value::as_bool)
        })?;
    let decision = if confirmed {
        ApprovalDecision::Approve
    } else {
        ApprovalDecision::Deny {
            reason: tool.approval.as_ref().and_then(|a| a.reason.clone()),
        }
    };
    Some(PersonInput::Approval {
        approval_id,
        decision,
        step_up: None,
    })
}

/// The seed's encoder ([`SeedEncoder`]) as a profile's [`Encoder`]: whole frames, its own
/// pause `finish` (on `POST /stream`) and `[DONE]`.
pub struct Frames(pub SeedEncoder);

impl Frames {
    fn frames(frames: Vec<String>) -> Vec<Out> {
        frames.into_iter().map(Out::Frame).collect()
    }
}

impl Encoder for Frames {
    fn prime(&mut self, log: &TurnLog, upto: usize) {
        for entry in log.entries_from(0).iter().take(upto) {
            self.0.prime(match entry {
                TurnEntry::Chunk(chunk) => Entry::Chunk(chunk),
                TurnEntry::Pause => Entry::Pause(None),
                TurnEntry::End => Entry::End,
            });
        }
    }

    fn passed_pause(&mut self) {
        self.0.prime(Entry::Pause(None));
    }

    fn chunk(&mut self, chunk: &Chunk) -> Vec<Out> {
        Self::frames(self.0.push(Entry::Chunk(chunk)))
    }

    fn pause(&mut self, metadata: Option<&Value>) -> Vec<Out> {
        Self::frames(self.0.push(Entry::Pause(metadata)))
    }

    fn end(&mut self) -> Vec<Out> {
        Self::frames(self.0.push(Entry::End))
    }

    fn closes_itself(&self) -> bool {
        true
    }

    fn reports_usage_at_pause(&self) -> bool {
        self.0.transport() == SeedTransport::Sse
    }

    /// The seed's client knows no such error: the response just ends.
    fn signed_out(&mut self, _why: &str) -> Vec<Out> {
        Vec::new()
    }
}

/// Converts the seed system's request body into a [`ChatRequest`]. The last message is what the
/// request says (a new message, or answers); of the earlier ones only the latest
/// [`MAX_MESSAGES`] are read, as far as they read ([`earlier_message`]), for what a new chat may
/// adopt as context (`transport::context`). Like every chat request, it is read without building
/// the rest (`protocol::envelope::latest_messages`) and may carry at most `limits.max_messages`.
pub fn request(body: &[u8], limits: ReadLimits) -> Result<ChatRequest, ApiError> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
        #[serde(borrow, default, rename = "chatId")]
        chat_id: Option<&'a RawValue>,
        #[serde(borrow, default)]
        messages: Option<&'a RawValue>,
    }
    let not_json = |e: serde_json::Error| {
        ApiError::bad_request("invalid_json", format!("the body is not JSON: {e}"))
    };
    let envelope: Envelope<'_> = serde_json::from_slice(body).map_err(not_json)?;
    let no_messages = || ApiError::bad_request("empty_messages", "the request has no messages");
    let messages = envelope
        .messages
        .filter(|m| m.get().trim_start().starts_with('['))
        .ok_or_else(no_messages)?;
    let latest = latest_messages(messages, MAX_MESSAGES + 1, limits.max_messages)
        .map_err(|e| read_error(e, not_json))?;
    let values: Vec<Value> = latest
        .iter()
        .map(|m| serde_json::from_str(m.get()))
        .collect::<Result<_, _>>()
        .map_err(not_json)?;
    let (last, earlier) = values.split_last().ok_or_else(no_messages)?;
    let chat_id = envelope
        .id
        .or(envelope.chat_id)
        .and_then(|id| serde_json::from_str::<String>(id.get()).ok())
        .unwrap_or_else(|| "seed-default".to_owned());
    let mut messages: Vec<UiMessage> = earlier.iter().map(earlier_message).collect();
    messages.push(message(last)?);
    Ok(ChatRequest {
        id: chat_id,
        messages,
        trigger: None,
        message_id: None,
    })
}

/// Normalises one seed message into a [`UiMessage`].
pub fn message(value: &Value) -> Result<UiMessage, ApiError> {
    let role = match value.get("role").and_then(Value::as_str) {
        Some("assistant") => "assistant",
        Some("system") => "system",
        _ => "user",
    };
    let mut parts = Vec::new();
    if let Some(text) = value.get("content").and_then(Value::as_str) {
        parts.push(json!({"type": "text", "text": text}));
    }
    for part in value
        .get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "text" => parts.push(part.clone()),
            "tool-result" => parts.push(json!({
                "type": "tool-browser_result",
                "toolCallId": part.get("toolCallId").cloned().unwrap_or(Value::Null),
                "state": "output-available",
                "output": part.get("result").cloned().unwrap_or(Value::Null),
            })),
            "image" => {
                let media = part
                    .get("media_type")
                    .and_then(Value::as_str)
                    .unwrap_or("image/png");
                let data = part.get("data").and_then(Value::as_str).unwrap_or_default();
                parts.push(json!({"type": "file", "mediaType": media, "url": format!("data:{media};base64,{data}")}));
            }
            k if k.starts_with("tool-") && part.get("toolCallId").is_some() => {
                let mut part = part.clone();
                if part.get("state").and_then(Value::as_str) == Some("call") {
                    continue;
                }
                if let Some(obj) = part.as_object_mut() {
                    obj.entry("state").or_insert(json!("approval-responded"));
                }
                parts.push(part);
            }
            // Step markers and anything else: ignored, as the seed backend does.
            _ => {}
        }
    }
    let message = json!({"id": "", "role": role, "parts": parts});
    serde_json::from_value(message).map_err(|e| {
        ApiError::bad_request(
            "invalid_message",
            format!("the last message cannot be read: {e}"),
        )
    })
}

/// Normalises one of the messages before the last: `content` becomes a text part, and the
/// parts that read as AI SDK parts are kept; the rest (the seed's `tool-result` and state-`call`
/// parts, broken parts) are left out, never turned into answers as in the last message. What
/// of it is context is `transport::context`'s to say.
pub fn earlier_message(value: &Value) -> UiMessage {
    let role = match value.get("role").and_then(Value::as_str) {
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        _ => Role::User,
    };
    let id = value.get("id").and_then(Value::as_str).unwrap_or_default();
    let mut message = UiMessage::new(id, role);
    if let Some(text) = value.get("content").and_then(Value::as_str) {
        message.parts.push(UiPart::Text(TextPart {
            text: text.to_owned(),
            ..TextPart::default()
        }));
    }
    message.parts.extend(
        value
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|part| UiPart::from_value(part.clone()).ok()),
    );
    message
}

/// Accepts the seed system's looser `message` frames: no chat id (`chat`, the socket's, when it
/// has one, else `fallback`), and messages with `content` strings or seed-only parts.
pub fn normalise_frame(
    mut value: Value,
    chat: Option<&str>,
    fallback: impl FnOnce() -> String,
) -> Value {
    if value.get("type").and_then(Value::as_str) != Some("message") {
        return value;
    }
    if let Some(obj) = value.as_object_mut() {
        if obj.get("id").and_then(Value::as_str).is_none() {
            let id = chat.map(str::to_owned).unwrap_or_else(fallback);
            obj.insert("id".into(), json!(id));
        }
        if let Some(Value::Array(messages)) = obj.get_mut("messages") {
            let last = messages.len().saturating_sub(1);
            for (index, entry) in messages.iter_mut().enumerate() {
                if serde_json::from_value::<UiMessage>(entry.clone()).is_ok() {
                    continue;
                }
                let normalised = if index == last {
                    message(entry).ok()
                } else {
                    Some(earlier_message(entry))
                };
                if let Some(v) = normalised.and_then(|m| serde_json::to_value(m).ok()) {
                    *entry = v;
                }
            }
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ReadLimits = ReadLimits {
        max_messages: 10,
        earlier: MAX_MESSAGES,
    };

    /// [`request`] of `body` as JSON text.
    fn read(body: &Value) -> Result<ChatRequest, ApiError> {
        request(body.to_string().as_bytes(), LIMITS)
    }
    use crate::transport::answers::is_answer;

    #[test]
    fn seed_messages_are_normalised() {
        let text = message(&json!({"role": "user", "content": "東京の天気を教えて"})).unwrap();
        assert_eq!(text.text(), "東京の天気を教えて");

        let answers = message(&json!({"role": "user", "parts": [
            {"type": "tool-adk_request_confirmation", "toolCallId": "apv-1", "toolName": "adk_request_confirmation",
             "state": "approval-responded", "approval": {"id": "apv-1", "approved": true}},
            {"type": "tool-result", "toolCallId": "call-1", "result": {"latitude": 1}},
            {"type": "step-start"}
        ]}))
        .unwrap();
        assert_eq!(answers.parts.len(), 2);
        assert!(is_answer(&answers));
    }

    /// The seed's earlier messages come along as they read, never as answers: its `call`
    /// parts and `tool-result` parts are left out, and what is left becomes only text.
    #[test]
    fn earlier_seed_messages_are_kept_as_they_read_and_never_as_answers() {
        use crate::{agent::history::HistoryItem, transport::request::ChatCommand};
        let request = read(&json!({"id": "chat", "messages": [
            {"role": "user", "content": "Pay Bob $5"},
            {"role": "assistant", "parts": [
                {"type": "tool-process_payment", "toolCallId": "c1", "toolName": "process_payment",
                 "state": "call", "input": {"amount": 5}},
                {"type": "text", "text": "Asking you first."}]},
            {"role": "user", "parts": [
                {"type": "tool-result", "toolCallId": "c1", "result": {"paid": true}},
                {"type": "tool-adk_request_confirmation", "toolCallId": "apv-1",
                 "toolName": "adk_request_confirmation", "state": "approval-responded",
                 "approval": {"id": "apv-1", "approved": true}}]},
            {"role": "user", "content": "Thanks"}
        ]}))
        .unwrap();
        assert_eq!(request.messages.len(), 4);
        assert_eq!(
            request.messages[1].parts.len(),
            1,
            "the `call` part does not read"
        );
        assert_eq!(request.messages[2].parts.len(), 1, "nor does `tool-result`");
        let ChatCommand::Start { user, context, .. } =
            ChatCommand::decode(request, &stream()).unwrap()
        else {
            panic!("a new message");
        };
        assert_eq!(user.text, "Thanks");
        let texts: Vec<&str> = context
            .iter()
            .map(|item| match item {
                HistoryItem::Context { text, .. } => text.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts.len(), 2);
        assert!(texts[0].ends_with("Pay Bob $5"));
        assert_eq!(texts[1], "Asking you first.");
    }

    #[test]
    fn seed_requests_need_messages_and_no_more_than_the_cap() {
        assert_eq!(read(&json!({})).unwrap_err().code, "empty_messages");
        assert_eq!(
            read(&json!({"messages": []})).unwrap_err().code,
            "empty_messages"
        );
        assert_eq!(
            read(&json!({"messages": "hi"})).unwrap_err().code,
            "empty_messages"
        );
        assert_eq!(request(b"{", LIMITS).unwrap_err().code, "invalid_json");
        let hi = json!({"role": "user", "content": "hi"});
        let request = read(&json!({"messages": [hi]})).unwrap();
        assert_eq!(request.id, "seed-default");
        let many = read(&json!({"messages": vec![hi; LIMITS.max_messages + 1]})).unwrap_err();
        assert_eq!(
            (many.status.as_u16(), many.code),
            (413, "too_many_messages")
        );
    }
}
