//! The AI SDK's WebSocket chat protocol (ai@7 `WebSocketChatTransport`): many chats and requests
//! multiplexed on one socket, told apart by `requestId`.
//!
//! Client → server ([`ChatSocketRequest`]): `send` (a chat request, the same as the body of
//! `POST /api/chat`, plus the transport's `headers` and `body`), `resume` (replay the chat's
//! streaming turn from its start), `abort` (stop what `requestId` streams).
//! Server → client ([`ChatSocketResponse`]): `start`, `chunk` (a UI message chunk numbered by a
//! per-request `sequence` from 0, without gaps), `end`, `error`, `no-active` (nothing to resume).
//! The client closes the socket on any frame it cannot read, so every frame the server sends
//! carries `type` and `requestId`, and keep-alives are WebSocket pings, never JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::value::RawValue;

use super::{
    Trigger, UiMessage,
    envelope::{ReadError, ReadLimits, read_messages},
};

/// A client frame.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatSocketRequest {
    /// A chat request: starts a turn or answers the waiting one.
    Send {
        request_id: String,
        /// The chat id.
        id: String,
        /// The messages a server reads of the client's copy ([`read_messages`]).
        messages: Vec<UiMessage>,
        trigger: Option<Trigger>,
        message_id: Option<String>,
        /// The transport's headers, names in lower case.
        headers: BTreeMap<String, String>,
    },
    /// Re-attach to the chat's turn that is still streaming.
    Resume {
        request_id: String,
        id: String,
        /// Chunks the client already has (ai@7 never sends it: everything is replayed).
        last_sequence: Option<u64>,
        headers: BTreeMap<String, String>,
    },
    /// Stop the request (and the turn it streams).
    Abort { request_id: String },
}

/// Why a client frame cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatSocketFrameError {
    #[error("the frame is not JSON: {0}")]
    NotJson(String),
    #[error("the frame has no string `requestId`")]
    NoRequestId,
    /// The frame names its request but cannot be read; answer it with an `error`.
    #[error("{message}")]
    Invalid { request_id: String, message: String },
    /// A `send` with more messages than a request may carry.
    #[error("the request carries more than {max} messages")]
    TooManyMessages { request_id: String, max: usize },
}

/// Every key of every client frame, each as its raw JSON: read in one pass that builds nothing
/// (a `send` carries the whole conversation), any other key skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFrame<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    trigger: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    headers: Option<&'a RawValue>,
    #[serde(borrow, default)]
    last_sequence: Option<&'a RawValue>,
}

/// The value of field `name` (`raw`), or the reason it is not one.
fn field<T: DeserializeOwned>(raw: Option<&RawValue>, name: &str) -> Result<T, String> {
    let text = raw.map_or("null", RawValue::get);
    serde_json::from_str(text).map_err(|e| match raw {
        None => format!("missing field `{name}`"),
        Some(_) => format!("`{name}`: {e}"),
    })
}

impl ChatSocketRequest {
    /// Reads a text frame; a `send`'s messages as a server reads them ([`read_messages`]:
    /// more than `limits.max_messages` is refused before any is decoded). A frame without a
    /// `requestId` cannot be answered at all.
    pub fn decode(text: &str, limits: ReadLimits) -> Result<Self, ChatSocketFrameError> {
        let (frame, request_id) = Self::head(text)?;
        let kind = frame
            .kind
            .and_then(|k| serde_json::from_str::<String>(k.get()).ok())
            .unwrap_or_default();
        let invalid = |why: String| ChatSocketFrameError::Invalid {
            request_id: request_id.clone(),
            message: format!("the {kind} frame cannot be read: {why}"),
        };
        match kind.as_str() {
            "send" => {
                let id = field(frame.id, "id").map_err(invalid)?;
                let trigger = field(frame.trigger, "trigger").map_err(invalid)?;
                let message_id = field(frame.message_id, "messageId").map_err(invalid)?;
                let headers: Option<BTreeMap<String, String>> =
                    field(frame.headers, "headers").map_err(invalid)?;
                let Some(messages) = frame.messages else {
                    return Err(invalid("missing field `messages`".to_owned()));
                };
                let messages = match read_messages(messages, limits) {
                    Ok(messages) => messages,
                    Err(ReadError::TooManyMessages { max }) => {
                        return Err(ChatSocketFrameError::TooManyMessages { request_id, max });
                    }
                    Err(ReadError::Json(e)) => return Err(invalid(format!("`messages`: {e}"))),
                };
                Ok(ChatSocketRequest::Send {
                    request_id,
                    id,
                    messages,
                    trigger,
                    message_id,
                    headers: headers.unwrap_or_default(),
                })
            }
            "resume" => {
                let headers: Option<BTreeMap<String, String>> =
                    field(frame.headers, "headers").map_err(invalid)?;
                Ok(ChatSocketRequest::Resume {
                    id: field(frame.id, "id").map_err(invalid)?,
                    last_sequence: field(frame.last_sequence, "lastSequence").map_err(invalid)?,
                    headers: headers.unwrap_or_default(),
                    request_id,
                })
            }
            "abort" => Ok(ChatSocketRequest::Abort { request_id }),
            _ => Err(ChatSocketFrameError::Invalid {
                message: format!(
                    "unknown frame type {kind:?}: this socket takes send, resume and abort"
                ),
                request_id,
            }),
        }
    }

    /// The `requestId` a frame names, read without reading the rest of it.
    pub fn request_id_of(text: &str) -> Option<String> {
        Self::head(text).ok().map(|(_, id)| id)
    }

    /// The frame's keys and its `requestId`.
    fn head(text: &str) -> Result<(RawFrame<'_>, String), ChatSocketFrameError> {
        if !text.trim_start().starts_with('{') {
            // JSON that is no object (an array would read as a frame's fields in order).
            return Err(match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                Ok(_) => ChatSocketFrameError::NoRequestId,
                Err(e) => ChatSocketFrameError::NotJson(e.to_string()),
            });
        }
        let frame: RawFrame<'_> = serde_json::from_str(text).map_err(|e| {
            // JSON that is no frame (a duplicate key) has no request id to answer.
            if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
                ChatSocketFrameError::NoRequestId
            } else {
                ChatSocketFrameError::NotJson(e.to_string())
            }
        })?;
        let request_id = frame
            .request_id
            .and_then(|id| serde_json::from_str::<String>(id.get()).ok())
            .filter(|id| !id.is_empty())
            .ok_or(ChatSocketFrameError::NoRequestId)?;
        Ok((frame, request_id))
    }

    pub fn request_id(&self) -> &str {
        match self {
            ChatSocketRequest::Send { request_id, .. }
            | ChatSocketRequest::Resume { request_id, .. }
            | ChatSocketRequest::Abort { request_id } => request_id,
        }
    }
}

/// A server frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum ChatSocketResponse<'a> {
    Start {
        request_id: &'a str,
    },
    End {
        request_id: &'a str,
    },
    Error {
        request_id: &'a str,
        error_text: &'a str,
    },
    NoActive {
        request_id: &'a str,
    },
}

impl ChatSocketResponse<'_> {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A `chunk` frame around `chunk_json` (a chunk already encoded in its dialect), without
/// decoding it again.
pub fn chunk_frame(request_id: &str, sequence: u64, chunk_json: &str) -> String {
    let id = serde_json::to_string(request_id).unwrap_or_else(|_| "\"\"".into());
    let mut frame = String::with_capacity(chunk_json.len() + id.len() + 48);
    frame.push_str("{\"type\":\"chunk\",\"requestId\":");
    frame.push_str(&id);
    frame.push_str(",\"sequence\":");
    frame.push_str(&sequence.to_string());
    frame.push_str(",\"chunk\":");
    frame.push_str(chunk_json);
    frame.push('}');
    frame
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const LIMITS: ReadLimits = ReadLimits {
        max_messages: 3,
        earlier: 1,
    };

    #[test]
    fn client_frames_decode_as_ai7_sends_them() {
        let send = ChatSocketRequest::decode(
            r#"{"type":"send","requestId":"nHMca9iBuC1n1bek","id":"chat-1","trigger":"submit-message",
                "messages":[{"parts":[{"type":"text","text":"hello"}],"id":"u1","role":"user"}],
                "headers":{"x-countersign-text":"hold"},"body":{}}"#, LIMITS)
        .unwrap();
        let ChatSocketRequest::Send {
            request_id,
            id,
            messages,
            trigger,
            message_id,
            headers,
        } = send
        else {
            panic!("not a send");
        };
        assert_eq!(request_id, "nHMca9iBuC1n1bek");
        assert_eq!(id, "chat-1");
        assert_eq!(messages[0].text(), "hello");
        assert_eq!(trigger, Some(Trigger::SubmitMessage));
        assert_eq!(message_id, None);
        assert_eq!(headers["x-countersign-text"], "hold");

        assert_eq!(
            ChatSocketRequest::decode(
                r#"{"type":"resume","requestId":"r","id":"c","headers":{},"body":{}}"#,
                LIMITS
            )
            .unwrap(),
            ChatSocketRequest::Resume {
                request_id: "r".into(),
                id: "c".into(),
                last_sequence: None,
                headers: BTreeMap::new()
            }
        );
        assert_eq!(
            ChatSocketRequest::decode(r#"{"type":"abort","requestId":"a"}"#, LIMITS)
                .unwrap()
                .request_id(),
            "a"
        );
    }

    #[test]
    fn bad_frames_say_whether_they_can_be_answered() {
        assert!(matches!(
            ChatSocketRequest::decode("{", LIMITS),
            Err(ChatSocketFrameError::NotJson(_))
        ));
        assert_eq!(
            ChatSocketRequest::decode(r#"{"type":"send"}"#, LIMITS),
            Err(ChatSocketFrameError::NoRequestId)
        );
        let Err(ChatSocketFrameError::Invalid {
            request_id,
            message,
        }) = ChatSocketRequest::decode(r#"{"type":"ping","requestId":"x"}"#, LIMITS)
        else {
            panic!("an unknown type is answerable");
        };
        assert_eq!(request_id, "x");
        assert!(message.contains("unknown frame type"), "{message}");
        assert!(matches!(
            ChatSocketRequest::decode(
                r#"{"type":"send","requestId":"x","id":"c","messages":"no"}"#,
                LIMITS
            ),
            Err(ChatSocketFrameError::Invalid { .. })
        ));
    }

    #[test]
    fn a_send_is_read_as_a_server_reads_a_post() {
        let user = |id: &str| format!(r#"{{"id":"{id}","role":"user","parts":[]}}"#);
        let send = |messages: &[String]| {
            format!(
                r#"{{"type":"send","requestId":"m","id":"c","messages":[{}]}}"#,
                messages.join(",")
            )
        };
        // More messages than a request may carry: refused with the cap, and answerable.
        let many = send(&(0..4).map(|i| user(&format!("u{i}"))).collect::<Vec<_>>());
        assert_eq!(
            ChatSocketRequest::decode(&many, LIMITS),
            Err(ChatSocketFrameError::TooManyMessages {
                request_id: "m".into(),
                max: 3
            })
        );
        assert_eq!(
            ChatSocketRequest::request_id_of(&many).as_deref(),
            Some("m")
        );
        // Within it: the new message and the one before it; older ones are only JSON.
        let three = send(&[r#"{"role":7}"#.to_owned(), user("a"), user("b")]);
        let Ok(ChatSocketRequest::Send { messages, .. }) =
            ChatSocketRequest::decode(&three, LIMITS)
        else {
            panic!("a send");
        };
        let ids: Vec<&str> = messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
    }

    #[test]
    fn server_frames_have_type_and_request_id() {
        let frame: Value = serde_json::from_str(&chunk_frame(
            "r\"1",
            3,
            r#"{"type":"text-delta","id":"t","delta":"a"}"#,
        ))
        .unwrap();
        assert_eq!(
            frame,
            json!({"type": "chunk", "requestId": "r\"1", "sequence": 3,
                   "chunk": {"type": "text-delta", "id": "t", "delta": "a"}})
        );
        let error: Value = serde_json::from_str(
            &ChatSocketResponse::Error {
                request_id: "r",
                error_text: "no",
            }
            .to_json(),
        )
        .unwrap();
        assert_eq!(
            error,
            json!({"type": "error", "requestId": "r", "errorText": "no"})
        );
        assert_eq!(
            ChatSocketResponse::NoActive { request_id: "r" }.to_json(),
            r#"{"type":"no-active","requestId":"r"}"#
        );
    }
}
