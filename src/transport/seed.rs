//! The original system's dialect, in one place: its request envelope for `POST /stream`
//! (`content` strings, ADK confirmation parts, `tool-result` parts), its looser WebSocket
//! `message` frames, and its `tool_result` frames (a browser tool's output, or a confirmation
//! addressed to an approval id). Each is turned into what the rest of the server speaks.

use serde_json::{Value, json};

use super::error::ApiError;
use crate::{
    agent::{ApprovalDecision, BrowserResult, PersonInput},
    protocol::{ChatRequest, UiMessage},
};

/// Converts the seed system's request into a [`ChatRequest`]: only the last message matters.
pub fn request(value: &Value) -> Result<ChatRequest, ApiError> {
    let messages = value
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::bad_request("empty_messages", "the request has no messages"))?;
    let chat_id = value
        .get("id")
        .or_else(|| value.get("chatId"))
        .and_then(Value::as_str)
        .unwrap_or("seed-default")
        .to_string();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let message = message(&last)?;
    Ok(ChatRequest {
        id: chat_id,
        messages: vec![message],
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
            for entry in messages.iter_mut() {
                if serde_json::from_value::<UiMessage>(entry.clone()).is_err()
                    && let Ok(normalised) = message(entry)
                    && let Ok(v) = serde_json::to_value(normalised)
                {
                    *entry = v;
                }
            }
        }
    }
    value
}

/// A `tool_result` frame: a confirmation `{confirmed: bool, reason?}` addressed to an approval
/// id (the seed's draft; `confirmation-` prefixed ids too), or a browser tool's output.
/// `is_pending_approval` says whether the chat has a pending approval with an id. A browser
/// result is an error when it says so (`success: false`), or when it is nothing but an error
/// (`{error, success?, message?}`); anything else is the tool's output.
pub fn tool_result(
    id: String,
    result: Value,
    is_pending_approval: impl FnOnce(&str) -> bool,
) -> PersonInput {
    let id = id
        .strip_prefix("confirmation-")
        .map(str::to_string)
        .unwrap_or(id);
    let confirmation =
        result.get("confirmed").is_some() && result.as_object().is_some_and(|o| o.len() <= 2);
    if is_pending_approval(&id) || confirmation {
        let approved = result
            .get("confirmed")
            .or_else(|| result.get("approved"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let decision = if approved {
            ApprovalDecision::Approve
        } else {
            ApprovalDecision::Deny {
                reason: result
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        };
        return PersonInput::Approval {
            approval_id: id,
            decision,
        };
    }
    let only_an_error = result.as_object().is_some_and(|o| {
        o.contains_key("error")
            && o.keys()
                .all(|k| matches!(k.as_str(), "error" | "success" | "message"))
    });
    let failed = result.get("success").and_then(Value::as_bool) == Some(false) || only_an_error;
    let result = if failed {
        BrowserResult::Error {
            message: result
                .get("error")
                .or_else(|| result.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("the browser reported an error")
                .to_string(),
        }
    } else {
        BrowserResult::Output { output: result }
    };
    PersonInput::BrowserResult {
        tool_call_id: id,
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn seed_requests_need_messages() {
        assert_eq!(request(&json!({})).unwrap_err().code, "empty_messages");
        assert_eq!(
            request(&json!({"messages": []})).unwrap_err().code,
            "empty_messages"
        );
        let request = request(&json!({"messages": [{"role": "user", "content": "hi"}]})).unwrap();
        assert_eq!(request.id, "seed-default");
    }

    #[test]
    fn a_tool_result_frame_is_an_answer_or_a_browser_result_by_what_it_says() {
        let pending = |id: &str| id == "apv-1";
        let approval = |input: PersonInput| match input {
            PersonInput::Approval {
                approval_id,
                decision,
            } => Some((approval_id, decision)),
            _ => None,
        };
        assert_eq!(
            approval(tool_result(
                "apv-1".into(),
                json!({"approved": true}),
                pending
            )),
            Some(("apv-1".into(), ApprovalDecision::Approve))
        );
        assert_eq!(
            approval(tool_result(
                "confirmation-apv-9".into(),
                json!({"confirmed": false, "reason": "no"}),
                |_| false
            )),
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
            let result = browser(tool_result("call-1".into(), value.clone(), |_| false)).unwrap();
            assert_eq!(
                matches!(result, BrowserResult::Error { .. }),
                failed,
                "{value}"
            );
        }
    }
}
