//! OpenAI-compatible Chat Completions streaming: `POST {base}/chat/completions` with
//! `"stream": true` (protocols.md §B.6). One client for OpenAI, Ollama, vLLM, llama.cpp,
//! DeepSeek and Gemini's own compatibility endpoint, so it reads the union of their dialects.
//!
//! # Request
//!
//! `model`, `messages`, `tools` (`{"type": "function", "function": {name, description,
//! parameters}}`), `stream: true` and `stream_options: {"include_usage": true}` so the last chunk
//! carries token counts. `Authorization: Bearer <key>` only when a key is configured (local
//! servers need none).
//!
//! History maps to messages like this:
//!
//! * the system prompt → one `system` message;
//! * `User` → `user`, a plain string, or content parts when there are attachments: images as
//!   `image_url` (the data: or https URL as is); other attachment types are not portable across
//!   these servers, so they are replaced by a short text note (and a warning in the log);
//! * `Assistant` → `assistant` with its text (reasoning is not sent back: most servers reject or
//!   ignore it) and `tool_calls` with the provider's call id and the arguments as a JSON string;
//! * `ToolResults` → one `tool` message per result, `tool_call_id` = the id the provider gave that
//!   call (kept in [`ToolCall::provider_data`] as `{"openai": {"id": …}}`; our own id when there
//!   is none, e.g. history from another provider), `content` = [`ToolResult::model_view`] as JSON
//!   text.
//!
//! Gemini's compatibility layer puts its thought signature in `tool_calls[].extra_content`; that
//! object is kept verbatim in `provider_data` and sent back on the call, which is all Gemini 3
//! needs there.
//!
//! # Response
//!
//! `data: {"choices": [{"delta": {...}, "finish_reason": ...}], "usage": ...}` events, then
//! `data: [DONE]`. `delta.content` → [`ModelEvent::TextDelta`]; `delta.reasoning_content`
//! (DeepSeek, vLLM, llama.cpp) or `delta.reasoning` (OpenRouter, Ollama) →
//! [`ModelEvent::ReasoningDelta`]; `delta.tool_calls` are assembled by `index` (a missing
//! `index` — Gemini's layer — means "a new call when it has a new id, else the latest one") and
//! emitted whole, in index order, when the choice's `finish_reason` arrives (or at the end).
//! [`ModelEvent::Finish`] follows on `[DONE]` (or when the body ends), after the usage-only
//! chunk. An `{"error": ...}` event fails the step.
//!
//! **Invalid tool arguments.** When a call's assembled arguments are not JSON, the call is still
//! emitted, with `args` = the raw text as a JSON *string*. Tool schemas are objects, so the
//! runner's validation rejects it and the model receives an "invalid arguments" tool error it can
//! correct on the next step, instead of the whole turn dying on a protocol error. (A `{"_raw":
//! …}` object was rejected: it could pass a schema whose properties are all optional and run a
//! tool with defaults.) On replay the raw text is sent back as the call's `arguments`, exactly as
//! the model wrote it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::{self, PreparedRequest, ProviderHttp, WireDecoder};
use super::{ProviderConfigError, ProviderKey};
use crate::agent::history::{AssistantPart, Attachment, ContextRole, HistoryItem, ToolCall};
use crate::agent::model::{
    Model, ModelError, ModelEvent, ModelRequest, ModelStream, ToolDeclaration, Usage,
};
use crate::protocol::FinishReason;

/// The `provider_data` namespace of this provider.
const NAMESPACE: &str = "openai";

/// Settings of an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// `None` for servers without authentication (Ollama, llama.cpp, a local vLLM).
    pub api_key: Option<ProviderKey>,
    /// The API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    pub model: String,
    pub http: ProviderHttp,
}

/// A model behind an OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiModel {
    config: OpenAiConfig,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
}

impl OpenAiModel {
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderConfigError> {
        use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

        let client =
            http::client(&config.http).map_err(|e| ProviderConfigError::Client(e.to_string()))?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    ProviderConfigError::Client(
                        "the OpenAI API key has characters an HTTP header cannot carry".into(),
                    )
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(Self {
            config,
            client,
            headers,
        })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The endpoint's host (and port), for the label.
    fn host(&self) -> &str {
        let url = &self.config.base_url;
        let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
        rest.split('/').next().unwrap_or(rest)
    }
}

impl Model for OpenAiModel {
    fn label(&self) -> String {
        format!("OpenAI-compatible {} ({})", self.config.model, self.host())
    }

    fn model_version(&self) -> String {
        self.config.model.clone()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = build_request(&request, &self.config.model);
        let body = match serde_json::to_vec(&body) {
            Ok(body) => body,
            Err(e) => {
                return http::failed(ModelError::Protocol(format!(
                    "cannot encode the request: {e}"
                )));
            }
        };
        http::sse_stream(
            PreparedRequest {
                client: self.client.clone(),
                url: format!(
                    "{}/chat/completions",
                    self.config.base_url.trim_end_matches('/')
                ),
                headers: self.headers.clone(),
                body,
            },
            self.config.http.clone(),
            OpenAiDecoder::default,
            map_http_error,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Wire types (snake_case on the wire)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<Message>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool>,
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message {
    System {
        content: String,
    },
    User {
        content: UserContent,
    },
    Assistant {
        /// `null` when the step only called tools.
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum UserContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Debug, Serialize)]
struct WireToolCall {
    id: String,
    r#type: &'static str,
    function: WireFunction,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_content: Option<Value>,
}

#[derive(Debug, Serialize)]
struct WireFunction {
    name: String,
    arguments: String,
}

#[derive(Debug, Serialize)]
struct WireTool {
    r#type: &'static str,
    function: FunctionSpec,
}

#[derive(Debug, Serialize)]
struct FunctionSpec {
    name: String,
    description: String,
    parameters: Value,
}

/// One `chat.completion.chunk`.
#[derive(Debug, Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// A string on the servers we know; kept loose so an object-shaped variant is ignored rather
    /// than failing the stream.
    #[serde(default)]
    reasoning_content: Option<Value>,
    #[serde(default)]
    reasoning: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
    #[serde(default)]
    extra_content: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// History → request
// ---------------------------------------------------------------------------------------------

fn build_request<'a>(request: &ModelRequest, model: &'a str) -> ChatRequest<'a> {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(Message::System {
            content: request.system.clone(),
        });
    }
    let mut last_calls: Vec<&ToolCall> = Vec::new();
    for item in request.history.iter() {
        match item {
            HistoryItem::User { text, attachments } => messages.push(Message::User {
                content: user_content(text, attachments),
            }),
            HistoryItem::Assistant { parts } => {
                last_calls.clear();
                let mut text = String::new();
                let mut tool_calls = Vec::new();
                for part in parts {
                    match part {
                        AssistantPart::Text { text: t, .. } => text.push_str(t),
                        AssistantPart::Reasoning { .. } => {}
                        AssistantPart::ToolCall { call } => {
                            last_calls.push(call);
                            tool_calls.push(wire_call(call));
                        }
                    }
                }
                if text.is_empty() && tool_calls.is_empty() {
                    continue;
                }
                messages.push(Message::Assistant {
                    content: (!text.is_empty()).then_some(text),
                    tool_calls,
                });
            }
            // A client's copy of earlier messages (ADR 0020): plain text, never calls.
            HistoryItem::Context { speaker, text } => messages.push(match speaker {
                ContextRole::User => Message::User {
                    content: UserContent::Text(text.clone()),
                },
                ContextRole::Assistant => Message::Assistant {
                    content: Some(text.clone()),
                    tool_calls: Vec::new(),
                },
            }),
            HistoryItem::ToolResults { results } => {
                for (i, result) in results.iter().enumerate() {
                    let call = last_calls
                        .iter()
                        .find(|c| c.id == result.call_id)
                        .or_else(|| last_calls.get(i));
                    let view = result.model_view();
                    messages.push(Message::Tool {
                        tool_call_id: call.map_or_else(|| result.call_id.clone(), |c| call_id(c)),
                        content: match view {
                            Value::String(s) => s,
                            other => other.to_string(),
                        },
                    });
                }
            }
        }
    }
    ChatRequest {
        model,
        messages,
        tools: request.tools.iter().map(wire_tool).collect(),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
    }
}

fn wire_tool(tool: &ToolDeclaration) -> WireTool {
    WireTool {
        r#type: "function",
        function: FunctionSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool.parameters.clone(),
        },
    }
}

/// The provider's id for a call, or ours when it has none.
fn call_id(call: &ToolCall) -> String {
    openai_data(call)
        .and_then(|d| d.get("id"))
        .and_then(Value::as_str)
        .map_or_else(|| call.id.clone(), str::to_owned)
}

fn openai_data(call: &ToolCall) -> Option<&Value> {
    call.provider_data.as_ref()?.get(NAMESPACE)
}

fn wire_call(call: &ToolCall) -> WireToolCall {
    WireToolCall {
        id: call_id(call),
        r#type: "function",
        function: WireFunction {
            name: call.name.clone(),
            // Raw (unparseable) arguments go back exactly as the model wrote them.
            arguments: match &call.args {
                Value::String(raw) => raw.clone(),
                other => other.to_string(),
            },
        },
        extra_content: openai_data(call)
            .and_then(|d| d.get("extra_content"))
            .cloned(),
    }
}

fn user_content(text: &str, attachments: &[Attachment]) -> UserContent {
    if attachments.is_empty() {
        return UserContent::Text(text.to_owned());
    }
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(ContentPart::Text {
            text: text.to_owned(),
        });
    }
    for attachment in attachments {
        if attachment.media_type.starts_with("image/") {
            parts.push(ContentPart::ImageUrl {
                image_url: ImageUrl {
                    url: attachment.url.clone(),
                },
            });
        } else {
            let name = attachment
                .filename
                .as_deref()
                .unwrap_or(attachment.media_type.as_str());
            tracing::warn!(media_type = %attachment.media_type, "attachment not sent: OpenAI-compatible chat takes images only");
            parts.push(ContentPart::Text {
                text: format!(
                    "[Attachment {name} ({}) was not sent: this model endpoint accepts images only.]",
                    attachment.media_type
                ),
            });
        }
    }
    UserContent::Parts(parts)
}

// ---------------------------------------------------------------------------------------------
// Response → events
// ---------------------------------------------------------------------------------------------

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
    extra_content: Option<Value>,
}

#[derive(Debug, Default)]
struct OpenAiDecoder {
    saw_chunk: bool,
    /// By `index`, so parallel calls come out in the model's order.
    calls: BTreeMap<usize, PartialCall>,
    /// The index the latest delta went to (for deltas without `index`).
    latest: Option<usize>,
    /// How many calls were emitted.
    emitted: usize,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
}

impl WireDecoder for OpenAiDecoder {
    fn data(&mut self, data: &str) -> Result<Vec<ModelEvent>, ModelError> {
        let chunk: StreamChunk = serde_json::from_str(data)
            .map_err(|e| ModelError::Protocol(format!("invalid chat completion chunk: {e}")))?;
        if let Some(error) = chunk.error {
            return Err(error_from_value(&error, None, None));
        }
        self.saw_chunk = true;
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        let mut events = Vec::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta {
                self.delta(delta, &mut events);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
                self.flush_calls(&mut events);
            }
        }
        Ok(events)
    }

    fn done(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        self.end()
    }

    fn end(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        if !self.saw_chunk {
            return Err(ModelError::Protocol(
                "the chat completion stream ended without any chunk".into(),
            ));
        }
        let mut events = Vec::new();
        self.flush_calls(&mut events);
        let reason = match &self.finish_reason {
            Some(reason) => map_finish_reason(reason, self.emitted > 0),
            None => {
                tracing::warn!("the chat completion stream ended without a finish_reason");
                if self.emitted > 0 {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Other
                }
            }
        };
        let usage = self.usage.map(usage).unwrap_or_default();
        events.push(ModelEvent::Finish { reason, usage });
        Ok(events)
    }

    fn stray_json(&mut self, value: Value) -> Result<Vec<ModelEvent>, ModelError> {
        match value.get("error") {
            Some(error) => Err(error_from_value(error, None, None)),
            None if value.get("choices").is_some() => Err(ModelError::Protocol(
                "the server sent a complete chat completion instead of an event stream \
                 (it ignored \"stream\": true)"
                    .into(),
            )),
            None => {
                tracing::debug!("ignoring JSON outside the event stream");
                Ok(Vec::new())
            }
        }
    }
}

impl OpenAiDecoder {
    fn delta(&mut self, delta: Delta, events: &mut Vec<ModelEvent>) {
        for reasoning in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            if let Value::String(text) = reasoning
                && !text.is_empty()
            {
                events.push(ModelEvent::ReasoningDelta {
                    text,
                    provider_data: None,
                });
            }
        }
        if let Some(text) = delta.content
            && !text.is_empty()
        {
            events.push(ModelEvent::TextDelta(text));
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let index = self.call_index(&call);
            self.latest = Some(index);
            let partial = self.calls.entry(index).or_default();
            if partial.id.is_none() {
                partial.id = call.id.filter(|id| !id.is_empty());
            }
            if let Some(function) = call.function {
                if partial.name.is_empty()
                    && let Some(name) = function.name
                {
                    partial.name = name;
                }
                if let Some(arguments) = function.arguments {
                    partial.arguments.push_str(&arguments);
                }
            }
            if call.extra_content.is_some() {
                partial.extra_content = call.extra_content;
            }
        }
    }

    /// Where a delta belongs: its `index`; without one, a new slot for a new id, else the latest.
    fn call_index(&self, call: &ToolCallDelta) -> usize {
        if let Some(index) = call.index {
            return index;
        }
        let next = self.calls.keys().next_back().map_or(0, |k| k + 1);
        match (&call.id, self.latest) {
            (Some(id), Some(latest))
                if self.calls.get(&latest).and_then(|c| c.id.as_ref()) == Some(id) =>
            {
                latest
            }
            (None, Some(latest)) => latest,
            _ => next,
        }
    }

    fn flush_calls(&mut self, events: &mut Vec<ModelEvent>) {
        for (_, call) in std::mem::take(&mut self.calls) {
            self.emitted += 1;
            events.push(ModelEvent::ToolCall(finish_call(call)));
        }
        self.latest = None;
    }
}

fn finish_call(call: PartialCall) -> ToolCall {
    let args = if call.arguments.trim().is_empty() {
        json!({})
    } else {
        match serde_json::from_str::<Value>(&call.arguments) {
            Ok(args) => args,
            Err(e) => {
                tracing::warn!(tool = %call.name, error = %e, "tool call arguments are not JSON; passing them on as text");
                Value::String(call.arguments)
            }
        }
    };
    let mut data = serde_json::Map::new();
    if let Some(id) = &call.id {
        data.insert("id".into(), Value::String(id.clone()));
    }
    if let Some(extra) = call.extra_content {
        data.insert("extra_content".into(), extra);
    }
    ToolCall {
        id: call.id.unwrap_or_default(),
        name: call.name,
        args,
        provider_data: (!data.is_empty()).then(|| json!({ NAMESPACE: data })),
    }
}

/// `finish_reason` → ours. Some servers (older Ollama) say `stop` in a step that called tools.
fn map_finish_reason(reason: &str, made_calls: bool) -> FinishReason {
    match reason {
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        _ if made_calls => FinishReason::ToolCalls,
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

fn usage(wire: WireUsage) -> Usage {
    Usage {
        input_tokens: wire.prompt_tokens,
        output_tokens: wire.completion_tokens,
        total_tokens: wire.total_tokens,
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

fn map_http_error(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: &str,
) -> ModelError {
    let error = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").cloned());
    match error {
        Some(error) => error_from_value(&error, Some(status.as_u16()), Some(headers)),
        None => {
            let message = if body.trim().is_empty() {
                status.canonical_reason().unwrap_or("no message").to_owned()
            } else {
                http::short_message(body)
            };
            classify(status.as_u16(), message, Some(headers))
        }
    }
}

/// `{"message", "type", "code"}` (OpenAI, vLLM) or a bare string (Ollama). The HTTP status wins;
/// a mid-stream error uses a numeric `code` when it is an HTTP status, else counts as 500.
fn error_from_value(
    error: &Value,
    http_status: Option<u16>,
    headers: Option<&reqwest::header::HeaderMap>,
) -> ModelError {
    let message = match error {
        Value::String(text) => text.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| other.to_string()),
    };
    let code = error
        .get("code")
        .and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()))
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (100..=599).contains(c));
    let status = http_status.or(code).unwrap_or(500);
    classify(status, http::short_message(&message), headers)
}

fn classify(
    status: u16,
    message: String,
    headers: Option<&reqwest::header::HeaderMap>,
) -> ModelError {
    if status == 429 {
        ModelError::RateLimited {
            retry_after: headers.and_then(http::retry_after_header),
            message,
        }
    } else {
        ModelError::Provider { status, message }
    }
}

#[cfg(test)]
mod tests;
