//! The Live API's JSON as it crosses the socket: what the client sends (`setup`,
//! `toolResponse`, §C.2), what the server sends (§C.3) and how a frame is classified, and what a
//! close or a refused handshake means as a [`ModelError`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::history::text_part;
use super::{Shared, SlidingWindow, ToolBehavior, WsError};
use crate::agent::model::{ModelError, ModelRequest, ToolDeclaration, Usage};
use crate::agent::voice::VoiceMode;
use crate::models::providers::{
    gemini::{self, Content},
    http,
};
use crate::protocol::FinishReason;

// ---------------------------------------------------------------------------------------------
// Client messages (§C.2)
// ---------------------------------------------------------------------------------------------

/// The parts of `setup` fixed for a socket's life, and its fingerprint.
pub(super) struct SetupSpec {
    model: String,
    system: Option<Content>,
    tools: Vec<LiveTool>,
    compression: Option<SlidingWindow>,
    /// How speech is delimited, once the chat has used voice (`realtimeInputConfig`); `None`
    /// leaves the setup as a text session's.
    voice: Option<VoiceMode>,
    pub(super) fingerprint: String,
}

impl SetupSpec {
    pub(super) fn new(
        shared: &Shared,
        request: &ModelRequest,
        voice: Option<VoiceMode>,
    ) -> Result<Self, ModelError> {
        let system = (!request.system.is_empty()).then(|| Content {
            role: None,
            parts: vec![text_part(request.system.clone())],
        });
        let tools = if request.tools.is_empty() {
            Vec::new()
        } else {
            vec![LiveTool {
                function_declarations: request
                    .tools
                    .iter()
                    .map(|tool| live_declaration(tool, shared.behavior))
                    .collect(),
            }]
        };
        let mut spec = Self {
            model: format!("models/{}", shared.model),
            system,
            tools,
            compression: shared.config.compression,
            voice,
            fingerprint: String::new(),
        };
        spec.fingerprint = serde_json::to_string(&spec.message(None, false))
            .map_err(|e| ModelError::Protocol(format!("cannot encode the setup: {e}")))?;
        Ok(spec)
    }

    pub(super) fn message<'a>(
        &'a self,
        handle: Option<&'a str>,
        seeding: bool,
    ) -> SetupMessage<'a> {
        SetupMessage {
            setup: Setup {
                model: &self.model,
                generation_config: GenerationConfig {
                    response_modalities: ["AUDIO"],
                },
                system_instruction: self.system.as_ref(),
                tools: &self.tools,
                input_audio_transcription: Empty {},
                output_audio_transcription: Empty {},
                session_resumption: SessionResumption { handle },
                context_window_compression: self.compression.map(|c| Compression {
                    trigger_tokens: c.trigger_tokens,
                    sliding_window: SlidingWindowWire {
                        target_tokens: c.target_tokens,
                    },
                }),
                history_config: seeding.then_some(HistoryConfig {
                    initial_history_in_client_content: true,
                }),
                realtime_input_config: self.voice.map(realtime_input_config),
            },
        }
    }
}

fn live_declaration(tool: &ToolDeclaration, behavior: ToolBehavior) -> LiveDeclaration {
    LiveDeclaration {
        base: gemini::declaration(tool),
        behavior: behavior.wire(),
    }
}

#[derive(Serialize)]
pub(super) struct SetupMessage<'a> {
    setup: Setup<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Setup<'a> {
    model: &'a str,
    generation_config: GenerationConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<&'a Content>,
    #[serde(skip_serializing_if = "no_tools")]
    tools: &'a [LiveTool],
    input_audio_transcription: Empty,
    output_audio_transcription: Empty,
    session_resumption: SessionResumption<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_window_compression: Option<Compression>,
    #[serde(skip_serializing_if = "Option::is_none")]
    history_config: Option<HistoryConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    realtime_input_config: Option<Value>,
}

/// Push-to-talk: the client marks speech (`activityStart`/`activityEnd`), the server's
/// detection is off. Hands-free: the server detects speech, and speech interrupts the answer.
fn realtime_input_config(mode: VoiceMode) -> Value {
    match mode {
        VoiceMode::PushToTalk => json!({
            "automaticActivityDetection": {"disabled": true},
            "activityHandling": "START_OF_ACTIVITY_INTERRUPTS",
        }),
        VoiceMode::HandsFree => json!({
            "automaticActivityDetection": {"disabled": false},
            "activityHandling": "START_OF_ACTIVITY_INTERRUPTS",
        }),
    }
}

/// `realtimeInput` with one member: microphone audio, or an activity marker.
pub(super) fn realtime_audio(pcm: &[u8]) -> Value {
    use base64::Engine as _;
    json!({"realtimeInput": {"audio": {
        "mimeType": LIVE_INPUT_MIME,
        "data": base64::engine::general_purpose::STANDARD.encode(pcm),
    }}})
}

/// The mime type of the microphone's audio on the wire.
pub(super) const LIVE_INPUT_MIME: &str = "audio/pcm;rate=16000";

fn no_tools(tools: &&[LiveTool]) -> bool {
    tools.is_empty()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    response_modalities: [&'static str; 1],
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct SessionResumption<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    handle: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Compression {
    #[serde(skip_serializing_if = "Option::is_none")]
    trigger_tokens: Option<u64>,
    sliding_window: SlidingWindowWire,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SlidingWindowWire {
    #[serde(skip_serializing_if = "Option::is_none")]
    target_tokens: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HistoryConfig {
    initial_history_in_client_content: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveTool {
    function_declarations: Vec<LiveDeclaration>,
}

#[derive(Serialize)]
struct LiveDeclaration {
    #[serde(flatten)]
    base: gemini::FunctionDeclaration,
    behavior: &'static str,
}

#[derive(Debug, Serialize)]
pub(super) struct LiveFunctionResponse {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) response: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) scheduling: Option<&'static str>,
    /// `true`: more responses follow under this id (a generator call); `false` on the last
    /// response of such a call.
    #[serde(rename = "willContinue", skip_serializing_if = "Option::is_none")]
    pub(super) will_continue: Option<bool>,
}

pub(super) fn tool_response(responses: Vec<LiveFunctionResponse>) -> Value {
    json!({"toolResponse": {"functionResponses": responses}})
}

// ---------------------------------------------------------------------------------------------
// Server messages (§C.3)
// ---------------------------------------------------------------------------------------------

/// One server message. Unknown keys are ignored; proto3 JSON's snake_case spellings of the keys
/// we read are accepted too.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ServerMessage {
    #[serde(default, alias = "setup_complete")]
    pub(super) setup_complete: Option<Value>,
    #[serde(default, alias = "server_content")]
    pub(super) server_content: Option<ServerContent>,
    #[serde(default, alias = "tool_call")]
    pub(super) tool_call: Option<ToolCallMessage>,
    #[serde(default, alias = "tool_call_cancellation")]
    pub(super) tool_call_cancellation: Option<Cancellation>,
    #[serde(default, alias = "go_away")]
    pub(super) go_away: Option<GoAway>,
    #[serde(default, alias = "session_resumption_update")]
    pub(super) session_resumption_update: Option<ResumptionUpdate>,
    #[serde(default, alias = "usage_metadata")]
    pub(super) usage_metadata: Option<LiveUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ServerContent {
    #[serde(default, alias = "model_turn")]
    pub(super) model_turn: Option<Content>,
    #[serde(default, alias = "turn_complete")]
    pub(super) turn_complete: bool,
    #[serde(default, alias = "turn_complete_reason")]
    pub(super) turn_complete_reason: Option<String>,
    #[serde(default)]
    pub(super) interrupted: bool,
    #[serde(default, alias = "output_transcription")]
    pub(super) output_transcription: Option<Transcription>,
    #[serde(default, alias = "input_transcription")]
    pub(super) input_transcription: Option<Transcription>,
}

impl ServerMessage {
    /// It ends a generation: `turnComplete`, or `interrupted` (the person spoke over it).
    pub(super) fn ends_generation(&self) -> bool {
        self.server_content
            .as_ref()
            .is_some_and(|c| c.turn_complete || c.interrupted)
    }
}

impl ServerContent {
    /// Whether this message carries any of the model's output (not just end markers).
    pub(super) fn has_content(&self) -> bool {
        let parts = self.model_turn.as_ref().is_some_and(|turn| {
            turn.parts.iter().any(|p| {
                p.text.as_ref().is_some_and(|t| !t.is_empty())
                    || p.inline_data.is_some()
                    || p.function_call.is_some()
            })
        });
        let transcript = self
            .output_transcription
            .as_ref()
            .and_then(|t| t.text.as_ref())
            .is_some_and(|t| !t.is_empty());
        parts || transcript
    }

    /// The speech of the model's turn, decoded (`inlineData` with an `audio/pcm` type).
    pub(super) fn speech(&self) -> Vec<Vec<u8>> {
        use base64::Engine as _;
        let Some(turn) = &self.model_turn else {
            return Vec::new();
        };
        turn.parts
            .iter()
            .filter_map(|p| p.inline_data.as_ref())
            .filter(|blob| blob.mime_type.starts_with("audio/pcm"))
            .filter_map(|blob| {
                let pcm = base64::engine::general_purpose::STANDARD
                    .decode(&blob.data)
                    .map_err(|e| tracing::warn!(%e, "Gemini Live sent audio that is not base64"))
                    .ok()?;
                (!pcm.is_empty()).then_some(pcm)
            })
            .collect()
    }

    /// What the person said, as far as this message tells.
    pub(super) fn heard(&self) -> Option<&str> {
        self.input_transcription
            .as_ref()
            .and_then(|t| t.text.as_deref())
            .filter(|t| !t.is_empty())
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Transcription {
    #[serde(default)]
    pub(super) text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolCallMessage {
    #[serde(default, alias = "function_calls")]
    pub(super) function_calls: Vec<gemini::FunctionCall>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Cancellation {
    #[serde(default)]
    pub(super) ids: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GoAway {
    #[serde(default, alias = "time_left")]
    pub(super) time_left: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResumptionUpdate {
    #[serde(default, alias = "new_handle")]
    pub(super) new_handle: Option<String>,
    #[serde(default)]
    pub(super) resumable: Option<bool>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LiveUsage {
    #[serde(default, alias = "prompt_token_count")]
    prompt_token_count: Option<u64>,
    #[serde(default, alias = "response_token_count")]
    response_token_count: Option<u64>,
    #[serde(default, alias = "thoughts_token_count")]
    thoughts_token_count: Option<u64>,
    #[serde(default, alias = "total_token_count")]
    total_token_count: Option<u64>,
}

/// Live says `responseTokenCount` where REST says `candidatesTokenCount`.
pub(super) fn usage(meta: LiveUsage) -> Usage {
    gemini::gemini_usage(
        meta.prompt_token_count,
        meta.response_token_count,
        meta.thoughts_token_count,
        meta.total_token_count,
    )
}

pub(super) fn map_turn_complete_reason(reason: &str) -> FinishReason {
    match reason {
        "TURN_COMPLETE_REASON_UNSPECIFIED" | "NEED_MORE_INPUT" => FinishReason::Stop,
        "MALFORMED_FUNCTION_CALL" => FinishReason::Error,
        "RESPONSE_REJECTED" | "SAFETY" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" => {
            FinishReason::ContentFilter
        }
        "MAX_TOKENS" => FinishReason::Length,
        _ => FinishReason::Other,
    }
}

pub(super) fn classify(frame: Option<Result<Message, WsError>>) -> Incoming {
    let parsed = match frame {
        Some(Ok(Message::Binary(bytes))) => serde_json::from_slice::<ServerMessage>(&bytes),
        Some(Ok(Message::Text(text))) => serde_json::from_str::<ServerMessage>(text.as_str()),
        Some(Ok(Message::Close(Some(frame)))) => {
            return Incoming::Closed {
                code: Some(u16::from(frame.code)),
                reason: frame.reason.to_string(),
            };
        }
        Some(Ok(Message::Close(None))) => {
            return Incoming::Closed {
                code: None,
                reason: String::new(),
            };
        }
        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
            return Incoming::Ignore;
        }
        Some(Err(error)) => {
            return Incoming::Closed {
                code: None,
                reason: error.to_string(),
            };
        }
        None => {
            return Incoming::Closed {
                code: None,
                reason: "the connection ended".into(),
            };
        }
    };
    match parsed {
        Ok(message) => Incoming::Message(Box::new(message)),
        Err(e) => Incoming::Broken(ModelError::Protocol(format!(
            "invalid Gemini Live message: {e}"
        ))),
    }
}

/// A server frame, classified.
pub(super) enum Incoming {
    Message(Box<ServerMessage>),
    Closed { code: Option<u16>, reason: String },
    Ignore,
    Broken(ModelError),
}

// ---------------------------------------------------------------------------------------------
// Closes and refusals
// ---------------------------------------------------------------------------------------------

/// 1000 (normal) and 1001 (going away) end a socket, not a step.
pub(super) fn is_normal_close(code: u16) -> bool {
    matches!(code, 1000 | 1001)
}

/// A close with an error code: the reason is what the server has to say (for example 1007
/// "Request contains an invalid argument.", 1008 "… is not found for API version v1beta, or is
/// not supported for bidiGenerateContent", 1011 "Internal error" or "Resource has been exhausted
/// (e.g. check quota).").
pub(super) fn close_error(code: u16, reason: &str) -> ModelError {
    let message = if reason.trim().is_empty() {
        format!("Gemini Live closed the connection with code {code}")
    } else {
        http::short_message(reason)
    };
    let lower = reason.to_ascii_lowercase();
    if lower.contains("resource_exhausted")
        || lower.contains("resource has been exhausted")
        || lower.contains("quota")
        || lower.contains("rate limit")
    {
        ModelError::RateLimited {
            retry_after: None,
            message,
        }
    } else {
        ModelError::Provider {
            status: code,
            message,
        }
    }
}

pub(in crate::models::providers) fn handshake_error(error: WsError) -> ModelError {
    match error {
        WsError::Http(response) => {
            let status = response.status().as_u16();
            let body = response
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let message = match serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.pointer("/error/message")?.as_str().map(str::to_owned))
            {
                Some(message) => http::short_message(&message),
                None if body.trim().is_empty() => response
                    .status()
                    .canonical_reason()
                    .unwrap_or("no message")
                    .to_owned(),
                None => http::short_message(&body),
            };
            if status == 429 {
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                ModelError::RateLimited {
                    retry_after,
                    message,
                }
            } else {
                ModelError::Provider { status, message }
            }
        }
        other => ModelError::Transport(format!("cannot connect to Gemini Live: {other}")),
    }
}
