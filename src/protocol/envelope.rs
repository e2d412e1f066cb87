//! Requests from the browser: the SSE `POST` body and the WebSocket frames.
//!
//! * [`ChatRequest`] is the body `useChat`'s `HttpChatTransport` posts to the
//!   chat endpoint (protocols.md §A.5): `{id, messages, trigger, messageId?}`
//!   plus whatever extra `body` fields the app configured, which are ignored.
//! * [`ClientFrame`] is one JSON text frame of the bidirectional WebSocket
//!   mode, the flat envelopes of the seed system (seed-system.md §2.2):
//!   `{"type": "message" | "tool_result" | ..., ...}`. Extra keys such as
//!   `version` and `timestamp` are tolerated.
//! * [`ServerControl`] are the server's non-chunk frames on that socket.
//!
//! Envelope `type`s are snake_case, unlike chunk types (kebab-case), because
//! that is what the seed clients send.

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

use super::json_util::{TagError, split_tagged};
use super::message::UiMessage;

/// Why the client asked for a response (`trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// A new user message, or an automatic send after approvals/tool outputs
    /// (then the last message is the assistant message being continued).
    SubmitMessage,
    /// Regenerate the assistant message `messageId` (or the last one).
    RegenerateMessage,
}

/// The JSON body of a chat `POST` (`HttpChatTransport`, §A.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    /// The chat id.
    pub id: String,
    /// The *full* history, the last message being the new user message or
    /// the assistant message that carries approval answers / tool outputs.
    pub messages: Vec<UiMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// Absent on a plain send; the edited or regenerated message's id, or the
    /// last message's id on automatic sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

impl ChatRequest {
    /// Decodes a request body; extra keys are ignored.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// [`ChatRequest::from_json`] for a server, which reads the earlier messages only to start a
    /// turn (a new user message last): when the last message is the assistant's (answers to
    /// approvals, tool outputs), the earlier ones are checked to be JSON but not decoded — a
    /// client sends the whole conversation with every answer, attachments included, and a
    /// 1 MiB image must not be decoded again at each approval.
    pub fn from_slice_for_server(body: &[u8]) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Lean<'a> {
            id: String,
            #[serde(borrow)]
            messages: Vec<&'a serde_json::value::RawValue>,
            #[serde(default)]
            trigger: Option<Trigger>,
            #[serde(default)]
            message_id: Option<String>,
        }
        let lean: Lean<'_> = serde_json::from_slice(body)?;
        let mut messages = Vec::new();
        if let Some((last, earlier)) = lean.messages.split_last() {
            let last: UiMessage = serde_json::from_str(last.get())?;
            if last.role == super::message::Role::User {
                messages = earlier
                    .iter()
                    .map(|m| serde_json::from_str(m.get()))
                    .collect::<Result<_, _>>()?;
            }
            messages.push(last);
        }
        Ok(ChatRequest {
            id: lean.id,
            messages,
            trigger: lean.trigger,
            message_id: lean.message_id,
        })
    }
}

/// `audio_control.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioAction {
    Start,
    Stop,
}

/// One client → server WebSocket frame (seed-system.md §2.2).
///
/// Decode with [`ClientFrame::from_json`] or [`ClientFrame::from_value`] to
/// get a typed [`EnvelopeError`] (an unknown `type` is named, not a generic
/// serde message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    /// A chat request over the socket: the same fields as [`ChatRequest`].
    Message {
        /// The chat id.
        id: String,
        messages: Vec<UiMessage>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trigger: Option<Trigger>,
        #[serde(rename = "messageId", default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// The result of a tool the browser executed.
    ToolResult {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        result: Value,
    },
    /// Stop the current response (`user_abort`, `timeout`, `error`, ...).
    Interrupt {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Keep-alive; answered with [`ServerControl::Pong`] echoing `timestamp`
    /// (kept as a JSON number so the echo is byte-identical).
    Ping {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timestamp: Option<Number>,
    },
    /// Base64 PCM16 microphone audio.
    AudioChunk {
        chunk: String,
        #[serde(
            rename = "sampleRate",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        sample_rate: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channels: Option<u16>,
        #[serde(rename = "bitDepth", default, skip_serializing_if = "Option::is_none")]
        bit_depth: Option<u16>,
    },
    /// Start/stop of a recording.
    AudioControl { action: AudioAction },
    /// Reattach to chat `id`'s running stream after `received` chunks (ours,
    /// not the seed's: the WebSocket counterpart of §A.8's reconnect GET).
    Resume { id: String, received: u64 },
}

/// The `type`s [`ClientFrame`] knows.
const CLIENT_FRAME_TYPES: [&str; 7] = [
    "message",
    "tool_result",
    "interrupt",
    "ping",
    "audio_chunk",
    "audio_control",
    "resume",
];

/// Why a WebSocket frame could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("frame is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("frame is not a JSON object")]
    NotAnObject,
    #[error("frame has no string `type`")]
    MissingType,
    /// A `type` this server does not handle; the caller may log and ignore it
    /// (the seed server does) or close the socket.
    #[error("unknown frame type `{type_name}`")]
    UnknownType { type_name: String },
    #[error("invalid `{frame_type}` frame: {source}")]
    InvalidFields {
        frame_type: String,
        #[source]
        source: serde_json::Error,
    },
}

impl From<TagError> for EnvelopeError {
    fn from(error: TagError) -> Self {
        match error {
            TagError::NotAnObject => Self::NotAnObject,
            TagError::MissingType => Self::MissingType,
        }
    }
}

impl ClientFrame {
    /// Decodes one WebSocket text frame.
    pub fn from_json(text: &str) -> Result<Self, EnvelopeError> {
        let value: Value = serde_json::from_str(text).map_err(EnvelopeError::Json)?;
        Self::from_value(value)
    }

    /// Decodes one frame from a JSON value.
    pub fn from_value(value: Value) -> Result<Self, EnvelopeError> {
        let (frame_type, map) = split_tagged(value)?;
        if !CLIENT_FRAME_TYPES.contains(&frame_type.as_str()) {
            return Err(EnvelopeError::UnknownType {
                type_name: frame_type,
            });
        }
        serde_json::from_value(Value::Object(map))
            .map_err(|source| EnvelopeError::InvalidFields { frame_type, source })
    }

    /// The chat request carried by a `message` frame.
    pub fn into_chat_request(self) -> Option<ChatRequest> {
        match self {
            Self::Message {
                id,
                messages,
                trigger,
                message_id,
            } => Some(ChatRequest {
                id,
                messages,
                trigger,
                message_id,
            }),
            _ => None,
        }
    }
}

/// Server → client frames on the WebSocket that are not UI message chunks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerControl {
    /// The answer to [`ClientFrame::Ping`], echoing its timestamp.
    Pong {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timestamp: Option<Number>,
    },
}

impl ServerControl {
    /// JSON text of the frame.
    pub fn to_json(&self) -> String {
        super::chunk::to_json_infallible(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_request_matches_the_ai_sdk_body() {
        let body = r#"{
            "id": "chat-7",
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Pay Rin 25 EUR"}]},
                {"id": "a1", "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "tool-transfer_funds", "toolCallId": "c1", "state": "approval-responded",
                     "input": {"amount": 25}, "approval": {"id": "ap1", "approved": true}}
                ]}
            ],
            "trigger": "submit-message",
            "messageId": "a1",
            "extraBodyField": {"anything": true}
        }"#;
        let request = ChatRequest::from_json(body).unwrap();
        assert_eq!(request.id, "chat-7");
        assert_eq!(request.trigger, Some(Trigger::SubmitMessage));
        assert_eq!(request.message_id.as_deref(), Some("a1"));
        assert_eq!(request.messages.len(), 2);
        let mut expected: Value = serde_json::from_str(body).unwrap();
        expected.as_object_mut().unwrap().remove("extraBodyField");
        assert_eq!(serde_json::to_value(&request).unwrap(), expected);

        // `sendMessage(newMessage)`: messageId is undefined, so the key is absent.
        let minimal =
            ChatRequest::from_json(r#"{"id":"c","messages":[],"trigger":"regenerate-message"}"#)
                .unwrap();
        assert_eq!(minimal.message_id, None);
        assert_eq!(minimal.trigger, Some(Trigger::RegenerateMessage));
        assert!(ChatRequest::from_json(r#"{"id":"c","messages":[],"trigger":"resume"}"#).is_err());
    }

    #[test]
    fn a_server_decodes_earlier_messages_only_for_a_new_user_message() {
        let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]});
        let assistant = json!({"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}]});
        // Answers: the earlier messages are JSON but need not be messages the server reads.
        let answers = json!({"id": "c", "messages": [{"role": 7}, assistant.clone()],
                             "trigger": "submit-message", "messageId": "a1"});
        let request = ChatRequest::from_slice_for_server(answers.to_string().as_bytes()).unwrap();
        assert_eq!(request.messages.len(), 1);
        assert_eq!(request.message_id.as_deref(), Some("a1"));
        // A new message: every message is decoded, as from_json does.
        let turn = json!({"id": "c", "messages": [user.clone(), assistant, user]});
        let request = ChatRequest::from_slice_for_server(turn.to_string().as_bytes()).unwrap();
        assert_eq!(request, ChatRequest::from_json(&turn.to_string()).unwrap());
        let bad =
            json!({"id": "c", "messages": [{"role": 7}, {"id": "u", "role": "user", "parts": []}]});
        assert!(ChatRequest::from_slice_for_server(bad.to_string().as_bytes()).is_err());
        assert!(ChatRequest::from_slice_for_server(b"{\"id\":\"c\",\"messages\":[{]}").is_err());
        let empty = ChatRequest::from_slice_for_server(br#"{"id":"c","messages":[]}"#).unwrap();
        assert!(empty.messages.is_empty());
    }

    #[test]
    fn every_client_frame_decodes_with_extra_keys_tolerated() {
        let cases = [
            (
                json!({"type": "message", "version": "1.0", "timestamp": 1, "id": "chat", "messages": [], "trigger": "submit-message", "messageId": "m"}),
                ClientFrame::Message {
                    id: "chat".into(),
                    messages: vec![],
                    trigger: Some(Trigger::SubmitMessage),
                    message_id: Some("m".into()),
                },
            ),
            (
                json!({"type": "tool_result", "version": "1.0", "toolCallId": "geo-1", "result": {"lat": 59.9}}),
                ClientFrame::ToolResult {
                    tool_call_id: "geo-1".into(),
                    result: json!({"lat": 59.9}),
                },
            ),
            (
                json!({"type": "interrupt", "reason": "user_abort"}),
                ClientFrame::Interrupt {
                    reason: Some("user_abort".into()),
                },
            ),
            (
                json!({"type": "interrupt"}),
                ClientFrame::Interrupt { reason: None },
            ),
            (
                json!({"type": "ping", "version": "1.0", "timestamp": 1_700_000_000_123_u64}),
                ClientFrame::Ping {
                    timestamp: Some(1_700_000_000_123_u64.into()),
                },
            ),
            (
                json!({"type": "audio_chunk", "chunk": "AAAA", "sampleRate": 16000, "channels": 1, "bitDepth": 16}),
                ClientFrame::AudioChunk {
                    chunk: "AAAA".into(),
                    sample_rate: Some(16000),
                    channels: Some(1),
                    bit_depth: Some(16),
                },
            ),
            (
                json!({"type": "audio_control", "action": "stop"}),
                ClientFrame::AudioControl {
                    action: AudioAction::Stop,
                },
            ),
            (
                json!({"type": "resume", "id": "chat", "received": 42}),
                ClientFrame::Resume {
                    id: "chat".into(),
                    received: 42,
                },
            ),
        ];
        for (wire, expected) in cases {
            assert_eq!(
                ClientFrame::from_value(wire.clone()).unwrap(),
                expected,
                "{wire}"
            );
            // Re-encoding drops only the tolerated extras.
            let mut trimmed = wire.clone();
            let map = trimmed.as_object_mut().unwrap();
            map.remove("version");
            if !matches!(expected, ClientFrame::Ping { .. }) {
                map.remove("timestamp");
            }
            assert_eq!(serde_json::to_value(&expected).unwrap(), trimmed);
        }
    }

    #[test]
    fn a_message_frame_is_a_chat_request() {
        let frame = ClientFrame::from_json(
            r#"{"type":"message","id":"c","messages":[{"id":"u","role":"user","parts":[]}]}"#,
        )
        .unwrap();
        let request = frame.into_chat_request().unwrap();
        assert_eq!(
            (request.id.as_str(), request.messages.len(), request.trigger),
            ("c", 1, None)
        );
        assert!(
            ClientFrame::Interrupt { reason: None }
                .into_chat_request()
                .is_none()
        );
    }

    #[test]
    fn bad_frames_are_typed_errors() {
        match ClientFrame::from_json(r#"{"type":"subscribe","topic":"x"}"#) {
            Err(EnvelopeError::UnknownType { type_name }) => assert_eq!(type_name, "subscribe"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            ClientFrame::from_json("not json"),
            Err(EnvelopeError::Json(_))
        ));
        assert!(matches!(
            ClientFrame::from_json("[1]"),
            Err(EnvelopeError::NotAnObject)
        ));
        assert!(matches!(
            ClientFrame::from_json(r#"{"toolCallId":"x"}"#),
            Err(EnvelopeError::MissingType)
        ));
        match ClientFrame::from_json(r#"{"type":"tool_result","toolCallId":"x"}"#) {
            Err(EnvelopeError::InvalidFields { frame_type, .. }) => {
                assert_eq!(frame_type, "tool_result")
            }
            other => panic!("{other:?}"),
        }
        assert!(ClientFrame::from_json(r#"{"type":"audio_control","action":"pause"}"#).is_err());
        assert!(ClientFrame::from_json(r#"{"type":"resume","id":"c","received":-1}"#).is_err());
        assert!(ClientFrame::from_json(r#"{"type":"message","id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"tool-x"}]}]}"#).is_err());
    }

    #[test]
    fn pong_echoes_the_timestamp_exactly() {
        let Ok(ClientFrame::Ping { timestamp }) =
            ClientFrame::from_json(r#"{"type":"ping","timestamp":1700000000123}"#)
        else {
            panic!("not a ping");
        };
        assert_eq!(
            ServerControl::Pong { timestamp }.to_json(),
            r#"{"type":"pong","timestamp":1700000000123}"#
        );
        let Ok(ClientFrame::Ping { timestamp }) =
            ClientFrame::from_json(r#"{"type":"ping","timestamp":12.5}"#)
        else {
            panic!("not a ping");
        };
        assert_eq!(
            ServerControl::Pong { timestamp }.to_json(),
            r#"{"type":"pong","timestamp":12.5}"#
        );
    }
}
