//! The WebSocket frames of the bidirectional mode (seed-system.md §2.2): what a client sends
//! ([`ClientFrame`], and a `tool_result`'s payload read once as a [`ToolReport`]) and the
//! server's frames that are not chunks ([`ServerControl`]).

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value, value::RawValue};

use super::{ChatRequest, ReadError, ReadLimits, Trigger, latest_messages};

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
            #[serde(borrow, default)]
            mode: Option<&'a RawValue>,
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
            ("mode", keys.mode),
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
