//! `UIMessage`: the chat history as `useChat` stores it and sends it back.
//!
//! The browser keeps the conversation as a list of [`UiMessage`]s and posts the
//! *whole* list with every request (protocols.md §A.5), so this shape is both
//! the persistence format and the request format. It mirrors
//! `packages/ai/src/ui/ui-messages.ts` (`ai@6.0.264`): parts are discriminated
//! by `type`, tool parts by the open-ended `tool-<toolName>` prefix.
//!
//! Decoding rules match [`super::chunk`]: a part whose `type` is unknown is kept
//! verbatim as [`UiPart::Unknown`]; a known part with broken fields is an error,
//! because it would otherwise silently drop something the user saw (an
//! approval, a tool result).
//!
//! The parts are decoded by hand (`message/decode.rs`) rather than with a derived
//! `Deserialize` per part struct, which cost the browser's wasm one copy of serde_json's
//! map visitor each. Only the test build derives `Deserialize` on them, as the reference the
//! hand-written decoder is checked against (`protocol::decode_tests`); the serde attributes
//! that only concern decoding (`default`, `deserialize_with`) are there for that reference.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::chunk::{ProviderMetadata, ToolMetadata};
use super::json_util::{TagError, Tagged, keep_null, split_tagged};

mod decode;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    System,
}

/// One chat message (`UIMessage`): `{id, role, metadata?, parts}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UiMessage {
    pub id: String,
    pub role: Role,
    /// Free-form; the stream's `messageMetadata` is deep-merged into it.
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata: Option<Value>,
    pub parts: Vec<UiPart>,
}

/// Lifecycle of a text or reasoning part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextState {
    /// Deltas may still arrive.
    Streaming,
    /// The `-end` chunk arrived.
    Done,
}

/// `{"type":"text", text, state?, providerMetadata?}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct TextPart {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TextState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `{"type":"reasoning", id?, text, state?, providerMetadata?}`. The reducer
/// of `ai@6.0.264` records the stream's reasoning id on the part.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ReasoningPart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TextState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `{"type":"source-url", sourceId, url, title?, providerMetadata?}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct SourceUrlPart {
    pub source_id: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `{"type":"source-document", sourceId, mediaType, title, filename?, providerMetadata?}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct SourceDocumentPart {
    pub source_id: String,
    pub media_type: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// `{"type":"file", mediaType, url, filename?, providerMetadata?}`: an upload
/// from the user or a generated file; `url` is often a `data:` URL.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct FilePart {
    pub media_type: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderMetadata>,
}

/// The image types shown inline — by the page as `<img>`, and by the server as `inline` —
/// exactly these, compared whole (ASCII case aside): never SVG (a document that can carry
/// script), never a type with parameters or a list (`image/x, text/html`). Any other file is a
/// download.
pub const INLINE_IMAGE_TYPES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/avif",
];

/// `media_type` as written in [`INLINE_IMAGE_TYPES`] if it is exactly one of them; `None`: the
/// file is a download.
pub fn inline_image_type(media_type: &str) -> Option<&'static str> {
    INLINE_IMAGE_TYPES
        .iter()
        .copied()
        .find(|allowed| allowed.eq_ignore_ascii_case(media_type))
}

/// `{"type":"data-<name>", id?, data}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct DataPart {
    /// The part of the `type` after `data-`; carried by the tag.
    #[serde(skip)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub data: Value,
}

/// Where a tool call is in its life (§A.3). Wire values are kebab-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    /// Input is streaming; `input` is partial or absent.
    InputStreaming,
    /// Input complete; the tool may run (or wait for a browser executor).
    InputAvailable,
    /// Waiting for the user; `approval` is `{id}`.
    ApprovalRequested,
    /// The user answered; `approval` is `{id, approved, reason?}`. The answer
    /// reaches the server inside the next request's `messages`.
    ApprovalResponded,
    /// The tool ran; `output` is set (`preliminary` for partial results).
    OutputAvailable,
    /// The tool failed, or its input was invalid; `errorText` is set.
    OutputError,
    /// The user denied the call; it never ran.
    OutputDenied,
}

impl ToolState {
    /// The wire string (`"approval-requested"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InputStreaming => "input-streaming",
            Self::InputAvailable => "input-available",
            Self::ApprovalRequested => "approval-requested",
            Self::ApprovalResponded => "approval-responded",
            Self::OutputAvailable => "output-available",
            Self::OutputError => "output-error",
            Self::OutputDenied => "output-denied",
        }
    }
}

/// The approval object of a tool part (§A.3, §A.7).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The `approvalId` of the `tool-approval-request`.
    pub id: String,
    /// `None` while requested; the user's answer afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// HMAC from `tool-approval-request.signature` (`ai@6.0.202`+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Countersign extension: the arguments the person edited before approving (a full
    /// replacement of the tool input). The AI SDK has no approve-with-edits (vercel/ai#11294),
    /// so only Countersign's own client sends it; the server validates it against the tool's
    /// schema again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_input: Option<Value>,
    /// v7: what is approved, app-defined (`tool-approval-request.approvalDescriptor`);
    /// Countersign's server puts the policy's ruling there ([`super::grant::Ruling`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<Value>,
    /// v7: why it is asked (`tool-approval-request.reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_reason: Option<String>,
    /// v7: decided without the person (a policy rule or a grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_automatic: Option<bool>,
    /// Countersign extension: approve and remember ([`super::grant::GrantRequest`], read by
    /// the server; sent with `approved: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Value>,
    /// Countersign extension: "not now" — no decision (sent with `approved: false`, so a stock
    /// client counts it as answered); the call ends undecided and can be asked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dismissed: Option<bool>,
    /// Countersign extension: the passkey assertion confirming the approval (step-up, ADR
    /// 0024), as the browser's `PublicKeyCredential.toJSON()` gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_up: Option<Value>,
}

/// A tool invocation, shared by `tool-<name>` and `dynamic-tool` parts.
///
/// `input`, `output` and `raw_input` are `Option<Value>` where `Some(Null)`
/// means the key was present with `null` (a tool may legitimately return
/// `null`) and `None` means it was absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
#[serde(rename_all = "camelCase")]
pub struct ToolPart {
    /// For `tool-<name>` the suffix of the `type`; for `dynamic-tool` the
    /// `toolName` key. Serialized by [`UiPart`], not here.
    #[serde(skip)]
    pub tool_name: String,
    pub tool_call_id: String,
    pub state: ToolState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub input: Option<Value>,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub output: Option<Value>,
    /// The unparseable input of a `tool-input-error` (static tools only).
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub raw_input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    /// Provider data of the *call*; carries Gemini's `thoughtSignature`, which
    /// must go back to Gemini on the next turn (§A.3, §B.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_provider_metadata: Option<ProviderMetadata>,
    /// Provider data of the *result* (output states only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_provider_metadata: Option<ProviderMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preliminary: Option<bool>,
    /// `ai@6.0.176`+.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_metadata: Option<ToolMetadata>,
}

impl ToolPart {
    /// A part with only the identifying fields set.
    pub fn new(
        tool_name: impl Into<String>,
        tool_call_id: impl Into<String>,
        state: ToolState,
    ) -> Self {
        Self {
            tool_name: tool_name.into(),
            tool_call_id: tool_call_id.into(),
            state,
            title: None,
            input: None,
            output: None,
            raw_input: None,
            error_text: None,
            approval: None,
            provider_executed: None,
            call_provider_metadata: None,
            result_provider_metadata: None,
            preliminary: None,
            tool_metadata: None,
        }
    }

    /// `true` for `provider_executed: Some(true)`.
    pub fn is_provider_executed(&self) -> bool {
        self.provider_executed == Some(true)
    }
}

/// One part of a [`UiMessage`].
#[derive(Debug, Clone, PartialEq)]
pub enum UiPart {
    Text(TextPart),
    Reasoning(ReasoningPart),
    SourceUrl(SourceUrlPart),
    SourceDocument(SourceDocumentPart),
    File(FilePart),
    /// `{"type":"step-start"}`: a model step begins; tool lookups and the
    /// auto-send predicates look only at the parts after the last one.
    StepStart,
    /// `data-<name>`.
    Data(DataPart),
    /// `tool-<name>`: a tool the UI knows statically.
    Tool(ToolPart),
    /// `dynamic-tool`: a tool only known at run time (`toolName` key).
    DynamicTool(ToolPart),
    /// A part type this version does not know, kept verbatim.
    Unknown(Value),
}

/// Why a part could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum PartDecodeError {
    #[error("message part is not a JSON object")]
    NotAnObject,
    #[error("message part has no string `type`")]
    MissingType,
    #[error("invalid `{part_type}` part: {source}")]
    InvalidFields {
        part_type: String,
        #[source]
        source: serde_json::Error,
    },
}

impl From<TagError> for PartDecodeError {
    fn from(error: TagError) -> Self {
        match error {
            TagError::NotAnObject => Self::NotAnObject,
            TagError::MissingType => Self::MissingType,
        }
    }
}

/// Serialization shape of a `dynamic-tool` part: `toolName` is a real key.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DynamicToolBody<'a> {
    tool_name: &'a str,
    #[serde(flatten)]
    part: &'a ToolPart,
}

impl UiPart {
    /// Decodes one part. Unknown types become [`UiPart::Unknown`].
    pub fn from_value(value: Value) -> Result<Self, PartDecodeError> {
        let (kind, map) = split_tagged(value)?;
        decode::part(kind, map)
    }

    /// The tool invocation of a `tool-*` or `dynamic-tool` part.
    pub fn as_tool(&self) -> Option<&ToolPart> {
        match self {
            Self::Tool(tool) | Self::DynamicTool(tool) => Some(tool),
            _ => None,
        }
    }

    /// Mutable [`UiPart::as_tool`].
    pub fn as_tool_mut(&mut self) -> Option<&mut ToolPart> {
        match self {
            Self::Tool(tool) | Self::DynamicTool(tool) => Some(tool),
            _ => None,
        }
    }

    /// The wire `type` of this part.
    pub fn wire_type(&self) -> Cow<'_, str> {
        Cow::Borrowed(match self {
            Self::Text(_) => "text",
            Self::Reasoning(_) => "reasoning",
            Self::SourceUrl(_) => "source-url",
            Self::SourceDocument(_) => "source-document",
            Self::File(_) => "file",
            Self::StepStart => "step-start",
            Self::Data(data) => return Cow::Owned(format!("data-{}", data.name)),
            Self::Tool(tool) => return Cow::Owned(format!("tool-{}", tool.tool_name)),
            Self::DynamicTool(_) => "dynamic-tool",
            Self::Unknown(value) => value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
        })
    }
}

/// An empty payload, so `step-start` serializes as `{"type":"step-start"}`.
#[derive(Serialize)]
struct NoFields {}

impl Serialize for UiPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kind = self.wire_type();
        let kind = kind.as_ref();
        match self {
            Self::Text(body) => Tagged { kind, body }.serialize(serializer),
            Self::Reasoning(body) => Tagged { kind, body }.serialize(serializer),
            Self::SourceUrl(body) => Tagged { kind, body }.serialize(serializer),
            Self::SourceDocument(body) => Tagged { kind, body }.serialize(serializer),
            Self::File(body) => Tagged { kind, body }.serialize(serializer),
            Self::StepStart => Tagged {
                kind,
                body: &NoFields {},
            }
            .serialize(serializer),
            Self::Data(body) => Tagged { kind, body }.serialize(serializer),
            Self::Tool(body) => Tagged { kind, body }.serialize(serializer),
            Self::DynamicTool(part) => Tagged {
                kind,
                body: &DynamicToolBody {
                    tool_name: &part.tool_name,
                    part,
                },
            }
            .serialize(serializer),
            Self::Unknown(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for UiPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

impl UiMessage {
    /// What a user message says it asks again — Countersign's `metadata.countersign.askAgain`,
    /// meant to be the id of an earlier call of the chat — as the client wrote it (the server
    /// checks it).
    pub fn ask_again(&self) -> Option<&Value> {
        self.metadata.as_ref()?.get("countersign")?.get("askAgain")
    }

    /// Makes this user message ask call `call_id` again ([`UiMessage::ask_again`]); the rest
    /// of its metadata stays.
    pub fn set_ask_again(&mut self, call_id: &str) {
        fn object(value: &mut Value) -> &mut Value {
            if !value.is_object() {
                *value = Value::Object(Default::default());
            }
            value
        }
        let metadata = object(self.metadata.get_or_insert(Value::Null));
        // Both are objects here: indexing one by a key inserts it and never panics.
        object(&mut metadata["countersign"])["askAgain"] = Value::String(call_id.to_owned());
    }

    /// An empty message.
    pub fn new(id: impl Into<String>, role: Role) -> Self {
        Self {
            id: id.into(),
            role,
            metadata: None,
            parts: Vec::new(),
        }
    }

    /// A user message with one text part, as `sendMessage({text})` builds it.
    pub fn user_text(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            role: Role::User,
            metadata: None,
            parts: vec![UiPart::Text(TextPart {
                text: text.into(),
                state: None,
                provider_metadata: None,
            })],
        }
    }

    /// An empty assistant message (the reducer's starting point).
    pub fn assistant(id: impl Into<String>) -> Self {
        Self::new(id, Role::Assistant)
    }

    /// All text parts concatenated, in order (reasoning excluded).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                UiPart::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Every tool invocation (`tool-*` and `dynamic-tool`), in order.
    pub fn tool_parts(&self) -> impl Iterator<Item = &ToolPart> + '_ {
        self.parts.iter().filter_map(UiPart::as_tool)
    }

    /// The tool part with this call id, searched from the end.
    pub fn find_tool_part(&self, tool_call_id: &str) -> Option<&ToolPart> {
        self.parts
            .iter()
            .rev()
            .filter_map(UiPart::as_tool)
            .find(|tool| tool.tool_call_id == tool_call_id)
    }

    /// The parts after the last `step-start` (all parts if there is none):
    /// the "last step" of the AI SDK's predicates and tool lookups.
    pub fn last_step_parts(&self) -> &[UiPart] {
        let start = last_step_start(&self.parts);
        &self.parts[start..]
    }
}

/// Index of the first part of the current step: one past the last
/// `step-start`, or 0.
pub(crate) fn last_step_start(parts: &[UiPart]) -> usize {
    parts
        .iter()
        .rposition(|part| matches!(part, UiPart::StepStart))
        .map_or(0, |index| index + 1)
}

/// The tool parts of the last step of `messages`' last message, if that
/// message is an assistant message. Shared by both predicates.
fn last_assistant_step_tools(messages: &[UiMessage]) -> Option<Vec<&ToolPart>> {
    let message = messages.last()?;
    if message.role != Role::Assistant {
        return None;
    }
    Some(
        message
            .last_step_parts()
            .iter()
            .filter_map(UiPart::as_tool)
            .collect(),
    )
}

/// `lastAssistantMessageIsCompleteWithApprovalResponses` (§A.7): a
/// `sendAutomaticallyWhen` condition. True when the last message is an
/// assistant message whose last step has at least one `approval-responded`
/// tool part and every tool part is `output-available`, `output-error` or
/// `approval-responded`.
///
/// Semantics of `ai@6.0.123` … `ai@6.0.264` (backport of vercel/ai#14327):
/// provider-executed tool parts are *not* filtered out (6.0.0 … 6.0.122 did
/// filter them). `output-denied` is deliberately not in the list, exactly as
/// upstream: a step that mixes a denial with other answers does not auto-send
/// (protocols.md §E3).
pub fn last_assistant_message_is_complete_with_approval_responses(messages: &[UiMessage]) -> bool {
    let Some(tools) = last_assistant_step_tools(messages) else {
        return false;
    };
    tools
        .iter()
        .any(|tool| tool.state == ToolState::ApprovalResponded)
        && tools.iter().all(|tool| {
            matches!(
                tool.state,
                ToolState::OutputAvailable | ToolState::OutputError | ToolState::ApprovalResponded
            )
        })
}

/// `lastAssistantMessageIsCompleteWithToolCalls` (§A.7): true when the last
/// message is an assistant message whose last step has at least one tool part
/// that is not provider-executed, and all of those are `output-available` or
/// `output-error` (same in every v6 tag).
pub fn last_assistant_message_is_complete_with_tool_calls(messages: &[UiMessage]) -> bool {
    let Some(tools) = last_assistant_step_tools(messages) else {
        return false;
    };
    let client_tools: Vec<&&ToolPart> = tools
        .iter()
        .filter(|tool| !tool.is_provider_executed())
        .collect();
    !client_tools.is_empty()
        && client_tools.iter().all(|tool| {
            matches!(
                tool.state,
                ToolState::OutputAvailable | ToolState::OutputError
            )
        })
}

#[cfg(test)]
mod tests;
