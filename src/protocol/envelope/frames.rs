//! The WebSocket frames of the bidirectional mode (seed-system.md §2.2): what a client sends
//! ([`ClientFrame`], and a `tool_result`'s payload read once as a [`ToolReport`]) and the
//! server's frames that are not chunks ([`ServerControl`]).

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value, value::RawValue};

use super::{ChatRequest, ReadError, ReadLimits, Trigger};

use super::super::json_util::{TagError, split_tagged};
use super::super::message::UiMessage;

/// `audio_control.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioAction {
    Start,
    Stop,
}

/// `audio_control.mode` (ours): how the person talks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AudioMode {
    /// `start` begins an utterance, `stop` ends it (the model answers then).
    #[default]
    PushToTalk,
    /// `start` opens the microphone, `stop` closes it; the model finds where speech ends.
    HandsFree,
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
    /// Start/stop of a recording. `id` and `mode` are ours (the seed's frontend sends neither):
    /// on `/api/live` `id` names the chat the audio is for, and is needed before any audio.
    AudioControl {
        action: AudioAction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<AudioMode>,
    },
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
    /// reads (the last `limits.earlier + 1`, kept as the array is skimmed — the one pass over
    /// it, as [`super::latest_messages`] reads one; more than `limits.max_messages` is
    /// refused). JSON that is not an object reads as `null` (not a frame).
    pub fn value_for_server(text: &str, limits: ReadLimits) -> Result<Value, ReadError> {
        use serde::de::DeserializeSeed;

        if !text.trim_start().starts_with('{') {
            serde_json::from_str::<serde::de::IgnoredAny>(text)?;
            return Ok(Value::Null);
        }
        let mut reader = serde_json::Deserializer::from_str(text);
        let keys = FrameSeed {
            keep: limits.earlier + 1,
            max: limits.max_messages,
        }
        .deserialize(&mut reader)?;
        reader.end()?;
        let mut frame = serde_json::Map::new();
        for (name, raw) in FIELD_NAMES.iter().zip(keys.fields) {
            if let Some(raw) = raw {
                frame.insert((*name).to_owned(), serde_json::from_str(raw.get())?);
            }
        }
        // Only a `message` frame has messages; one that is not an array stays a wrong type.
        let is_message = frame.get("type").and_then(Value::as_str) == Some("message");
        let value = match keys.messages.filter(|_| is_message) {
            None | Some(MessagesRead::Absent) => return Ok(Value::Object(frame)),
            Some(MessagesRead::Other) => Value::Null,
            Some(MessagesRead::Array { over: true, .. }) => {
                return Err(ReadError::TooManyMessages {
                    max: limits.max_messages,
                });
            }
            Some(MessagesRead::Array { latest, .. }) => {
                let kept: Vec<&RawValue> = latest.into();
                // As `read_messages` reads a POST: the earlier ones only before a new user
                // message (the context a new chat may adopt); answers need only the last.
                let mut read = Vec::with_capacity(kept.len());
                if let Some((last, earlier)) = kept.split_last() {
                    let last: Value = serde_json::from_str(last.get())?;
                    if last.get("role").and_then(Value::as_str) == Some("user") {
                        for m in earlier {
                            read.push(serde_json::from_str(m.get())?);
                        }
                    }
                    read.push(last);
                }
                Value::Array(read)
            }
        };
        frame.insert("messages".to_owned(), value);
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

/// The keys of client frames but `messages`, as [`FrameKey`] numbers them, by wire name.
const FIELD_NAMES: [&str; 15] = [
    "type",
    "id",
    "trigger",
    "messageId",
    "toolCallId",
    "result",
    "reason",
    "timestamp",
    "chunk",
    "sampleRate",
    "channels",
    "bitDepth",
    "action",
    "received",
    "mode",
];

/// A key of a client frame's JSON (the first fifteen in [`FIELD_NAMES`]'s order).
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum FrameKey {
    #[serde(rename = "type")]
    Kind,
    Id,
    Trigger,
    MessageId,
    ToolCallId,
    Result,
    Reason,
    Timestamp,
    Chunk,
    SampleRate,
    Channels,
    BitDepth,
    Action,
    Received,
    Mode,
    Messages,
    #[serde(other)]
    Other,
}

/// A frame's keys as [`ClientFrame::value_for_server`] reads them, in one pass.
struct FrameKeys<'a> {
    /// Every key a frame has but `messages`, as raw JSON ([`FIELD_NAMES`]' order; `null` reads
    /// as absent).
    fields: [Option<&'a RawValue>; 15],
    messages: Option<MessagesRead<'a>>,
}

/// A frame's `messages`, as it was skimmed.
enum MessagesRead<'a> {
    /// An array: its last entries (at most the seed's `keep`), oldest first, each as its raw
    /// JSON; `over`: it had more than the seed's `max` (the rest was only skimmed).
    Array {
        latest: std::collections::VecDeque<&'a RawValue>,
        over: bool,
    },
    /// `null`, as if there were none.
    Absent,
    /// Anything else.
    Other,
}

/// Reads a frame's keys ([`FrameKeys`]), its `messages` kept as they are skimmed.
struct FrameSeed {
    keep: usize,
    max: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for FrameSeed {
    type Value = FrameKeys<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FrameSeed {
    type Value = FrameKeys<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a frame (a JSON object)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut keys = FrameKeys {
            fields: [None; 15],
            messages: None,
        };
        let mut seen = [false; 15];
        while let Some(key) = map.next_key::<FrameKey>()? {
            match key {
                FrameKey::Messages => {
                    if keys.messages.is_some() {
                        return Err(A::Error::duplicate_field("messages"));
                    }
                    keys.messages = Some(map.next_value_seed(MessagesSeed {
                        keep: self.keep,
                        max: self.max,
                    })?);
                }
                FrameKey::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                field => {
                    let at = field as usize;
                    if std::mem::replace(&mut seen[at], true) {
                        return Err(A::Error::duplicate_field(FIELD_NAMES[at]));
                    }
                    keys.fields[at] = map.next_value::<Option<&'de RawValue>>()?;
                }
            }
        }
        Ok(keys)
    }
}

/// Reads a frame's `messages` ([`MessagesRead`]).
struct MessagesSeed {
    keep: usize,
    max: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for MessagesSeed {
    type Value = MessagesRead<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for MessagesSeed {
    type Value = MessagesRead<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut latest = std::collections::VecDeque::with_capacity(self.keep.min(64));
        let mut count = 0usize;
        while count < self.max {
            let Some(entry) = seq.next_element::<&'de RawValue>()? else {
                return Ok(MessagesRead::Array {
                    latest,
                    over: false,
                });
            };
            count += 1;
            if latest.len() == self.keep {
                latest.pop_front();
            }
            if self.keep > 0 {
                latest.push_back(entry);
            }
        }
        // At the most: anything more is refused (for a frame that reads messages), and only
        // skimmed to the end of the JSON.
        let mut over = false;
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            over = true;
        }
        Ok(MessagesRead::Array { latest, over })
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(MessagesRead::Other)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(MessagesRead::Absent)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(MessagesRead::Absent)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(MessagesRead::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(MessagesRead::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(MessagesRead::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(MessagesRead::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(MessagesRead::Other)
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
        super::super::chunk::to_json_infallible(self)
    }
}

/// What a [`ClientFrame::ToolResult`] says, read from its `result` once. The frame has two
/// senders: a browser tool reporting (its output, or that it failed), and the seed's BIDI
/// confirmation draft answering an approval (`{confirmed: bool, reason?}`, addressed to the
/// approval's id, perhaps `confirmation-` prefixed). Which one it is may rest on the chat: an id
/// that names a waiting approval is read as a confirmation whatever its shape. A confirmation
/// that does not say yes or no is refused ([`ToolReportError`]), never read as a denial.
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

/// Why a `tool_result` addressed to an approval cannot be read as its answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolReportError {
    #[error(
        "the answer to approval {approval_id} must say `confirmed` (or `approved`): true or false"
    )]
    NoDecision { approval_id: String },
    #[error("the answer to approval {approval_id} has a `reason` that is not text")]
    Reason { approval_id: String },
}

impl ToolReport {
    /// Reads a `tool_result` frame's `id` and `result`. `names_waiting_approval` says whether
    /// the chat has a waiting approval with an id.
    pub fn read(
        id: String,
        result: Value,
        names_waiting_approval: impl FnOnce(&str) -> bool,
    ) -> Result<Self, ToolReportError> {
        let id = id
            .strip_prefix("confirmation-")
            .map(str::to_string)
            .unwrap_or(id);
        let confirmation =
            result.get("confirmed").is_some() && result.as_object().is_some_and(|o| o.len() <= 2);
        if names_waiting_approval(&id) || confirmation {
            let decision = result.get("confirmed").or_else(|| result.get("approved"));
            let Some(approved) = decision.and_then(Value::as_bool) else {
                return Err(ToolReportError::NoDecision { approval_id: id });
            };
            let reason = match result.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(reason)) => Some(reason.clone()),
                Some(_) => return Err(ToolReportError::Reason { approval_id: id }),
            };
            return Ok(ToolReport::Confirmation {
                approval_id: id,
                approved,
                reason,
            });
        }
        let only_an_error = result.as_object().is_some_and(|o| {
            o.contains_key("error")
                && o.keys()
                    .all(|k| matches!(k.as_str(), "error" | "success" | "message"))
        });
        if result.get("success").and_then(Value::as_bool) == Some(false) || only_an_error {
            return Ok(ToolReport::Failed {
                tool_call_id: id,
                message: result
                    .get("error")
                    .or_else(|| result.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the browser reported an error")
                    .to_string(),
            });
        }
        Ok(ToolReport::Output {
            tool_call_id: id,
            output: result,
        })
    }
}
