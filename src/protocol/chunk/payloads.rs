//! The payload of each chunk type, with its wire keys.

#[cfg(test)]
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

#[cfg(test)]
use super::super::json_util::keep_null;
use super::{FinishReason, ProviderMetadata, ToolMetadata};

// ---------------------------------------------------------------------------
// Payloads. Field names are the Rust spelling of the wire keys (camelCase on
// the wire); optional keys are omitted when `None`. Each derives `Default` so
// server code can write `ToolInputStart { tool_call_id, tool_name,
// ..Default::default() }`.
//
// Decoding is by hand (`chunk/decode.rs`), not derived: a derived `Deserialize`
// per payload put a copy of serde_json's map visitor per struct into the
// browser's wasm (with the message parts, ~20 KB gzip). Only the test build derives it,
// as the reference the hand-written decoder is checked against
// (`protocol::decode_tests`); the serde attributes that only concern decoding
// (`default`, `deserialize_with`) are there for that reference.
// ---------------------------------------------------------------------------

/// `start`: opens an assistant message. On a continuation the id must equal
/// the assistant message being continued, or the client duplicates it (§A.2
/// "How the message is seeded").
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct Start {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub message_metadata: Option<Value>,
}

/// `finish`: the message is complete.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct Finish {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub message_metadata: Option<Value>,
}

/// `abort`: the producer stopped early. `reason` is `ai@6.0.15`+.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct Abort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `error`: the client's `onError` throws on it, so the chat goes to status
/// `error`. Never put internals in `error_text`: it is shown to the user.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ErrorChunk {
    pub error_text: String,
}

/// `message-metadata`: deep-merged into `message.metadata`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct MessageMetadata {
    /// `z.unknown()` in the schema, which also accepts a missing key; that
    /// decodes as `null` here.
    #[serde(default)]
    pub message_metadata: Value,
}

/// `text-start`, `text-end`, `reasoning-start`, `reasoning-end`: open or close
/// the text/reasoning part with this `id`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct Boundary {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `text-delta`, `reasoning-delta`: append `delta` to the open part `id`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct Delta {
    pub id: String,
    pub delta: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `tool-input-start`: a tool call begins; its input streams next.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolInputStart {
    pub tool_call_id: String,
    pub tool_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    /// `true` makes the part a `dynamic-tool` (a tool the UI has no static
    /// type for) instead of `tool-<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `ai@6.0.39`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
    /// `ai@6.0.176`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_metadata: Option<ToolMetadata>,
}

/// `tool-input-delta`: raw JSON text of the input, re-parsed as partial JSON.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolInputDelta {
    pub tool_call_id: String,
    pub input_text_delta: String,
}

/// `tool-input-available`: the complete input. Needs no `tool-input-start`.
/// `provider_metadata` becomes the part's `callProviderMetadata`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolInputAvailable {
    pub tool_call_id: String,
    pub tool_name: String,
    /// `z.unknown()`: a missing key decodes as `null`.
    #[serde(default)]
    pub input: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `ai@6.0.176`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_metadata: Option<ToolMetadata>,
}

/// `tool-input-error`: the model produced input that failed validation; the
/// part goes to `output-error` with the bad input kept as `rawInput`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolInputError {
    pub tool_call_id: String,
    pub tool_name: String,
    #[serde(default)]
    pub input: Value,
    pub error_text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `ai@6.0.176`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_metadata: Option<ToolMetadata>,
}

/// `tool-approval-request`: the call waits for a human (§A.7). The part must
/// already exist on the client.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolApprovalRequest {
    pub approval_id: String,
    pub tool_call_id: String,
    /// HMAC over the call (`ai@6.0.202`+); dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// v7: what is being approved, app-defined (the part's `approval.descriptor`). Countersign
    /// puts the policy's ruling here (`{"countersign": …}`, [`super::grant::Ruling`]). Dropped
    /// in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_descriptor: Option<Value>,
    /// v7: why it is asked (the part's `approval.requestReason`), e.g. the rule that asks.
    /// Dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// v7: decided without the person (a policy rule or a grant); a
    /// [`ToolApprovalResponse`] follows at once. The whole chunk is left out in
    /// [`Dialect::V6Strict`], where it would read as a real request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_automatic: Option<bool>,
}

/// `tool-approval-response` (AI SDK v7): the answer to an approval, sent by the server when it
/// was decided without the person (`isAutomatic` request). Only in [`Dialect::Full`].
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolApprovalResponse {
    pub approval_id: String,
    pub approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
}

/// `tool-output-available`: the tool's result. `preliminary: true` marks a
/// partial result that a later output replaces.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolOutputAvailable {
    pub tool_call_id: String,
    /// `z.unknown()`: a missing key decodes as `null`.
    #[serde(default)]
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preliminary: Option<bool>,
    /// `ai@6.0.120`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
    /// `ai@6.0.176`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_metadata: Option<ToolMetadata>,
}

/// `tool-output-error`: the tool ran and failed.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolOutputError {
    pub tool_call_id: String,
    pub error_text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    /// `ai@6.0.120`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
    /// `ai@6.0.176`+; dropped in [`Dialect::V6Strict`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_metadata: Option<ToolMetadata>,
}

/// `tool-output-denied`: the user said no; the call never ran.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolOutputDenied {
    pub tool_call_id: String,
}

/// `source-url`: a cited web source.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct SourceUrl {
    pub source_id: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `source-document`: a cited document. `title` is required by the schema.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct SourceDocument {
    pub source_id: String,
    pub media_type: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `file`: a generated file; `url` may be a `data:` URL.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct File {
    pub url: String,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `data-<name>`: application data. With `transient: true` it only reaches
/// `onData` and is never stored; otherwise a part with the same name and `id`
/// is replaced in place, or a new part is pushed.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct DataChunk {
    /// The part of the wire `type` after `data-`. Carried by the tag, so it is
    /// not a key of its own.
    #[serde(skip)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `z.unknown()`: a missing key decodes as `null`.
    #[serde(default)]
    pub data: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transient: Option<bool>,
}

impl Boundary {
    /// A boundary without provider metadata.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            provider_metadata: None,
        }
    }
}

impl Delta {
    /// A delta without provider metadata.
    pub fn new(id: impl Into<String>, delta: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            delta: delta.into(),
            provider_metadata: None,
        }
    }
}
