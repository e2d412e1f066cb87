//! The JSON of OpenAI Realtime (GA) in both directions: the client events the actor sends and
//! the server events it reads (names as in voice.md §2: openai-agents-python's
//! `openai_realtime.py` and OpenAI's client/server event references). Unknown server events
//! are kept as [`ServerEvent::Other`] and ignored, so a new event never breaks a session.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{HandsFreeDetection, NAMESPACE, REALTIME_RATE, Shared};
use crate::agent::history::{AssistantPart, ContextRole, HistoryItem, ToolCall, ToolResult};
use crate::agent::model::{ModelError, ModelRequest, Usage};
use crate::agent::voice::VoiceMode;
use crate::models::providers::http;
use crate::protocol::FinishReason;

// ---------------------------------------------------------------------------------------------
// Client events
// ---------------------------------------------------------------------------------------------

/// What the session is set up with; a change is one more `session.update`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SessionSpec {
    pub instructions: String,
    pub tools: Vec<Value>,
    /// `None`: not spoken yet (push-to-talk's `turn_detection: null`, so a text turn is never
    /// answered twice).
    pub mode: Option<VoiceMode>,
}

impl SessionSpec {
    pub fn new(request: &ModelRequest, mode: Option<VoiceMode>) -> Self {
        Self {
            instructions: request.system.clone(),
            tools: request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    })
                })
                .collect(),
            mode,
        }
    }
}

/// `session.update` for `spec`.
pub(super) fn session_update(shared: &Shared, spec: &SessionSpec) -> Value {
    let turn_detection = match spec.mode {
        Some(VoiceMode::HandsFree) => {
            let mut detection = json!({
                "type": shared.config.hands_free.wire(),
                "create_response": true,
                "interrupt_response": true,
            });
            if shared.config.hands_free == HandsFreeDetection::SemanticVad {
                detection["eagerness"] = json!("auto");
            }
            detection
        }
        Some(VoiceMode::PushToTalk) | None => Value::Null,
    };
    let format = json!({"type": "audio/pcm", "rate": REALTIME_RATE});
    json!({
        "type": "session.update",
        "session": {
            "type": "realtime",
            "model": shared.config.model,
            "output_modalities": ["audio"],
            "instructions": spec.instructions,
            "tools": spec.tools,
            "tool_choice": "auto",
            "audio": {
                "input": {
                    "format": format,
                    "transcription": {"model": shared.config.transcription_model},
                    "turn_detection": turn_detection,
                },
                "output": {"format": format, "voice": shared.config.voice},
            },
        },
    })
}

/// `input_audio_buffer.append` of PCM16LE mono 24 kHz bytes.
pub(super) fn append_audio(pcm: &[u8]) -> Value {
    json!({
        "type": "input_audio_buffer.append",
        "audio": base64::engine::general_purpose::STANDARD.encode(pcm),
    })
}

/// `conversation.item.truncate`: the assistant item `item_id`'s audio past `audio_end_ms` was
/// never heard, so the server drops it (and the item's transcript) from its context. `serial`
/// makes the `event_id` (an `error` about it names it).
pub(super) fn truncate(serial: u64, item_id: &str, content_index: u32, audio_end_ms: u64) -> Value {
    json!({
        "type": "conversation.item.truncate",
        "event_id": format!("{TRUNCATE_EVENT}{serial}"),
        "item_id": item_id,
        "content_index": content_index,
        "audio_end_ms": audio_end_ms,
    })
}

pub(super) fn bare(kind: &str) -> Value {
    json!({ "type": kind })
}

/// `response.create` asking an answer for `whom` (`metadata.countersign`, which the server's
/// `response.created` and `response.done` carry back).
pub(super) fn create_response(whom: &str) -> Value {
    json!({"type": "response.create", "response": {"metadata": {"countersign": whom}}})
}

fn create_item(item: Value) -> Value {
    json!({"type": "conversation.item.create", "item": item})
}

/// The person's words.
pub(super) fn user_message(text: &str) -> Value {
    create_item(json!({
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }))
}

/// The model's earlier words, as context.
fn assistant_message(text: &str) -> Value {
    create_item(json!({
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }))
}

/// The model's words of one of its steps (its calls go as [`function_call`] items); `None`
/// when it said nothing.
pub(super) fn assistant_words(parts: &[AssistantPart]) -> Option<Value> {
    let text: String = parts
        .iter()
        .filter_map(|part| match part {
            AssistantPart::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!text.is_empty()).then(|| assistant_message(&text))
}

/// A call of the model's, replayed on a socket that did not make it (`call_id` is the
/// Realtime id it had, or ours): its output can then go as a `function_call_output`.
pub(super) fn function_call(call_id: &str, call: &ToolCall) -> Value {
    create_item(json!({
        "type": "function_call",
        "call_id": call_id,
        "name": call.name,
        "arguments": call.args.to_string(),
    }))
}

/// The output of a call this socket issued (or was replayed): what the gate decided, never
/// before.
pub(super) fn function_output(call_id: &str, result: &ToolResult) -> Value {
    create_item(json!({
        "type": "function_call_output",
        "call_id": call_id,
        "output": result.model_view().to_string(),
    }))
}

/// The output of a call that was not run, in the model's words (`{"error": why}`): a call the
/// model made in an aside (ADR 0035).
pub(super) fn refused_output(call_id: &str, why: &str) -> Value {
    create_item(json!({
        "type": "function_call_output",
        "call_id": call_id,
        "output": json!({ "error": why }).to_string(),
    }))
}

/// History as context items: text only (calls and results described; attachments named).
pub(super) fn context_events(items: &[HistoryItem]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|item| match item {
            HistoryItem::User { text, attachments } => {
                let mut text = text.clone();
                for attachment in attachments {
                    text.push_str(&format!(
                        "\n[Attached: {} ({})]",
                        attachment.filename.as_deref().unwrap_or("a file"),
                        attachment.media_type
                    ));
                }
                Some(user_message(&text))
            }
            HistoryItem::Context { speaker, text } => Some(match speaker {
                ContextRole::User => user_message(text),
                ContextRole::Assistant => assistant_message(text),
            }),
            HistoryItem::Assistant { parts } => {
                let text = assistant_text(parts);
                (!text.is_empty()).then(|| assistant_message(&text))
            }
            HistoryItem::ToolResults { results } => Some(user_message(&described(results))),
        })
        .collect()
}

fn assistant_text(parts: &[AssistantPart]) -> String {
    let mut text = String::new();
    for part in parts {
        match part {
            AssistantPart::Text { text: t, .. } => text.push_str(t),
            AssistantPart::ToolCall { call } => text.push_str(&format!(
                "[Called the tool {} with arguments {}]",
                call.name, call.args
            )),
            _ => {}
        }
    }
    text
}

/// Results of calls the socket did not issue, as the person's message that says what they are.
pub(super) fn described(results: &[ToolResult]) -> String {
    let mut text = String::from("[The tool calls you made earlier have finished:]");
    for result in results {
        text.push_str(&format!(
            "\n[Result of the tool {}: {}]",
            result.name,
            result.model_view()
        ));
    }
    text
}

pub(super) fn provider_data(call_id: &str) -> Value {
    json!({ NAMESPACE: {"id": call_id} })
}

// ---------------------------------------------------------------------------------------------
// Server events
// ---------------------------------------------------------------------------------------------

/// The server events the actor acts on.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub(super) enum ServerEvent {
    #[serde(rename = "session.created")]
    SessionCreated,
    #[serde(rename = "error")]
    Error { error: ErrorBody },
    #[serde(rename = "input_audio_buffer.speech_started")]
    SpeechStarted,
    /// The input buffer became a user item: one utterance.
    #[serde(rename = "input_audio_buffer.committed")]
    Committed {
        #[serde(default)]
        item_id: Option<String>,
    },
    #[serde(rename = "conversation.item.input_audio_transcription.completed")]
    TranscriptionCompleted {
        /// The user item (the utterance) it transcribes.
        #[serde(default)]
        item_id: Option<String>,
        #[serde(default)]
        transcript: String,
    },
    #[serde(rename = "conversation.item.input_audio_transcription.failed")]
    TranscriptionFailed {
        #[serde(default)]
        item_id: Option<String>,
    },
    #[serde(rename = "response.created")]
    ResponseCreated { response: ResponseBody },
    #[serde(rename = "response.output_audio.delta")]
    AudioDelta {
        response_id: String,
        /// The assistant message item the audio is part of (what a truncation names).
        #[serde(default)]
        item_id: Option<String>,
        #[serde(default)]
        content_index: u32,
        delta: String,
    },
    /// The item's audio is complete: all of it was sent.
    #[serde(rename = "response.output_audio.done")]
    AudioDone {
        response_id: String,
        #[serde(default)]
        item_id: Option<String>,
        #[serde(default)]
        content_index: u32,
    },
    #[serde(
        rename = "response.output_audio_transcript.delta",
        alias = "response.output_text.delta"
    )]
    TextDelta { response_id: String, delta: String },
    #[serde(rename = "response.function_call_arguments.done")]
    CallDone {
        response_id: String,
        call_id: String,
        name: String,
        arguments: String,
    },
    #[serde(rename = "response.done")]
    ResponseDone { response: ResponseBody },
    #[serde(other)]
    Other,
}

impl ServerEvent {
    /// The response this event is part of.
    pub fn response_id(&self) -> Option<&str> {
        match self {
            ServerEvent::ResponseCreated { response } | ServerEvent::ResponseDone { response } => {
                Some(&response.id)
            }
            ServerEvent::AudioDelta { response_id, .. }
            | ServerEvent::AudioDone { response_id, .. }
            | ServerEvent::TextDelta { response_id, .. }
            | ServerEvent::CallDone { response_id, .. } => Some(response_id),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct ErrorBody {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: String,
    /// The client event that caused it, when the client named it.
    #[serde(default)]
    pub event_id: Option<String>,
}

/// The `event_id` prefix of the truncations the actor sends: an `error` naming one (the server
/// could not truncate, e.g. the item is gone) ends nothing.
pub(super) const TRUNCATE_EVENT: &str = "countersign_truncate_";

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct ResponseBody {
    pub id: String,
    /// What our `response.create` attached (`None`: the server started it on its own).
    #[serde(default)]
    pub metadata: Option<AskedFor>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub status_details: Option<Value>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

/// The `metadata` of a response ours asked for: whom ([`create_response`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct AskedFor {
    #[serde(default)]
    countersign: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub(super) struct WireUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
        }
    }
}

/// How a `response.done` ends a step.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ending {
    Finished(FinishReason),
    /// Barge-in or `response.cancel`: what was said stays, the calls go.
    Cancelled,
    Failed(ModelError),
}

impl ResponseBody {
    /// Whom our `response.create` asked it for (`metadata.countersign`); `None` for a response
    /// the server started on its own.
    pub fn asked_for(&self) -> Option<&str> {
        self.metadata.as_ref()?.countersign.as_deref()
    }

    pub fn ending(&self) -> Ending {
        let reason = self
            .status_details
            .as_ref()
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match self.status.as_deref() {
            Some("cancelled") => Ending::Cancelled,
            Some("failed") => {
                let error = self
                    .status_details
                    .as_ref()
                    .and_then(|d| d.get("error"))
                    .and_then(|e| serde_json::from_value::<ErrorBody>(e.clone()).ok());
                Ending::Failed(match error {
                    Some(error) => error.into_model_error(),
                    None => ModelError::Protocol("the response failed without a reason".into()),
                })
            }
            Some("incomplete") if reason == "content_filter" => {
                Ending::Finished(FinishReason::ContentFilter)
            }
            Some("incomplete") if reason == "max_output_tokens" => {
                Ending::Finished(FinishReason::Length)
            }
            Some("incomplete") => Ending::Finished(FinishReason::Other),
            _ => Ending::Finished(FinishReason::Stop),
        }
    }
}

impl ErrorBody {
    /// The error answers a truncation of ours.
    pub fn about_truncation(&self) -> bool {
        self.event_id
            .as_deref()
            .is_some_and(|id| id.starts_with(TRUNCATE_EVENT))
    }

    /// The server's error as the runner reports it: its own words, shortened.
    pub fn into_model_error(self) -> ModelError {
        let message = http::short_message(&format!(
            "{}{}",
            self.message,
            self.code
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        ));
        if self.code.as_deref() == Some("rate_limit_exceeded") {
            ModelError::RateLimited {
                retry_after: None,
                message,
            }
        } else if self.kind == "invalid_request_error" {
            ModelError::Provider {
                status: 400,
                message,
            }
        } else {
            ModelError::Provider {
                status: 500,
                message,
            }
        }
    }
}

/// A text or binary frame of JSON as a server event.
pub(super) fn parse(text: &str) -> Result<ServerEvent, ModelError> {
    serde_json::from_str(text).map_err(|e| {
        ModelError::Protocol(format!("OpenAI Realtime sent an event we cannot read: {e}"))
    })
}

/// Base64 audio of a `response.output_audio.delta`.
pub(super) fn decode_audio(delta: &str) -> Result<Vec<u8>, ModelError> {
    base64::engine::general_purpose::STANDARD
        .decode(delta)
        .map_err(|e| {
            ModelError::Protocol(format!(
                "OpenAI Realtime sent audio that is not base64: {e}"
            ))
        })
}

/// A call's arguments: a JSON object (an empty string is no arguments).
pub(super) fn arguments(text: &str) -> Result<Value, ModelError> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(text).map_err(|e| {
        ModelError::Protocol(format!(
            "OpenAI Realtime sent call arguments that are not JSON: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_response_create_says_whom_it_asks_for_and_the_response_carries_it_back() {
        assert_eq!(
            create_response("step"),
            json!({"type": "response.create", "response": {"metadata": {"countersign": "step"}}})
        );
        let asked_for = |text: &str| match parse(text).unwrap() {
            ServerEvent::ResponseCreated { response } => response.asked_for().map(str::to_owned),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            asked_for(
                r#"{"type":"response.created","response":{"id":"r","metadata":{"countersign":"speech"}}}"#
            )
            .as_deref(),
            Some("speech")
        );
        // A response the server started itself (its voice activity detection).
        assert_eq!(
            asked_for(r#"{"type":"response.created","response":{"id":"r","metadata":null}}"#),
            None
        );
        assert_eq!(
            asked_for(r#"{"type":"response.created","response":{"id":"r"}}"#),
            None
        );
    }

    #[test]
    fn server_events_read_and_unknown_ones_are_ignored() {
        assert_eq!(
            parse(r#"{"type":"response.output_audio.delta","event_id":"e","response_id":"r","item_id":"i","output_index":0,"content_index":0,"delta":"AAA="}"#).unwrap(),
            ServerEvent::AudioDelta {
                response_id: "r".into(),
                item_id: Some("i".into()),
                content_index: 0,
                delta: "AAA=".into()
            }
        );
        assert_eq!(
            parse(r#"{"type":"response.output_audio.done","event_id":"e","response_id":"r","item_id":"i","output_index":0,"content_index":1}"#).unwrap(),
            ServerEvent::AudioDone { response_id: "r".into(), item_id: Some("i".into()), content_index: 1 }
        );
        let error = parse(r#"{"type":"error","event_id":"e","error":{"type":"invalid_request_error","code":"invalid_value","message":"Audio content of 900ms is already shorter than 1000ms","param":"audio_end_ms","event_id":"countersign_truncate_3"}}"#).unwrap();
        let ServerEvent::Error { error } = error else {
            panic!("an error event");
        };
        assert!(error.about_truncation());
        assert_eq!(
            truncate(3, "item_a", 0, 1_000),
            json!({"type": "conversation.item.truncate", "event_id": "countersign_truncate_3",
                "item_id": "item_a", "content_index": 0, "audio_end_ms": 1_000})
        );
        assert_eq!(
            parse(r#"{"type":"rate_limits.updated","rate_limits":[]}"#).unwrap(),
            ServerEvent::Other
        );
        assert!(parse("{}").is_err());
    }

    #[test]
    fn a_response_s_status_says_how_the_step_ends() {
        let body = |status: &str, details: Value| ResponseBody {
            id: "r".into(),
            metadata: None,
            status: Some(status.into()),
            status_details: Some(details),
            usage: None,
        };
        assert_eq!(
            body("completed", Value::Null).ending(),
            Ending::Finished(FinishReason::Stop)
        );
        assert_eq!(
            body("cancelled", json!({"reason": "turn_detected"})).ending(),
            Ending::Cancelled
        );
        assert_eq!(
            body("incomplete", json!({"reason": "max_output_tokens"})).ending(),
            Ending::Finished(FinishReason::Length)
        );
        assert_eq!(
            body(
                "failed",
                json!({"error": {"type": "server_error", "message": "boom"}})
            )
            .ending(),
            Ending::Failed(ModelError::Provider {
                status: 500,
                message: "boom".into()
            })
        );
    }
}
