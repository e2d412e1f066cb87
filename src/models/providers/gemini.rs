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

mod decode;
mod errors;
mod request;
mod wire;

use decode::GeminiDecoder;
use errors::map_http_error;
use request::build_request;

// What the Live provider (`gemini_live`) shares with this one.
pub(super) use decode::gemini_usage;
pub(super) use request::{as_object, contents, declaration};
pub(super) use wire::{Content, FunctionCall, FunctionDeclaration, Part};

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

#[cfg(test)]
mod tests;
