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
use serde_json::{Number, Value, value::RawValue};

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

    /// [`ChatRequest::from_json`] for a server: only the messages a server reads are decoded
    /// ([`read_messages`]). A client sends the whole conversation with every request (the AI
    /// SDK does), attachments included; the server keeps the conversation itself and needs the
    /// last message and, when it starts a turn, the few before it.
    pub fn from_slice_for_server(body: &[u8], limits: ReadLimits) -> Result<Self, ReadError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Lean<'a> {
            id: String,
            #[serde(borrow)]
            messages: &'a RawValue,
            #[serde(default)]
            trigger: Option<Trigger>,
            #[serde(default)]
            message_id: Option<String>,
        }
        let lean: Lean<'_> = serde_json::from_slice(body)?;
        Ok(ChatRequest {
            id: lean.id,
            messages: read_messages(lean.messages, limits)?,
            trigger: lean.trigger,
            message_id: lean.message_id,
        })
    }
}

/// How much of a request's `messages` a server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// The most messages a request may carry: more is refused, and read no further than that.
    pub max_messages: usize,
    /// How many of the messages before the last are decoded when the last is the person's new
    /// message (what a new chat may adopt as context).
    pub earlier: usize,
}

/// Why a chat request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("the request carries more than {max} messages")]
    TooManyMessages { max: usize },
}

/// The last `keep` entries of the JSON array `array`, oldest first, each as its raw JSON: the
/// entries are checked to be JSON but none is decoded, and the whole array costs no more memory
/// than `keep` references. An array of more than `max` entries is
/// [`ReadError::TooManyMessages`].
pub fn latest_messages(
    array: &RawValue,
    keep: usize,
    max: usize,
) -> Result<Vec<&RawValue>, ReadError> {
    use serde::de::{DeserializeSeed, Error, SeqAccess, Visitor};

    struct Latest<'c> {
        keep: usize,
        max: usize,
        over: &'c std::cell::Cell<bool>,
    }

    impl<'de> Visitor<'de> for Latest<'_> {
        type Value = std::collections::VecDeque<&'de RawValue>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of messages")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut kept = std::collections::VecDeque::with_capacity(self.keep.min(64));
            let mut count = 0usize;
            while let Some(entry) = seq.next_element::<&'de RawValue>()? {
                count += 1;
                if count > self.max {
                    self.over.set(true);
                    return Err(A::Error::custom("too many messages"));
                }
                if kept.len() == self.keep {
                    kept.pop_front();
                }
                if self.keep > 0 {
                    kept.push_back(entry);
                }
            }
            Ok(kept)
        }
    }

    impl<'de> DeserializeSeed<'de> for Latest<'_> {
        type Value = std::collections::VecDeque<&'de RawValue>;

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
    }

    let over = std::cell::Cell::new(false);
    let mut reader = serde_json::Deserializer::from_str(array.get());
    let latest = Latest {
        keep,
        max,
        over: &over,
    };
    match latest.deserialize(&mut reader) {
        Ok(kept) => {
            reader.end()?;
            Ok(kept.into())
        }
        Err(_) if over.get() => Err(ReadError::TooManyMessages { max }),
        Err(e) => Err(ReadError::Json(e)),
    }
}

/// The messages of a request's `messages` array that a server reads: the last one and, when it
/// is the person's new message, the `limits.earlier` before it (the context a new chat may
/// adopt, ADR 0020). When the last is the assistant's (answers to approvals, tool outputs), the
/// earlier ones are only checked to be JSON.
pub fn read_messages(array: &RawValue, limits: ReadLimits) -> Result<Vec<UiMessage>, ReadError> {
    let latest = latest_messages(array, limits.earlier + 1, limits.max_messages)?;
    let Some((last, earlier)) = latest.split_last() else {
        return Ok(Vec::new());
    };
    let last: UiMessage = serde_json::from_str(last.get())?;
    let mut messages = Vec::new();
    if last.role == super::message::Role::User {
        messages = earlier
            .iter()
            .map(|m| serde_json::from_str(m.get()))
            .collect::<Result<_, _>>()?;
    }
    messages.push(last);
    Ok(messages)
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

    /// A frame's JSON for a server, still to be normalised and decoded
    /// ([`ClientFrame::from_value`]), read in one pass that builds only what a frame holds:
    /// keys no frame has are skipped, and a `message` frame keeps only the messages a server
    /// reads (the last `limits.earlier + 1`, [`latest_messages`]; more than
    /// `limits.max_messages` is refused). JSON that is not an object reads as `null` (not a
    /// frame).
    pub fn value_for_server(text: &str, limits: ReadLimits) -> Result<Value, ReadError> {
        /// Every key of every client frame, as raw JSON.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Keys<'a> {
            #[serde(rename = "type", borrow, default)]
            kind: Option<&'a RawValue>,
            #[serde(borrow, default)]
            messages: Option<&'a RawValue>,
            #[serde(borrow, default)]
            id: Option<&'a RawValue>,
            #[serde(borrow, default)]
            trigger: Option<&'a RawValue>,
            #[serde(borrow, default)]
            message_id: Option<&'a RawValue>,
            #[serde(borrow, default)]
            tool_call_id: Option<&'a RawValue>,
            #[serde(borrow, default)]
            result: Option<&'a RawValue>,
            #[serde(borrow, default)]
            reason: Option<&'a RawValue>,
            #[serde(borrow, default)]
            timestamp: Option<&'a RawValue>,
            #[serde(borrow, default)]
            chunk: Option<&'a RawValue>,
            #[serde(borrow, default)]
            sample_rate: Option<&'a RawValue>,
            #[serde(borrow, default)]
            channels: Option<&'a RawValue>,
            #[serde(borrow, default)]
            bit_depth: Option<&'a RawValue>,
            #[serde(borrow, default)]
            action: Option<&'a RawValue>,
            #[serde(borrow, default)]
            received: Option<&'a RawValue>,
        }
        if !text.trim_start().starts_with('{') {
            serde_json::from_str::<serde::de::IgnoredAny>(text)?;
            return Ok(Value::Null);
        }
        let keys: Keys<'_> = serde_json::from_str(text)?;
        let mut frame = serde_json::Map::new();
        for (name, raw) in [
            ("type", keys.kind),
            ("id", keys.id),
            ("trigger", keys.trigger),
            ("messageId", keys.message_id),
            ("toolCallId", keys.tool_call_id),
            ("result", keys.result),
            ("reason", keys.reason),
            ("timestamp", keys.timestamp),
            ("chunk", keys.chunk),
            ("sampleRate", keys.sample_rate),
            ("channels", keys.channels),
            ("bitDepth", keys.bit_depth),
            ("action", keys.action),
            ("received", keys.received),
        ] {
            if let Some(raw) = raw {
                frame.insert(name.to_owned(), serde_json::from_str(raw.get())?);
            }
        }
        // Only a `message` frame has messages; one that is not an array stays a wrong type.
        let is_message = frame.get("type").and_then(Value::as_str) == Some("message");
        if let Some(messages) = keys.messages.filter(|_| is_message) {
            let value = if messages.get().trim_start().starts_with('[') {
                let kept = latest_messages(messages, limits.earlier + 1, limits.max_messages)?;
                Value::Array(
                    kept.iter()
                        .map(|m| serde_json::from_str(m.get()))
                        .collect::<Result<_, _>>()?,
                )
            } else {
                Value::Null
            };
            frame.insert("messages".to_owned(), value);
        }
        Ok(Value::Object(frame))
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

/// What a [`ClientFrame::ToolResult`] says, read from its `result` once. The frame has two
/// senders: a browser tool reporting (its output, or that it failed), and the seed's BIDI
/// confirmation draft answering an approval (`{confirmed: bool, reason?}`, addressed to the
/// approval's id, perhaps `confirmation-` prefixed). Which one it is may rest on the chat: an id
/// that names a waiting approval is read as a confirmation whatever its shape.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolReport {
    /// An answer to approval `approval_id` (`confirmed`, else `approved`; anything else denies).
    Confirmation {
        approval_id: String,
        approved: bool,
        reason: Option<String>,
    },
    /// The browser tool failed: its result says so (`success: false`), or is nothing but an
    /// error (`{error, success?, message?}`).
    Failed {
        tool_call_id: String,
        message: String,
    },
    /// The browser tool's output.
    Output { tool_call_id: String, output: Value },
}

impl ToolReport {
    /// Reads a `tool_result` frame's `id` and `result`. `names_waiting_approval` says whether
    /// the chat has a waiting approval with an id.
    pub fn read(
        id: String,
        result: Value,
        names_waiting_approval: impl FnOnce(&str) -> bool,
    ) -> Self {
        let id = id
            .strip_prefix("confirmation-")
            .map(str::to_string)
            .unwrap_or(id);
        let confirmation =
            result.get("confirmed").is_some() && result.as_object().is_some_and(|o| o.len() <= 2);
        if names_waiting_approval(&id) || confirmation {
            return ToolReport::Confirmation {
                approval_id: id,
                approved: result
                    .get("confirmed")
                    .or_else(|| result.get("approved"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                reason: result
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            };
        }
        let only_an_error = result.as_object().is_some_and(|o| {
            o.contains_key("error")
                && o.keys()
                    .all(|k| matches!(k.as_str(), "error" | "success" | "message"))
        });
        if result.get("success").and_then(Value::as_bool) == Some(false) || only_an_error {
            return ToolReport::Failed {
                tool_call_id: id,
                message: result
                    .get("error")
                    .or_else(|| result.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the browser reported an error")
                    .to_string(),
            };
        }
        ToolReport::Output {
            tool_call_id: id,
            output: result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_result_reads_as_a_confirmation_a_failure_or_an_output() {
        assert_eq!(
            ToolReport::read("apv-1".into(), json!({"approved": true}), |id| id
                == "apv-1"),
            ToolReport::Confirmation {
                approval_id: "apv-1".into(),
                approved: true,
                reason: None
            }
        );
        assert_eq!(
            ToolReport::read(
                "confirmation-apv-9".into(),
                json!({"confirmed": false, "reason": "no"}),
                |_| false
            ),
            ToolReport::Confirmation {
                approval_id: "apv-9".into(),
                approved: false,
                reason: Some("no".into())
            }
        );
        assert_eq!(
            ToolReport::read("c".into(), json!({"error": "no", "message": "m"}), |_| {
                false
            }),
            ToolReport::Failed {
                tool_call_id: "c".into(),
                message: "no".into()
            }
        );
        assert_eq!(
            ToolReport::read("c".into(), json!({"success": false}), |_| false),
            ToolReport::Failed {
                tool_call_id: "c".into(),
                message: "the browser reported an error".into()
            }
        );
        let output = json!({"latitude": 1.0, "error": "coarse fix"});
        assert_eq!(
            ToolReport::read("c".into(), output.clone(), |_| false),
            ToolReport::Output {
                tool_call_id: "c".into(),
                output
            }
        );
    }

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

    const LIMITS: ReadLimits = ReadLimits {
        max_messages: 5,
        earlier: 2,
    };

    #[test]
    fn a_server_decodes_earlier_messages_only_for_a_new_user_message() {
        let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]});
        let assistant = json!({"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}]});
        let read =
            |body: &Value| ChatRequest::from_slice_for_server(body.to_string().as_bytes(), LIMITS);
        // Answers: the earlier messages are JSON but need not be messages the server reads.
        let answers = json!({"id": "c", "messages": [{"role": 7}, assistant.clone()],
                             "trigger": "submit-message", "messageId": "a1"});
        let request = read(&answers).unwrap();
        assert_eq!(request.messages.len(), 1);
        assert_eq!(request.message_id.as_deref(), Some("a1"));
        // A new message: the messages before it are decoded, as from_json does.
        let turn = json!({"id": "c", "messages": [user.clone(), assistant.clone(), user.clone()]});
        assert_eq!(
            read(&turn).unwrap(),
            ChatRequest::from_json(&turn.to_string()).unwrap()
        );
        let bad =
            json!({"id": "c", "messages": [{"role": 7}, {"id": "u", "role": "user", "parts": []}]});
        assert!(read(&bad).is_err());
        assert!(
            ChatRequest::from_slice_for_server(b"{\"id\":\"c\",\"messages\":[{]}", LIMITS).is_err()
        );
        let empty = read(&json!({"id": "c", "messages": []})).unwrap();
        assert!(empty.messages.is_empty());
        assert!(read(&json!({"id": "c", "messages": null})).is_err());
    }

    /// Only the last `earlier + 1` messages are decoded (older ones, even broken or nested
    /// deeper than a decoder goes, are only JSON); more than `max_messages` is refused.
    #[test]
    fn a_server_reads_the_latest_messages_and_no_more_than_the_cap() {
        let user = |id: &str| format!(r#"{{"id":"{id}","role":"user","parts":[]}}"#);
        let body =
            |messages: &[String]| format!(r#"{{"id":"c","messages":[{}]}}"#, messages.join(","));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let five = body(&[
            deep,
            r#"{"role":7}"#.into(),
            user("a"),
            user("b"),
            user("c"),
        ]);
        let request = ChatRequest::from_slice_for_server(five.as_bytes(), LIMITS).unwrap();
        let ids: Vec<&str> = request.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);

        let six: Vec<String> = (0..6).map(|i| user(&format!("u{i}"))).collect();
        let over = body(&six);
        assert!(matches!(
            ChatRequest::from_slice_for_server(over.as_bytes(), LIMITS),
            Err(ReadError::TooManyMessages { max: 5 })
        ));
        let raw = RawValue::from_string(format!("[{}]", six[..3].join(","))).unwrap();
        let kept = latest_messages(&raw, 2, 5).unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[1].get(), six[2]);
        assert!(latest_messages(&raw, 0, 5).unwrap().is_empty());
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
            // A server reads the same frame from its text.
            let read = ClientFrame::value_for_server(&wire.to_string(), LIMITS).unwrap();
            assert_eq!(ClientFrame::from_value(read).unwrap(), expected, "{wire}");
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
    fn a_server_reads_a_message_frame_as_it_reads_a_post() {
        let user = |id: &str| json!({"id": id, "role": "user", "parts": []});
        let frame = json!({"type": "message", "id": "c", "junk": {"a": [1, 2, 3]},
            "messages": [{"role": 7}, user("a"), user("b"), user("c")]});
        let read = ClientFrame::value_for_server(&frame.to_string(), LIMITS).unwrap();
        assert_eq!(
            read,
            json!({"type": "message", "id": "c", "messages": [user("a"), user("b"), user("c")]})
        );
        let many = json!({"type": "message", "id": "c", "messages": vec![user("u"); 6]});
        assert!(matches!(
            ClientFrame::value_for_server(&many.to_string(), LIMITS),
            Err(ReadError::TooManyMessages { max: 5 })
        ));
        // Valid JSON that is no frame reads as none; broken JSON is an error.
        assert_eq!(
            ClientFrame::value_for_server("[1]", LIMITS).unwrap(),
            Value::Null
        );
        assert!(matches!(
            ClientFrame::from_value(Value::Null),
            Err(EnvelopeError::NotAnObject)
        ));
        assert!(ClientFrame::value_for_server("{", LIMITS).is_err());
        // A message frame whose messages are not an array stays one that cannot be read.
        let wrong = json!({"type": "message", "id": "c", "messages": "no"});
        let read = ClientFrame::value_for_server(&wrong.to_string(), LIMITS).unwrap();
        assert!(matches!(
            ClientFrame::from_value(read),
            Err(EnvelopeError::InvalidFields { .. })
        ));
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
