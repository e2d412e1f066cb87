//! UI message stream chunks: the unit of the server → browser stream.
//!
//! One [`Chunk`] is one SSE event (`data: {json}\n\n`, see [`super::sse`]) or
//! one WebSocket text frame. The set of types and their fields is the AI SDK v6
//! `uiMessageChunkSchema` (protocols.md §A.2; source
//! `packages/ai/src/ui-message-stream/ui-message-chunks.ts`).
//!
//! # Decoding is lenient, encoding is careful
//!
//! * A chunk whose `type` we do not know (a v7 `reasoning-file`, a vendor
//!   extension) decodes to [`Chunk::Unknown`] holding the whole object, so a
//!   newer server never crashes an older client; the reducer ignores it.
//! * A chunk of a known type with missing or mistyped required fields is a
//!   [`ChunkDecodeError::InvalidFields`]: the producer is broken, and the AI SDK
//!   client would fail the stream on it too.
//! * Unknown *keys* on a known type are ignored, like `ai@6.0.231`+ does
//!   (`z.looseObject`). They are not kept, so they do not survive a re-encode.
//!
//! Encoding goes through a [`Dialect`]. `ai@6.0.0` … `ai@6.0.230` validate every
//! chunk with `z.strictObject`: one key they do not know rejects the chunk and
//! puts the chat in status `error` (§A.0). [`Dialect::V6Strict`] (the default)
//! therefore emits only the keys `ai@6.0.0` accepts; [`Dialect::Full`] emits
//! everything this type knows, for clients whose version is known.
//!
//! ## What `ai@6.0.0` accepts, verified against the source
//!
//! Read from `packages/ai/src/ui-message-stream/ui-message-chunks.ts` at the
//! git tags `ai@6.0.0` … `ai@6.0.264` of vercel/ai. Keys that arrived after
//! 6.0.0, with the first tag whose schema has them:
//!
//! | key | first tag |
//! |---|---|
//! | `abort.reason` | 6.0.15 |
//! | `providerMetadata` on `tool-input-start` | 6.0.39 |
//! | `providerMetadata` on `tool-output-available` / `tool-output-error` | 6.0.120 |
//! | `toolMetadata` on `tool-input-start`/`-available`/`-error`, `tool-output-available`/`-error` | 6.0.176 |
//! | `signature` on `tool-approval-request` | 6.0.202 |
//! | schema becomes `z.looseObject` (unknown keys ignored) | 6.0.231 |
//!
//! The set of chunk *types* is identical from 6.0.0 to 6.0.264. `finishReason`
//! is a closed `z.enum` in every v6 tag, so [`FinishReason::Unknown`] is sent
//! as `"other"` in strict mode. Types only v7 has are never sent in strict mode:
//! `tool-approval-response` (with `isAutomatic`, `reason` and `approvalDescriptor`
//! on `tool-approval-request`, an approval decided by a policy rule or a grant) is
//! modelled and sent in [`Dialect::Full`]; `reasoning-file`, `custom` and
//! `reset-step` can only exist as [`Chunk::Unknown`].

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::json_util::{TagError, Tagged, split_tagged};

mod build;
mod decode;
mod payloads;

pub use payloads::*;

/// `providerMetadata`: `Record<string, Record<string, JSONValue>>`, keyed by
/// provider (`{"google": {"thoughtSignature": "..."}}`). Kept as a JSON object
/// so nothing a provider puts there is lost; Gemini 3 needs it back verbatim
/// on the next turn (protocols.md §A.3, §B.4).
pub type ProviderMetadata = Map<String, Value>;

/// `toolMetadata` (`JSONObject`, `ai@6.0.176`+): free-form data the server
/// attaches to a tool call for the UI.
pub type ToolMetadata = Map<String, Value>;

/// Which keys [`Chunk::to_json`] may put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    /// Only the keys `ai@6.0.0` accepts (see the module docs). The safe
    /// default while the client's version is unknown (design.md: "a chunk
    /// field ai@6.0.0 does not know is never sent unless the client asked").
    #[default]
    V6Strict,
    /// Every key and chunk type this module models, v7's included
    /// (`tool-approval-response`, `isAutomatic`): for clients known to be AI SDK v7
    /// (`x-countersign-dialect: full`) and our own wasm client. A v6 client of any
    /// version takes the default.
    Full,
}

/// Why the model stopped (`finish.finishReason`).
///
/// The v6 schema allows exactly the six named values. [`FinishReason::Unknown`]
/// keeps anything else a producer sends so decoding never fails on it; it is
/// encoded as `"other"` in [`Dialect::V6Strict`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// `"stop"`: the model ended its turn.
    Stop,
    /// `"length"`: the token limit was hit.
    Length,
    /// `"content-filter"`: a safety filter stopped the output.
    ContentFilter,
    /// `"tool-calls"`: the step ended with tool calls to run.
    ToolCalls,
    /// `"error"`: the producer failed.
    Error,
    /// `"other"`: any other documented reason.
    Other,
    /// A value outside the v6 enum, kept verbatim.
    Unknown(String),
}

impl FinishReason {
    /// Maps a wire string to a reason; never fails.
    pub fn from_wire(value: &str) -> Self {
        match value {
            "stop" => Self::Stop,
            "length" => Self::Length,
            "content-filter" => Self::ContentFilter,
            "tool-calls" => Self::ToolCalls,
            "error" => Self::Error,
            "other" => Self::Other,
            other => Self::Unknown(other.to_owned()),
        }
    }

    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content-filter",
            Self::ToolCalls => "tool-calls",
            Self::Error => "error",
            Self::Other => "other",
            Self::Unknown(other) => other,
        }
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::from_wire(&value))
    }
}

/// How the `errorText` of a call whose approval expired begins (Countersign's convention):
/// the UI shows such a call as *Expired*, distinct from a failure or a denial.
pub const APPROVAL_EXPIRED_PREFIX: &str = "Approval expired";

/// How the `errorText` of a call whose approval the person set aside ("not now") begins: the
/// UI shows it as *Not decided*, with a way to ask again.
pub const DISMISSED_PREFIX: &str = "Not decided";

/// How the `errorText` of a call whose approval a new message replaced begins.
pub const SUPERSEDED_PREFIX: &str = "Superseded";

/// How the `errorText` of a call the model withdrew while it waited begins.
pub const WITHDRAWN_PREFIX: &str = "The model withdrew this call";

/// How the `errorText` of a browser call whose result never came begins.
pub const BROWSER_TIMEOUT_PREFIX: &str = "The browser did not return a result within";

/// One UI message stream chunk (protocols.md §A.2).
///
/// Serialize/Deserialize produce and accept the full wire form
/// ([`Dialect::Full`]); use [`Chunk::to_json`] to choose the dialect.
///
/// The tool chunks' payloads are boxed: they are rare in a stream and large (two optional JSON
/// maps each, 72 bytes apiece on the server, whose `serde_json` keeps key order), and every
/// chunk of a turn's log is the size of the largest variant. Boxed, a chunk is the size of a
/// text delta.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    Start(Start),
    StartStep,
    FinishStep,
    Finish(Finish),
    Abort(Abort),
    Error(ErrorChunk),
    MessageMetadata(MessageMetadata),
    TextStart(Boundary),
    TextDelta(Delta),
    TextEnd(Boundary),
    ReasoningStart(Boundary),
    ReasoningDelta(Delta),
    ReasoningEnd(Boundary),
    ToolInputStart(Box<ToolInputStart>),
    ToolInputDelta(ToolInputDelta),
    ToolInputAvailable(Box<ToolInputAvailable>),
    ToolInputError(Box<ToolInputError>),
    ToolApprovalRequest(Box<ToolApprovalRequest>),
    /// v7 only (never sent in [`Dialect::V6Strict`]).
    ToolApprovalResponse(ToolApprovalResponse),
    ToolOutputAvailable(Box<ToolOutputAvailable>),
    ToolOutputError(Box<ToolOutputError>),
    ToolOutputDenied(ToolOutputDenied),
    SourceUrl(SourceUrl),
    SourceDocument(SourceDocument),
    File(File),
    /// `data-<name>`.
    Data(DataChunk),
    /// A chunk whose `type` this version does not know, kept verbatim (the
    /// whole object, `type` included).
    Unknown(Value),
}

/// Why a chunk could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum ChunkDecodeError {
    /// The text is not JSON at all.
    #[error("chunk is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// Valid JSON, but not an object.
    #[error("chunk is not a JSON object")]
    NotAnObject,
    /// An object without a string `type`.
    #[error("chunk has no string `type`")]
    MissingType,
    /// A known `type` whose fields do not match the schema.
    #[error("invalid `{chunk_type}` chunk: {source}")]
    InvalidFields {
        chunk_type: String,
        #[source]
        source: serde_json::Error,
    },
}

impl From<TagError> for ChunkDecodeError {
    fn from(error: TagError) -> Self {
        match error {
            TagError::NotAnObject => Self::NotAnObject,
            TagError::MissingType => Self::MissingType,
        }
    }
}

/// Serializes one of our own wire values. This cannot fail: every map has
/// string keys, `serde_json::Value` cannot hold a non-finite float, and no
/// `Serialize` impl in this module returns an error.
pub(crate) fn to_json_infallible<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("protocol wire types always serialize")
}

/// See [`to_json_infallible`].
pub(crate) fn to_value_infallible<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).expect("protocol wire types always serialize")
}

impl Chunk {
    /// Decodes one chunk from JSON text (the payload of one SSE `data:` event).
    pub fn from_json(text: &str) -> Result<Self, ChunkDecodeError> {
        let value: Value = serde_json::from_str(text).map_err(ChunkDecodeError::Json)?;
        Self::from_value(value)
    }

    /// Decodes one chunk from a JSON value. Unknown types become
    /// [`Chunk::Unknown`]; known types with bad fields are errors.
    pub fn from_value(value: Value) -> Result<Self, ChunkDecodeError> {
        let (kind, map) = split_tagged(value)?;
        decode::chunk(kind, map)
    }

    /// The wire `type` (`"text-delta"`, `"data-weather"`, or an unknown
    /// chunk's own type). Handy for logs and error messages.
    pub fn wire_type(&self) -> Cow<'_, str> {
        Cow::Borrowed(match self {
            Self::Start(_) => "start",
            Self::StartStep => "start-step",
            Self::FinishStep => "finish-step",
            Self::Finish(_) => "finish",
            Self::Abort(_) => "abort",
            Self::Error(_) => "error",
            Self::MessageMetadata(_) => "message-metadata",
            Self::TextStart(_) => "text-start",
            Self::TextDelta(_) => "text-delta",
            Self::TextEnd(_) => "text-end",
            Self::ReasoningStart(_) => "reasoning-start",
            Self::ReasoningDelta(_) => "reasoning-delta",
            Self::ReasoningEnd(_) => "reasoning-end",
            Self::ToolInputStart(_) => "tool-input-start",
            Self::ToolInputDelta(_) => "tool-input-delta",
            Self::ToolInputAvailable(_) => "tool-input-available",
            Self::ToolInputError(_) => "tool-input-error",
            Self::ToolApprovalRequest(_) => "tool-approval-request",
            Self::ToolApprovalResponse(_) => "tool-approval-response",
            Self::ToolOutputAvailable(_) => "tool-output-available",
            Self::ToolOutputError(_) => "tool-output-error",
            Self::ToolOutputDenied(_) => "tool-output-denied",
            Self::SourceUrl(_) => "source-url",
            Self::SourceDocument(_) => "source-document",
            Self::File(_) => "file",
            Self::Data(data) => return Cow::Owned(format!("data-{}", data.name)),
            Self::Unknown(value) => match value.get("type").and_then(Value::as_str) {
                Some(kind) => kind,
                None => "unknown",
            },
        })
    }

    /// The chunk as `dialect` allows it on the wire, or `None` when it must
    /// not be sent at all (an [`Chunk::Unknown`] in [`Dialect::V6Strict`]: an
    /// `ai@6.0.0` client would reject its type). Borrows when nothing changes.
    pub fn for_dialect(&self, dialect: Dialect) -> Option<Cow<'_, Chunk>> {
        match dialect {
            Dialect::Full => Some(Cow::Borrowed(self)),
            Dialect::V6Strict => self.v6_strict(),
        }
    }

    /// The `ai@6.0.0` form: drops every key added later (module docs) and
    /// maps an unknown finish reason to `"other"`.
    fn v6_strict(&self) -> Option<Cow<'_, Chunk>> {
        let needs_change = match self {
            Self::Unknown(_) | Self::ToolApprovalResponse(_) => return None,
            Self::ToolApprovalRequest(request) if request.is_automatic == Some(true) => {
                return None;
            }
            Self::Abort(abort) => abort.reason.is_some(),
            Self::Finish(finish) => matches!(finish.finish_reason, Some(FinishReason::Unknown(_))),
            Self::ToolInputStart(start) => {
                start.provider_metadata.is_some() || start.tool_metadata.is_some()
            }
            Self::ToolInputAvailable(available) => available.tool_metadata.is_some(),
            Self::ToolInputError(error) => error.tool_metadata.is_some(),
            Self::ToolApprovalRequest(request) => {
                request.signature.is_some()
                    || request.approval_descriptor.is_some()
                    || request.reason.is_some()
                    || request.is_automatic.is_some()
            }
            Self::ToolOutputAvailable(output) => {
                output.provider_metadata.is_some() || output.tool_metadata.is_some()
            }
            Self::ToolOutputError(error) => {
                error.provider_metadata.is_some() || error.tool_metadata.is_some()
            }
            _ => false,
        };
        if !needs_change {
            return Some(Cow::Borrowed(self));
        }
        let mut chunk = self.clone();
        match &mut chunk {
            Self::Abort(abort) => abort.reason = None,
            Self::Finish(finish) => finish.finish_reason = Some(FinishReason::Other),
            Self::ToolInputStart(start) => {
                start.provider_metadata = None;
                start.tool_metadata = None;
            }
            Self::ToolInputAvailable(available) => available.tool_metadata = None,
            Self::ToolInputError(error) => error.tool_metadata = None,
            Self::ToolApprovalRequest(request) => {
                request.signature = None;
                request.approval_descriptor = None;
                request.reason = None;
                request.is_automatic = None;
            }
            Self::ToolOutputAvailable(output) => {
                output.provider_metadata = None;
                output.tool_metadata = None;
            }
            Self::ToolOutputError(error) => {
                error.provider_metadata = None;
                error.tool_metadata = None;
            }
            _ => {}
        }
        Some(Cow::Owned(chunk))
    }

    /// JSON text in `dialect`, or `None` if the chunk must not be sent in it.
    pub fn to_json(&self, dialect: Dialect) -> Option<String> {
        self.for_dialect(dialect)
            .map(|chunk| to_json_infallible(chunk.as_ref()))
    }

    /// JSON value in `dialect`, or `None` if the chunk must not be sent in it.
    pub fn to_value(&self, dialect: Dialect) -> Option<Value> {
        self.for_dialect(dialect)
            .map(|chunk| to_value_infallible(chunk.as_ref()))
    }
}

/// An empty payload, so unit variants serialize as `{"type": "..."}`.
#[derive(Serialize)]
struct NoFields {}

impl Serialize for Chunk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        fn tagged<S: Serializer, T: Serialize>(
            serializer: S,
            kind: &str,
            body: &T,
        ) -> Result<S::Ok, S::Error> {
            Tagged { kind, body }.serialize(serializer)
        }
        let kind = self.wire_type();
        match self {
            Self::Start(p) => tagged(serializer, &kind, p),
            Self::StartStep | Self::FinishStep => tagged(serializer, &kind, &NoFields {}),
            Self::Finish(p) => tagged(serializer, &kind, p),
            Self::Abort(p) => tagged(serializer, &kind, p),
            Self::Error(p) => tagged(serializer, &kind, p),
            Self::MessageMetadata(p) => tagged(serializer, &kind, p),
            Self::TextStart(p)
            | Self::TextEnd(p)
            | Self::ReasoningStart(p)
            | Self::ReasoningEnd(p) => tagged(serializer, &kind, p),
            Self::TextDelta(p) | Self::ReasoningDelta(p) => tagged(serializer, &kind, p),
            Self::ToolInputStart(p) => tagged(serializer, &kind, p),
            Self::ToolInputDelta(p) => tagged(serializer, &kind, p),
            Self::ToolInputAvailable(p) => tagged(serializer, &kind, p),
            Self::ToolInputError(p) => tagged(serializer, &kind, p),
            Self::ToolApprovalRequest(p) => tagged(serializer, &kind, p),
            Self::ToolApprovalResponse(p) => tagged(serializer, &kind, p),
            Self::ToolOutputAvailable(p) => tagged(serializer, &kind, p),
            Self::ToolOutputError(p) => tagged(serializer, &kind, p),
            Self::ToolOutputDenied(p) => tagged(serializer, &kind, p),
            Self::SourceUrl(p) => tagged(serializer, &kind, p),
            Self::SourceDocument(p) => tagged(serializer, &kind, p),
            Self::File(p) => tagged(serializer, &kind, p),
            Self::Data(p) => tagged(serializer, &kind, p),
            Self::Unknown(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Chunk {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
