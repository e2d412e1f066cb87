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

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Trigger, UiMessage};

/// A client frame.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum ChatSocketRequest {
    /// A chat request: starts a turn or answers the waiting one.
    Send {
        request_id: String,
        /// The chat id.
        id: String,
        messages: Vec<UiMessage>,
        #[serde(default)]
        trigger: Option<Trigger>,
        #[serde(default)]
        message_id: Option<String>,
        /// The transport's headers, names in lower case.
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    /// Re-attach to the chat's turn that is still streaming.
    Resume {
        request_id: String,
        id: String,
        /// Chunks the client already has (ai@7 never sends it: everything is replayed).
        #[serde(default)]
        last_sequence: Option<u64>,
        #[serde(default)]
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
}

impl ChatSocketRequest {
    /// Reads a text frame. A frame without a `requestId` cannot be answered at all.
    pub fn decode(text: &str) -> Result<Self, ChatSocketFrameError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| ChatSocketFrameError::NotJson(e.to_string()))?;
        let request_id = value
            .get("requestId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or(ChatSocketFrameError::NoRequestId)?
            .to_owned();
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !matches!(kind.as_str(), "send" | "resume" | "abort") {
            return Err(ChatSocketFrameError::Invalid {
                request_id,
                message: format!(
                    "unknown frame type {kind:?}: this socket takes send, resume and abort"
                ),
            });
        }
        serde_json::from_value(value).map_err(|e| ChatSocketFrameError::Invalid {
            request_id,
            message: format!("the {kind} frame cannot be read: {e}"),
        })
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
    use serde_json::json;

    use super::*;

    #[test]
    fn client_frames_decode_as_ai7_sends_them() {
        let send = ChatSocketRequest::decode(
            r#"{"type":"send","requestId":"nHMca9iBuC1n1bek","id":"chat-1","trigger":"submit-message",
                "messages":[{"parts":[{"type":"text","text":"hello"}],"id":"u1","role":"user"}],
                "headers":{"x-countersign-text":"hold"},"body":{}}"#,
        )
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
                r#"{"type":"resume","requestId":"r","id":"c","headers":{},"body":{}}"#
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
            ChatSocketRequest::decode(r#"{"type":"abort","requestId":"a"}"#)
                .unwrap()
                .request_id(),
            "a"
        );
    }

    #[test]
    fn bad_frames_say_whether_they_can_be_answered() {
        assert!(matches!(
            ChatSocketRequest::decode("{"),
            Err(ChatSocketFrameError::NotJson(_))
        ));
        assert_eq!(
            ChatSocketRequest::decode(r#"{"type":"send"}"#),
            Err(ChatSocketFrameError::NoRequestId)
        );
        let Err(ChatSocketFrameError::Invalid {
            request_id,
            message,
        }) = ChatSocketRequest::decode(r#"{"type":"ping","requestId":"x"}"#)
        else {
            panic!("an unknown type is answerable");
        };
        assert_eq!(request_id, "x");
        assert!(message.contains("unknown frame type"), "{message}");
        assert!(matches!(
            ChatSocketRequest::decode(
                r#"{"type":"send","requestId":"x","id":"c","messages":"no"}"#
            ),
            Err(ChatSocketFrameError::Invalid { .. })
        ));
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
