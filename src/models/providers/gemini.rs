//! Gemini REST: `POST {base}/models/{model}:streamGenerateContent?alt=sse` (protocols.md §B).
//!
//! # Request (§B.1, §B.3)
//!
//! `systemInstruction`, `contents`, `tools[].functionDeclarations` (our schemas are JSON Schema,
//! so they go in `parametersJsonSchema`, not the OpenAPI-subset `parameters`) and, when asked,
//! `generationConfig.thinkingConfig.includeThoughts`. The key travels in `x-goog-api-key`,
//! never in the URL, so no log line or error message can carry it.
//!
//! History maps to contents like this:
//!
//! * `User` → a `user` content: the text, then each attachment (`data:` URL → `inlineData`,
//!   other URLs → `fileData`).
//! * `Assistant` → a `model` content with its parts **exactly as received**: text, thought
//!   summaries (`thought: true`) with their signature, and each `functionCall` with the
//!   `thoughtSignature` and `id` kept in [`ToolCall::provider_data`] (`{"google": {...}}`).
//! * `ToolResults` → a `user` content of `functionResponse` parts, one per call, in order, named
//!   after the tool, `response` = [`ToolResult::model_view`] (wrapped as `{"result": v}` when it
//!   is not an object: Gemini wants a `Struct`), with the call's Gemini `id` when it had one.
//!   Adjacent `user` contents (results followed by a new message after an interruption) are
//!   merged into one.
//!
//! Gemini 3 rejects a replayed step whose function calls carry no signature (§B.4). A
//! signature can only be missing when the history was not produced by Gemini (the demo model,
//! the other provider) or was damaged; for Gemini 3 models the documented sentinel
//! `skip_thought_signature_validator` is then put on the step's first call, with a warning,
//! rather than failing the turn with a 400.
//!
//! # Response (§B.2)
//!
//! Each SSE event is a `GenerateContentResponse`. Text parts become
//! [`ModelEvent::TextDelta`], `thought: true` parts [`ModelEvent::ReasoningDelta`] (with the
//! part's signature, if any, as provider data), each `functionCall` (always whole on this API)
//! one [`ModelEvent::ToolCall`]. There is no `[DONE]`: the step ends with the body, and then
//! [`ModelEvent::Finish`] carries the last `finishReason` and `usageMetadata` seen. An
//! `{"error": {...}}` event, or the same object printed raw without `data:`, fails the step.
//!
//! A signature on a plain *text* part (Gemini 2.5 signs the first part after its thoughts;
//! Gemini 3 signs the last part of a step without calls, often an empty text part) becomes
//! [`ModelEvent::TextData`] and is kept on that text in history
//! ([`AssistantPart::Text`]`.provider_data`), then sent back on the same part — even an empty one
//! — so the model keeps its reasoning context across steps, approval waits and restarts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::http::{self, PreparedRequest, ProviderHttp, WireDecoder};
use super::{ProviderConfigError, ProviderKey};
use crate::agent::history::{AssistantPart, Attachment, ContextRole, HistoryItem, ToolCall};
use crate::agent::model::{
    Model, ModelError, ModelEvent, ModelRequest, ModelStream, ToolDeclaration, Usage,
};
use crate::protocol::FinishReason;

/// The documented stand-in for a lost thought signature (Gemini 3).
pub const SKIP_SIGNATURE_VALIDATOR: &str = "skip_thought_signature_validator";

/// The `provider_data` namespace of this provider.
const NAMESPACE: &str = "google";

/// Settings of the Gemini REST provider.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiConfig {
    pub api_key: ProviderKey,
    /// E.g. `https://generativelanguage.googleapis.com/v1beta`, without a trailing slash.
    pub base_url: String,
    /// E.g. `gemini-2.5-flash` (a leading `models/` is accepted).
    pub model: String,
    /// Ask for thought summaries (`thinkingConfig.includeThoughts`); they stream as reasoning.
    pub include_thoughts: bool,
    pub http: ProviderHttp,
}

/// A Gemini model behind the REST API.
pub struct GeminiModel {
    config: GeminiConfig,
    model: String,
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
}

impl GeminiModel {
    pub fn new(config: GeminiConfig) -> Result<Self, ProviderConfigError> {
        use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};

        let client =
            http::client(&config.http).map_err(|e| ProviderConfigError::Client(e.to_string()))?;
        let mut key = HeaderValue::from_str(config.api_key.expose()).map_err(|_| {
            ProviderConfigError::Client(
                "the Gemini API key has characters an HTTP header cannot carry".into(),
            )
        })?;
        key.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert("x-goog-api-key", key);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let model = config
            .model
            .strip_prefix("models/")
            .unwrap_or(&config.model)
            .to_owned();
        Ok(Self {
            config,
            model,
            client,
            headers,
        })
    }

    pub fn config(&self) -> &GeminiConfig {
        &self.config
    }

    fn url(&self) -> String {
        format!(
            "{}/models/{}:streamGenerateContent?alt=sse",
            self.config.base_url.trim_end_matches('/'),
            self.model
        )
    }
}

impl Model for GeminiModel {
    fn label(&self) -> String {
        format!("Gemini {} (REST)", self.model)
    }

    fn model_version(&self) -> String {
        self.model.clone()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = build_request(&request, &self.model, self.config.include_thoughts);
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
                url: self.url(),
                headers: self.headers.clone(),
                body,
            },
            self.config.http.clone(),
            GeminiDecoder::default,
            map_http_error,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Wire types (camelCase on the wire). One `Part` type serves requests and responses: every field
// is optional and unknown response fields (`inlineData` of image models, `executableCode`, …)
// are ignored.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerateContentRequest {
    contents: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfig>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Content {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) role: Option<String>,
    #[serde(default)]
    pub(super) parts: Vec<Part>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) thought: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) thought_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) function_call: Option<FunctionCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) function_response: Option<FunctionResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) inline_data: Option<Blob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) file_data: Option<FileData>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FunctionCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) id: Option<String>,
    pub(super) name: String,
    #[serde(default)]
    pub(super) args: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FunctionResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) id: Option<String>,
    pub(super) name: String,
    pub(super) response: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Blob {
    mime_type: String,
    data: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileData {
    mime_type: String,
    file_uri: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Tool {
    function_declarations: Vec<FunctionDeclaration>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FunctionDeclaration {
    name: String,
    description: String,
    parameters_json_schema: Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    thinking_config: ThinkingConfig,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    include_thoughts: bool,
}

/// One SSE event of the response.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StreamChunk {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    index: u32,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    total_token_count: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// `{"error": {"code": 429, "message": "…", "status": "RESOURCE_EXHAUSTED", "details": […]}}`
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    details: Vec<Value>,
}

// ---------------------------------------------------------------------------------------------
// History → request
// ---------------------------------------------------------------------------------------------

fn build_request(
    request: &ModelRequest,
    model: &str,
    include_thoughts: bool,
) -> GenerateContentRequest {
    let system_instruction = (!request.system.is_empty()).then(|| Content {
        role: None,
        parts: vec![Part {
            text: Some(request.system.clone()),
            ..Part::default()
        }],
    });
    let tools = if request.tools.is_empty() {
        Vec::new()
    } else {
        vec![Tool {
            function_declarations: request.tools.iter().map(declaration).collect(),
        }]
    };
    GenerateContentRequest {
        contents: contents(&request.history, is_gemini_3_or_later(model)),
        system_instruction,
        tools,
        generation_config: include_thoughts.then_some(GenerationConfig {
            thinking_config: ThinkingConfig {
                include_thoughts: true,
            },
        }),
    }
}

pub(super) fn declaration(tool: &ToolDeclaration) -> FunctionDeclaration {
    FunctionDeclaration {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters_json_schema: tool.parameters.clone(),
    }
}

/// `gemini-3-flash-preview`, `gemini-3.1-pro`, … (the models that validate signatures).
fn is_gemini_3_or_later(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("gemini-") else {
        return false;
    };
    let major: String = rest.chars().take_while(char::is_ascii_digit).collect();
    major.parse::<u32>().is_ok_and(|major| major >= 3)
}

pub(super) fn contents(history: &[HistoryItem], sign_missing: bool) -> Vec<Content> {
    let mut out: Vec<Content> = Vec::new();
    // The calls of the latest assistant item, to find each result's Gemini id.
    let mut last_calls: Vec<&ToolCall> = Vec::new();
    let mut injected = 0usize;
    for item in history {
        let (role, parts) = match item {
            HistoryItem::User { text, attachments } => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(text_part(text.clone()));
                }
                parts.extend(attachments.iter().map(attachment_part));
                ("user", parts)
            }
            HistoryItem::Assistant { parts } => {
                last_calls = parts
                    .iter()
                    .filter_map(|p| match p {
                        AssistantPart::ToolCall { call } => Some(call),
                        _ => None,
                    })
                    .collect();
                let mut parts: Vec<Part> = parts.iter().filter_map(model_part).collect();
                if sign_missing && sign_first_call(&mut parts) {
                    injected += 1;
                }
                ("model", parts)
            }
            HistoryItem::ToolResults { results } => {
                let parts = results
                    .iter()
                    .enumerate()
                    .map(|(i, result)| {
                        let call = last_calls
                            .iter()
                            .find(|c| c.id == result.call_id)
                            .or_else(|| last_calls.get(i));
                        Part {
                            function_response: Some(FunctionResponse {
                                id: call.and_then(|c| google_str(&c.provider_data, "id")),
                                name: result.name.clone(),
                                response: as_object(result.model_view(), "result"),
                            }),
                            ..Part::default()
                        }
                    })
                    .collect();
                ("user", parts)
            }
            // A client's copy of earlier messages (ADR 0020): plain text, never calls.
            HistoryItem::Context { speaker, text } => {
                let role = match speaker {
                    ContextRole::User => "user",
                    ContextRole::Assistant => "model",
                };
                (role, vec![text_part(text.clone())])
            }
        };
        if parts.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if role == "user" && last.role.as_deref() == Some("user") => {
                last.parts.extend(parts)
            }
            _ => out.push(Content {
                role: Some(role.to_owned()),
                parts,
            }),
        }
    }
    if injected > 0 {
        tracing::warn!(
            steps = injected,
            "replaying Gemini function calls without a thought signature (history from another \
             model?); sent the documented skip_thought_signature_validator instead"
        );
    }
    out
}

fn text_part(text: String) -> Part {
    Part {
        text: Some(text),
        ..Part::default()
    }
}

/// One part of a model step as Gemini sent it. Empty text carries nothing and is left out.
fn model_part(part: &AssistantPart) -> Option<Part> {
    match part {
        AssistantPart::Text {
            text,
            provider_data,
        } => {
            let signature = google_str(provider_data, "thoughtSignature");
            (!text.is_empty() || signature.is_some()).then(|| Part {
                text: Some(text.clone()),
                thought_signature: signature,
                ..Part::default()
            })
        }
        AssistantPart::Reasoning {
            text,
            provider_data,
        } => (!text.is_empty()).then(|| Part {
            text: Some(text.clone()),
            thought: Some(true),
            thought_signature: google_str(provider_data, "thoughtSignature"),
            ..Part::default()
        }),
        AssistantPart::ToolCall { call } => Some(Part {
            function_call: Some(FunctionCall {
                id: google_str(&call.provider_data, "id"),
                name: call.name.clone(),
                args: Some(as_object(call.args.clone(), "raw_arguments")),
            }),
            thought_signature: google_str(&call.provider_data, "thoughtSignature"),
            ..Part::default()
        }),
    }
}

/// Puts the sentinel on the first function call of a step none of whose calls is signed.
/// Returns whether it did.
fn sign_first_call(parts: &mut [Part]) -> bool {
    let mut calls = parts.iter_mut().filter(|p| p.function_call.is_some());
    let Some(first) = calls.next() else {
        return false;
    };
    if first.thought_signature.is_some() {
        return false;
    }
    if calls.any(|p| p.thought_signature.is_some()) {
        return false;
    }
    first.thought_signature = Some(SKIP_SIGNATURE_VALIDATOR.to_owned());
    true
}

/// A JSON object as is; anything else wrapped as `{key: value}` (Gemini wants a `Struct`).
pub(super) fn as_object(value: Value, key: &str) -> Value {
    match value {
        Value::Object(_) => value,
        other => json!({ key: other }),
    }
}

/// `provider_data.google.<key>` as a string.
fn google_str(provider_data: &Option<Value>, key: &str) -> Option<String> {
    provider_data
        .as_ref()?
        .get(NAMESPACE)?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

/// `{"google": {...}}` with the given fields, or `None` when there are none.
fn google_data(fields: &[(&str, Option<&String>)]) -> Option<Value> {
    let map: Map<String, Value> = fields
        .iter()
        .filter_map(|(k, v)| v.map(|v| ((*k).to_owned(), Value::String(v.clone()))))
        .collect();
    (!map.is_empty()).then(|| json!({ NAMESPACE: map }))
}

fn attachment_part(attachment: &Attachment) -> Part {
    match DataUrl::parse(&attachment.url) {
        Some(data) => Part {
            inline_data: Some(Blob {
                mime_type: if attachment.media_type.is_empty() {
                    data.media_type.to_owned()
                } else {
                    attachment.media_type.clone()
                },
                data: data.base64(),
            }),
            ..Part::default()
        },
        None => Part {
            file_data: Some(FileData {
                mime_type: attachment.media_type.clone(),
                file_uri: attachment.url.clone(),
            }),
            ..Part::default()
        },
    }
}

/// A `data:` URL, split. Browsers produce `data:<type>;base64,<data>`; a plain (percent-encoded)
/// one is accepted too and base64-encoded here.
struct DataUrl<'a> {
    media_type: &'a str,
    is_base64: bool,
    data: &'a str,
}

impl<'a> DataUrl<'a> {
    fn parse(url: &'a str) -> Option<Self> {
        let rest = url
            .strip_prefix("data:")
            .or_else(|| url.strip_prefix("DATA:"))?;
        let (meta, data) = rest.split_once(',')?;
        let is_base64 = meta
            .rsplit(';')
            .next()
            .is_some_and(|p| p.eq_ignore_ascii_case("base64"));
        let media_type = meta.split(';').next().unwrap_or_default();
        Some(Self {
            media_type,
            is_base64,
            data,
        })
    }

    fn base64(&self) -> String {
        if self.is_base64 {
            self.data.to_owned()
        } else {
            use base64::Engine;
            let bytes: Vec<u8> = percent_encoding::percent_decode_str(self.data).collect();
            base64::engine::general_purpose::STANDARD.encode(bytes)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Response → events
// ---------------------------------------------------------------------------------------------

/// Decodes one attempt's stream.
#[derive(Debug, Default)]
struct GeminiDecoder {
    /// Any response chunk arrived.
    saw_chunk: bool,
    /// Function calls emitted so far.
    calls: usize,
    finish_reason: Option<String>,
    block_reason: Option<String>,
    usage: Option<UsageMetadata>,
}

impl WireDecoder for GeminiDecoder {
    fn data(&mut self, data: &str) -> Result<Vec<ModelEvent>, ModelError> {
        let chunk: StreamChunk = serde_json::from_str(data)
            .map_err(|e| ModelError::Protocol(format!("invalid Gemini stream event: {e}")))?;
        if let Some(error) = chunk.error {
            return Err(error_from_body(&error, None, None));
        }
        self.saw_chunk = true;
        if let Some(usage) = chunk.usage_metadata {
            self.usage = Some(usage);
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            self.block_reason = Some(reason);
        }
        let mut events = Vec::new();
        for candidate in chunk.candidates.into_iter().filter(|c| c.index == 0) {
            if let Some(reason) = candidate.finish_reason {
                self.finish_reason = Some(reason);
            }
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.part(part, &mut events);
            }
        }
        Ok(events)
    }

    fn done(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        // Gemini never sends `[DONE]`; a proxy that adds one ends the step like the body's end.
        self.end()
    }

    fn end(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        if !self.saw_chunk {
            return Err(ModelError::Protocol(
                "the Gemini stream ended without any response".into(),
            ));
        }
        let reason = match (&self.finish_reason, &self.block_reason) {
            (Some(reason), _) => map_finish_reason(reason, self.calls > 0),
            (None, Some(_)) => FinishReason::ContentFilter,
            (None, None) => {
                tracing::warn!("the Gemini stream ended without a finishReason");
                if self.calls > 0 {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Other
                }
            }
        };
        let usage = self.usage.map(usage).unwrap_or_default();
        Ok(vec![ModelEvent::Finish { reason, usage }])
    }

    fn stray_json(&mut self, value: Value) -> Result<Vec<ModelEvent>, ModelError> {
        match error_in(&value) {
            Some(error) => Err(error_from_body(&error, None, None)),
            None => {
                tracing::debug!("ignoring JSON outside the Gemini event stream");
                Ok(Vec::new())
            }
        }
    }
}

impl GeminiDecoder {
    fn part(&mut self, part: Part, events: &mut Vec<ModelEvent>) {
        let signature = part.thought_signature;
        if let Some(call) = part.function_call {
            self.calls += 1;
            events.push(ModelEvent::ToolCall(ToolCall {
                id: call.id.clone().unwrap_or_default(),
                name: call.name,
                args: call.args.unwrap_or_else(|| json!({})),
                provider_data: google_data(&[
                    ("thoughtSignature", signature.as_ref()),
                    ("id", call.id.as_ref()),
                ]),
            }));
            return;
        }
        let text = part.text.unwrap_or_default();
        if part.thought == Some(true) {
            if text.is_empty() {
                if signature.is_some() {
                    tracing::debug!("dropping the signature of an empty Gemini thought part");
                }
                return;
            }
            events.push(ModelEvent::ReasoningDelta {
                text,
                provider_data: google_data(&[("thoughtSignature", signature.as_ref())]),
            });
            return;
        }
        if !text.is_empty() {
            events.push(ModelEvent::TextDelta(text));
        } else if part.inline_data.is_some() || part.file_data.is_some() {
            tracing::debug!("ignoring a Gemini media part");
        }
        if let Some(data) = google_data(&[("thoughtSignature", signature.as_ref())]) {
            events.push(ModelEvent::TextData(data));
        }
    }
}

/// Gemini's `finishReason` → ours (§B.2). `STOP` in a step that called functions is
/// `ToolCalls`: Gemini says `STOP` either way.
fn map_finish_reason(reason: &str, made_calls: bool) -> FinishReason {
    match reason {
        "STOP" | "FINISH_REASON_UNSPECIFIED" if made_calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        "MALFORMED_FUNCTION_CALL" => FinishReason::Error,
        _ if made_calls => FinishReason::ToolCalls,
        _ => FinishReason::Other,
    }
}

fn usage(meta: UsageMetadata) -> Usage {
    gemini_usage(
        meta.prompt_token_count,
        meta.candidates_token_count,
        meta.thoughts_token_count,
        meta.total_token_count,
    )
}

/// Gemini's token counts as ours (REST and Live). Thought tokens are billed as output, so they
/// count as output.
pub(super) fn gemini_usage(
    prompt: Option<u64>,
    response: Option<u64>,
    thoughts: Option<u64>,
    total: Option<u64>,
) -> Usage {
    let output = match (response, thoughts) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    Usage {
        input_tokens: prompt,
        output_tokens: output,
        total_tokens: total,
    }
}

// ---------------------------------------------------------------------------------------------
// Errors (§B.5)
// ---------------------------------------------------------------------------------------------

/// The `error` object of a body: `{"error": {...}}` or, on some endpoints, `[{"error": {...}}]`.
fn error_in(value: &Value) -> Option<ErrorBody> {
    let value = match value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let error = value.get("error")?;
    Some(
        serde_json::from_value(error.clone()).unwrap_or_else(|_| ErrorBody {
            message: Some(error.to_string()),
            ..ErrorBody::default()
        }),
    )
}

fn map_http_error(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: &str,
) -> ModelError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    match parsed.as_ref().and_then(error_in) {
        Some(error) => error_from_body(&error, Some(status.as_u16()), Some(headers)),
        None => {
            let message = if body.trim().is_empty() {
                status.canonical_reason().unwrap_or("no message").to_owned()
            } else {
                http::short_message(body)
            };
            if status.as_u16() == 429 {
                ModelError::RateLimited {
                    retry_after: http::retry_after_header(headers),
                    message,
                }
            } else {
                ModelError::Provider {
                    status: status.as_u16(),
                    message,
                }
            }
        }
    }
}

/// An error object → [`ModelError`]. The HTTP status wins over the object's `code`; a mid-stream
/// error without a usable code counts as a server error (500).
fn error_from_body(
    error: &ErrorBody,
    http_status: Option<u16>,
    headers: Option<&reqwest::header::HeaderMap>,
) -> ModelError {
    let status = http_status
        .or_else(|| error.code.and_then(|c| u16::try_from(c).ok()))
        .filter(|s| (100..=599).contains(s))
        .unwrap_or(500);
    let text = error.message.as_deref().unwrap_or("no message");
    let message = http::short_message(&match &error.status {
        Some(code) => format!("{code}: {text}"),
        None => text.to_owned(),
    });
    if status == 429 {
        ModelError::RateLimited {
            retry_after: retry_delay(&error.details)
                .or_else(|| headers.and_then(http::retry_after_header)),
            message,
        }
    } else {
        ModelError::Provider { status, message }
    }
}

/// `google.rpc.RetryInfo.retryDelay` (`"34.4s"`) from an error's details.
fn retry_delay(details: &[Value]) -> Option<std::time::Duration> {
    details.iter().find_map(|detail| {
        let delay = detail.get("retryDelay")?.as_str()?;
        let seconds: f64 = delay.trim().strip_suffix('s')?.parse().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| std::time::Duration::from_secs_f64(seconds))
    })
}

#[cfg(test)]
mod tests;
