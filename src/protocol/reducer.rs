//! Chunk → message: the one reducer both sides run.
//!
//! [`MessageReducer`] folds a stream of [`Chunk`]s into the assistant
//! [`UiMessage`] with the rules of the AI SDK's `processUIMessageStream`
//! (`packages/ai/src/ui/process-ui-message-stream.ts`, read at `ai@6.0.264`;
//! protocols.md §A.2). The browser uses it to render the stream; the server
//! uses the very same code to build the message it persists, so the two can
//! never disagree about what the user saw.
//!
//! Where the SDK *throws* (a delta without its start, a result for a tool call
//! it cannot find), [`MessageReducer::apply`] returns a typed [`ReduceError`]
//! and leaves the message untouched: a failed chunk changes nothing, and the
//! reducer never panics whatever the input. What to do next (show an error,
//! stop the stream) is the caller's decision, as it is for the SDK's `onError`.
//!
//! [`Conversation`] adds `useChat`'s message list around it: which message a
//! stream starts from, and how each update is written back (§A.2 "How the
//! message is seeded").

use std::collections::HashMap;

use serde_json::Value;

use super::chunk::{self, Chunk, FinishReason, ProviderMetadata, ToolMetadata};
use super::envelope::Trigger;
use super::json_util::deep_merge;
use super::message::{
    Approval, DataPart, FilePart, ReasoningPart, Role, SourceDocumentPart, SourceUrlPart, TextPart,
    TextState, ToolPart, ToolState, UiMessage, UiPart, last_step_start,
};
use super::partial_json::parse_partial_json;

/// What applying one chunk did.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The message changed; the SDK publishes it now (`write()`).
    Updated,
    /// Accepted, but the SDK publishes nothing for this chunk: step
    /// boundaries, a bare `start`, `message-metadata: null`. A `start-step`
    /// still adds its part; it becomes visible with the next update.
    Quiet,
    /// A `transient` data chunk: for the caller (the SDK's `onData`), never
    /// stored in the message.
    Transient(chunk::DataChunk),
    /// `finish`: the producer says the message is complete.
    Finished {
        /// The latest finish reason seen in this stream.
        finish_reason: Option<FinishReason>,
        /// `messageMetadata` was merged, so the SDK publishes the message.
        metadata_updated: bool,
    },
    /// `abort`: the producer stopped early. Changes nothing in the message.
    Aborted { reason: Option<String> },
    /// An `error` chunk. The SDK's `onError` throws on it, ending the stream
    /// with status `error`; the reducer records it and stays usable.
    Error { error_text: String },
    /// A chunk of unknown type; ignored, as a newer server may send it.
    Ignored,
}

impl Applied {
    /// Whether the message should be published (shown, written back) now:
    /// exactly when the SDK calls `write()` for the chunk.
    pub fn publishes(&self) -> bool {
        matches!(
            self,
            Self::Updated
                | Self::Finished {
                    metadata_updated: true,
                    ..
                }
        )
    }
}

/// A chunk that the SDK's reducer rejects. The message is left unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReduceError {
    /// `text-delta` for an id with no open `text-start` (never opened, already
    /// ended, or opened in a step that `finish-step` closed).
    #[error("text-delta for text part `{id}` without an open text-start")]
    TextDeltaWithoutStart { id: String },
    /// `text-end` for an id with no open `text-start`.
    #[error("text-end for text part `{id}` without an open text-start")]
    TextEndWithoutStart { id: String },
    /// `reasoning-delta` for an id with no open `reasoning-start`.
    #[error("reasoning-delta for reasoning part `{id}` without an open reasoning-start")]
    ReasoningDeltaWithoutStart { id: String },
    /// `reasoning-end` for an id with no open `reasoning-start`.
    #[error("reasoning-end for reasoning part `{id}` without an open reasoning-start")]
    ReasoningEndWithoutStart { id: String },
    /// `tool-input-delta` before any `tool-input-start` for the call.
    #[error("tool-input-delta for tool call `{tool_call_id}` without a tool-input-start")]
    ToolInputDeltaWithoutStart { tool_call_id: String },
    /// An approval request or tool result for a call the message does not
    /// contain. On a continuation this means the stream was not seeded with
    /// the assistant message that holds the call (§A.8).
    #[error("{chunk_type}: no tool invocation found for tool call `{tool_call_id}`")]
    ToolCallNotFound {
        chunk_type: &'static str,
        tool_call_id: String,
    },
    /// A `tool-approval-response` for an approval no tool part of the message holds.
    #[error("tool-approval-response: no tool invocation found for approval `{approval_id}`")]
    UnknownApproval { approval_id: String },
    /// [`Conversation::apply`] without [`Conversation::begin_stream`].
    #[error("no stream is active in this conversation")]
    NoActiveStream,
}

/// A tool call whose input is still streaming (`partialToolCalls`).
#[derive(Debug, Clone, PartialEq)]
struct PartialToolCall {
    text: String,
    tool_name: String,
    dynamic: bool,
    title: Option<String>,
    tool_metadata: Option<ToolMetadata>,
}

/// Everything one tool chunk wants to write into a tool part. Mirrors the
/// options of the SDK's `updateToolPart` / `updateDynamicToolPart`, whose
/// rule is: state, input, output, errorText and preliminary are *replaced*
/// (absent means cleared); title, toolMetadata and providerExecuted are only
/// ever set, never cleared.
#[derive(Debug)]
struct ToolUpdate {
    tool_name: String,
    tool_call_id: String,
    state: ToolState,
    input: Option<Value>,
    output: Option<Value>,
    raw_input: Option<Value>,
    error_text: Option<String>,
    preliminary: Option<bool>,
    provider_executed: Option<bool>,
    provider_metadata: Option<ProviderMetadata>,
    title: Option<String>,
    tool_metadata: Option<ToolMetadata>,
}

impl ToolUpdate {
    /// An update that sets only the identity and the state.
    fn new(tool_name: &str, tool_call_id: &str, state: ToolState) -> Self {
        Self {
            tool_name: tool_name.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            state,
            input: None,
            output: None,
            raw_input: None,
            error_text: None,
            preliminary: None,
            provider_executed: None,
            provider_metadata: None,
            title: None,
            tool_metadata: None,
        }
    }

    /// Result states put provider metadata in `resultProviderMetadata`.
    fn is_result(&self) -> bool {
        matches!(
            self.state,
            ToolState::OutputAvailable | ToolState::OutputError
        )
    }
}

/// Static `tool-<name>` or `dynamic-tool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolKind {
    Static,
    Dynamic,
}

impl ToolKind {
    fn from_flag(dynamic: Option<bool>) -> Self {
        if dynamic == Some(true) {
            Self::Dynamic
        } else {
            Self::Static
        }
    }

    fn of(part: &UiPart) -> Option<Self> {
        match part {
            UiPart::Tool(_) => Some(Self::Static),
            UiPart::DynamicTool(_) => Some(Self::Dynamic),
            _ => None,
        }
    }
}

/// Folds chunks into one assistant message (the SDK's
/// `StreamingUIMessageState` plus `processUIMessageStream`).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageReducer {
    message: UiMessage,
    /// Open text parts: stream id → index into `message.parts`. Parts are
    /// only ever appended while reducing, so indices stay valid.
    active_text: HashMap<String, usize>,
    /// Open reasoning parts, likewise.
    active_reasoning: HashMap<String, usize>,
    /// Raw input text per `toolCallId`, re-parsed after every delta.
    partial_tool_calls: HashMap<String, PartialToolCall>,
    finish_reason: Option<FinishReason>,
    error_text: Option<String>,
    aborted: bool,
    abort_reason: Option<String>,
}

impl MessageReducer {
    /// Starts a new, empty assistant message with this id (the client-side id
    /// a `start.messageId` may replace).
    pub fn new(message_id: impl Into<String>) -> Self {
        Self::continuing(UiMessage::assistant(message_id))
    }

    /// Continues an existing assistant message: the approval continuation of
    /// §A.4, where the tool result lands on a part from the previous request.
    pub fn continuing(existing: UiMessage) -> Self {
        Self {
            message: existing,
            active_text: HashMap::new(),
            active_reasoning: HashMap::new(),
            partial_tool_calls: HashMap::new(),
            finish_reason: None,
            error_text: None,
            aborted: false,
            abort_reason: None,
        }
    }

    /// The message so far.
    pub fn message(&self) -> &UiMessage {
        &self.message
    }

    /// The message, consuming the reducer.
    pub fn into_message(self) -> UiMessage {
        self.message
    }

    /// The last `finish.finishReason` seen.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish_reason.as_ref()
    }

    /// The text of the last `error` chunk seen.
    pub fn error_text(&self) -> Option<&str> {
        self.error_text.as_deref()
    }

    /// Whether an `abort` chunk was seen.
    pub fn is_aborted(&self) -> bool {
        self.aborted
    }

    /// The `reason` of the last `abort` chunk, if it had one.
    pub fn abort_reason(&self) -> Option<&str> {
        self.abort_reason.as_deref()
    }

    /// Applies one chunk. On `Err` nothing changed.
    pub fn apply(&mut self, chunk: &Chunk) -> Result<Applied, ReduceError> {
        match chunk {
            Chunk::Start(start) => {
                if let Some(id) = &start.message_id {
                    self.message.id.clone_from(id);
                }
                let merged = self.merge_metadata(start.message_metadata.as_ref());
                Ok(if start.message_id.is_some() || merged {
                    Applied::Updated
                } else {
                    Applied::Quiet
                })
            }
            Chunk::StartStep => {
                self.message.parts.push(UiPart::StepStart);
                Ok(Applied::Quiet)
            }
            Chunk::FinishStep => {
                // A later delta for an id of the finished step is an error,
                // exactly as in the SDK. Partial tool calls survive.
                self.active_text.clear();
                self.active_reasoning.clear();
                Ok(Applied::Quiet)
            }
            Chunk::Finish(finish) => {
                if let Some(reason) = &finish.finish_reason {
                    self.finish_reason = Some(reason.clone());
                }
                let metadata_updated = self.merge_metadata(finish.message_metadata.as_ref());
                Ok(Applied::Finished {
                    finish_reason: self.finish_reason.clone(),
                    metadata_updated,
                })
            }
            Chunk::Abort(abort) => {
                self.aborted = true;
                self.abort_reason.clone_from(&abort.reason);
                Ok(Applied::Aborted {
                    reason: abort.reason.clone(),
                })
            }
            Chunk::Error(error) => {
                self.error_text = Some(error.error_text.clone());
                Ok(Applied::Error {
                    error_text: error.error_text.clone(),
                })
            }
            Chunk::MessageMetadata(metadata) => {
                Ok(if self.merge_metadata(Some(&metadata.message_metadata)) {
                    Applied::Updated
                } else {
                    Applied::Quiet
                })
            }
            Chunk::TextStart(start) => {
                self.active_text
                    .insert(start.id.clone(), self.message.parts.len());
                self.message.parts.push(UiPart::Text(TextPart {
                    text: String::new(),
                    state: Some(TextState::Streaming),
                    provider_metadata: start.provider_metadata.clone(),
                }));
                Ok(Applied::Updated)
            }
            Chunk::TextDelta(delta) => self.append_delta(BlockKind::Text, delta).ok_or_else(|| {
                ReduceError::TextDeltaWithoutStart {
                    id: delta.id.clone(),
                }
            }),
            Chunk::TextEnd(end) => self
                .end_block(BlockKind::Text, end)
                .ok_or_else(|| ReduceError::TextEndWithoutStart { id: end.id.clone() }),
            Chunk::ReasoningStart(start) => {
                self.active_reasoning
                    .insert(start.id.clone(), self.message.parts.len());
                self.message.parts.push(UiPart::Reasoning(ReasoningPart {
                    id: Some(start.id.clone()),
                    text: String::new(),
                    state: Some(TextState::Streaming),
                    provider_metadata: start.provider_metadata.clone(),
                }));
                Ok(Applied::Updated)
            }
            Chunk::ReasoningDelta(delta) => self
                .append_delta(BlockKind::Reasoning, delta)
                .ok_or_else(|| ReduceError::ReasoningDeltaWithoutStart {
                    id: delta.id.clone(),
                }),
            Chunk::ReasoningEnd(end) => self
                .end_block(BlockKind::Reasoning, end)
                .ok_or_else(|| ReduceError::ReasoningEndWithoutStart { id: end.id.clone() }),
            Chunk::ToolInputStart(start) => {
                let kind = ToolKind::from_flag(start.dynamic);
                self.partial_tool_calls.insert(
                    start.tool_call_id.clone(),
                    PartialToolCall {
                        text: String::new(),
                        tool_name: start.tool_name.clone(),
                        dynamic: kind == ToolKind::Dynamic,
                        title: start.title.clone(),
                        tool_metadata: start.tool_metadata.clone(),
                    },
                );
                self.upsert_tool(
                    kind,
                    ToolUpdate {
                        provider_executed: start.provider_executed,
                        provider_metadata: start.provider_metadata.clone(),
                        title: start.title.clone(),
                        tool_metadata: start.tool_metadata.clone(),
                        ..ToolUpdate::new(
                            &start.tool_name,
                            &start.tool_call_id,
                            ToolState::InputStreaming,
                        )
                    },
                );
                Ok(Applied::Updated)
            }
            Chunk::ToolInputDelta(delta) => {
                let partial = self
                    .partial_tool_calls
                    .get_mut(&delta.tool_call_id)
                    .ok_or_else(|| ReduceError::ToolInputDeltaWithoutStart {
                        tool_call_id: delta.tool_call_id.clone(),
                    })?;
                partial.text.push_str(&delta.input_text_delta);
                // Unparseable text clears `input`, as in the SDK.
                let input = parse_partial_json(&partial.text).into_value();
                let kind = if partial.dynamic {
                    ToolKind::Dynamic
                } else {
                    ToolKind::Static
                };
                let update = ToolUpdate {
                    input,
                    title: partial.title.clone(),
                    tool_metadata: partial.tool_metadata.clone(),
                    ..ToolUpdate::new(
                        &partial.tool_name,
                        &delta.tool_call_id,
                        ToolState::InputStreaming,
                    )
                };
                self.upsert_tool(kind, update);
                Ok(Applied::Updated)
            }
            Chunk::ToolInputAvailable(available) => {
                // No tool-input-start is required: the part is created here if
                // the current step does not have it yet.
                self.upsert_tool(
                    ToolKind::from_flag(available.dynamic),
                    ToolUpdate {
                        input: Some(available.input.clone()),
                        provider_executed: available.provider_executed,
                        provider_metadata: available.provider_metadata.clone(),
                        title: available.title.clone(),
                        tool_metadata: available.tool_metadata.clone(),
                        ..ToolUpdate::new(
                            &available.tool_name,
                            &available.tool_call_id,
                            ToolState::InputAvailable,
                        )
                    },
                );
                Ok(Applied::Updated)
            }
            Chunk::ToolInputError(error) => {
                // An existing part of the current step decides the kind, so a
                // failed dynamic call is not duplicated as a static one.
                let step = last_step_start(&self.message.parts);
                let kind = self.message.parts[step..]
                    .iter()
                    .find(|part| {
                        part.as_tool()
                            .is_some_and(|tool| tool.tool_call_id == error.tool_call_id)
                    })
                    .and_then(ToolKind::of)
                    .unwrap_or(ToolKind::from_flag(error.dynamic));
                let (input, raw_input) = match kind {
                    // Static tools keep typed `input`, so bad input goes to
                    // `rawInput`.
                    ToolKind::Static => (None, Some(error.input.clone())),
                    ToolKind::Dynamic => (Some(error.input.clone()), None),
                };
                self.upsert_tool(
                    kind,
                    ToolUpdate {
                        input,
                        raw_input,
                        error_text: Some(error.error_text.clone()),
                        provider_executed: error.provider_executed,
                        provider_metadata: error.provider_metadata.clone(),
                        tool_metadata: error.tool_metadata.clone(),
                        ..ToolUpdate::new(
                            &error.tool_name,
                            &error.tool_call_id,
                            ToolState::OutputError,
                        )
                    },
                );
                Ok(Applied::Updated)
            }
            Chunk::ToolApprovalRequest(request) => {
                let (_, tool) = self.tool_mut("tool-approval-request", &request.tool_call_id)?;
                tool.state = ToolState::ApprovalRequested;
                tool.approval = Some(Approval {
                    id: request.approval_id.clone(),
                    signature: request.signature.clone(),
                    descriptor: request.approval_descriptor.clone(),
                    request_reason: request.reason.clone(),
                    is_automatic: request.is_automatic.filter(|automatic| *automatic),
                    ..Approval::default()
                });
                Ok(Applied::Updated)
            }
            Chunk::ToolApprovalResponse(response) => {
                // v7: the approval decided without the person (the part keeps what the
                // request said of it).
                let tool = self
                    .message
                    .parts
                    .iter_mut()
                    .filter_map(UiPart::as_tool_mut)
                    .find(|t| {
                        t.approval
                            .as_ref()
                            .is_some_and(|a| a.id == response.approval_id)
                    })
                    .ok_or_else(|| ReduceError::UnknownApproval {
                        approval_id: response.approval_id.clone(),
                    })?;
                tool.state = ToolState::ApprovalResponded;
                if let Some(approval) = tool.approval.as_mut() {
                    approval.approved = Some(response.approved);
                    approval.reason.clone_from(&response.reason);
                }
                if response.provider_executed.is_some() {
                    tool.provider_executed = response.provider_executed;
                }
                Ok(Applied::Updated)
            }
            Chunk::ToolOutputDenied(denied) => {
                // Only the state changes; the approval `{approved: false}` the
                // client recorded stays.
                let (_, tool) = self.tool_mut("tool-output-denied", &denied.tool_call_id)?;
                tool.state = ToolState::OutputDenied;
                Ok(Applied::Updated)
            }
            Chunk::ToolOutputAvailable(output) => {
                let (kind, tool) = self.tool_mut("tool-output-available", &output.tool_call_id)?;
                let update = ToolUpdate {
                    input: tool.input.take(),
                    output: Some(output.output.clone()),
                    preliminary: output.preliminary,
                    provider_executed: output.provider_executed,
                    provider_metadata: output.provider_metadata.clone(),
                    ..ToolUpdate::new(
                        &tool.tool_name,
                        &output.tool_call_id,
                        ToolState::OutputAvailable,
                    )
                };
                apply_tool_update(tool, kind, update);
                Ok(Applied::Updated)
            }
            Chunk::ToolOutputError(error) => {
                let (kind, tool) = self.tool_mut("tool-output-error", &error.tool_call_id)?;
                let update = ToolUpdate {
                    input: tool.input.take(),
                    raw_input: tool.raw_input.take(),
                    error_text: Some(error.error_text.clone()),
                    provider_executed: error.provider_executed,
                    provider_metadata: error.provider_metadata.clone(),
                    ..ToolUpdate::new(&tool.tool_name, &error.tool_call_id, ToolState::OutputError)
                };
                apply_tool_update(tool, kind, update);
                Ok(Applied::Updated)
            }
            Chunk::SourceUrl(source) => {
                self.message.parts.push(UiPart::SourceUrl(SourceUrlPart {
                    source_id: source.source_id.clone(),
                    url: source.url.clone(),
                    title: source.title.clone(),
                    provider_metadata: source.provider_metadata.clone(),
                }));
                Ok(Applied::Updated)
            }
            Chunk::SourceDocument(source) => {
                self.message
                    .parts
                    .push(UiPart::SourceDocument(SourceDocumentPart {
                        source_id: source.source_id.clone(),
                        media_type: source.media_type.clone(),
                        title: source.title.clone(),
                        filename: source.filename.clone(),
                        provider_metadata: source.provider_metadata.clone(),
                    }));
                Ok(Applied::Updated)
            }
            Chunk::File(file) => {
                self.message.parts.push(UiPart::File(FilePart {
                    media_type: file.media_type.clone(),
                    url: file.url.clone(),
                    filename: None,
                    provider_metadata: file.provider_metadata.clone(),
                }));
                Ok(Applied::Updated)
            }
            Chunk::Data(data) => {
                if data.transient == Some(true) {
                    return Ok(Applied::Transient(data.clone()));
                }
                // Same name and id: replace the data in place (only when the
                // chunk has an id; id-less data always appends).
                let existing = data.id.as_ref().and_then(|id| {
                    self.message.parts.iter_mut().find_map(|part| match part {
                        UiPart::Data(stored)
                            if stored.name == data.name && stored.id.as_ref() == Some(id) =>
                        {
                            Some(stored)
                        }
                        _ => None,
                    })
                });
                match existing {
                    Some(stored) => stored.data = data.data.clone(),
                    None => self.message.parts.push(UiPart::Data(DataPart {
                        name: data.name.clone(),
                        id: data.id.clone(),
                        data: data.data.clone(),
                    })),
                }
                Ok(Applied::Updated)
            }
            Chunk::Unknown(_) => Ok(Applied::Ignored),
        }
    }

    /// Deep-merges non-null metadata into the message; reports whether it did.
    fn merge_metadata(&mut self, metadata: Option<&Value>) -> bool {
        let Some(metadata) = metadata.filter(|value| !value.is_null()) else {
            return false;
        };
        match &mut self.message.metadata {
            Some(existing) if !existing.is_null() => deep_merge(existing, metadata.clone()),
            slot => *slot = Some(metadata.clone()),
        }
        true
    }

    /// The SDK's `getToolInvocation`: the current step first (front to back),
    /// then the whole message from the end.
    fn find_tool(
        &self,
        chunk_type: &'static str,
        tool_call_id: &str,
    ) -> Result<usize, ReduceError> {
        let parts = &self.message.parts;
        let matches = |part: &UiPart| {
            part.as_tool()
                .is_some_and(|tool| tool.tool_call_id == tool_call_id)
        };
        let step = last_step_start(parts);
        parts[step..]
            .iter()
            .position(matches)
            .map(|offset| step + offset)
            .or_else(|| parts.iter().rposition(matches))
            .ok_or_else(|| ReduceError::ToolCallNotFound {
                chunk_type,
                tool_call_id: tool_call_id.to_owned(),
            })
    }

    /// The tool part [`Self::find_tool`] finds, with its kind.
    fn tool_mut(
        &mut self,
        chunk_type: &'static str,
        tool_call_id: &str,
    ) -> Result<(ToolKind, &mut ToolPart), ReduceError> {
        let index = self.find_tool(chunk_type, tool_call_id)?;
        match self.message.parts.get_mut(index) {
            Some(UiPart::Tool(tool)) => Ok((ToolKind::Static, tool)),
            Some(UiPart::DynamicTool(tool)) => Ok((ToolKind::Dynamic, tool)),
            _ => Err(ReduceError::ToolCallNotFound {
                chunk_type,
                tool_call_id: tool_call_id.to_owned(),
            }),
        }
    }

    /// The SDK's `updateToolPart` / `updateDynamicToolPart` without an
    /// explicit part: update the part of this kind and call id in the current
    /// step, or push a new one.
    fn upsert_tool(&mut self, kind: ToolKind, update: ToolUpdate) {
        let step = last_step_start(&self.message.parts);
        let existing = self.message.parts[step..].iter_mut().find_map(|part| {
            let same_kind = ToolKind::of(part) == Some(kind);
            let tool = part.as_tool_mut()?;
            (same_kind && tool.tool_call_id == update.tool_call_id).then_some(tool)
        });
        if let Some(tool) = existing {
            apply_tool_update(tool, kind, update);
            return;
        }

        let is_result = update.is_result();
        let mut tool = ToolPart::new(update.tool_name, update.tool_call_id, update.state);
        tool.title = update.title;
        tool.tool_metadata = update.tool_metadata;
        tool.input = update.input;
        tool.output = update.output;
        tool.raw_input = match kind {
            ToolKind::Static => update.raw_input,
            ToolKind::Dynamic => None,
        };
        tool.error_text = update.error_text;
        tool.provider_executed = update.provider_executed;
        tool.preliminary = update.preliminary;
        if is_result {
            tool.result_provider_metadata = update.provider_metadata;
        } else {
            tool.call_provider_metadata = update.provider_metadata;
        }
        self.message.parts.push(match kind {
            ToolKind::Static => UiPart::Tool(tool),
            ToolKind::Dynamic => UiPart::DynamicTool(tool),
        });
    }
}

/// Writes `update` into an existing tool part (see [`ToolUpdate`] for which
/// fields are replaced and which only ever set).
fn apply_tool_update(tool: &mut ToolPart, kind: ToolKind, update: ToolUpdate) {
    let is_result = update.is_result();
    tool.state = update.state;
    if kind == ToolKind::Dynamic {
        tool.tool_name = update.tool_name;
    }
    tool.input = update.input;
    tool.output = update.output;
    tool.error_text = update.error_text;
    tool.raw_input = match kind {
        ToolKind::Static => update.raw_input,
        ToolKind::Dynamic => update.raw_input.or(tool.raw_input.take()),
    };
    tool.preliminary = update.preliminary;
    if update.title.is_some() {
        tool.title = update.title;
    }
    if update.tool_metadata.is_some() {
        tool.tool_metadata = update.tool_metadata;
    }
    // Once providerExecuted is set it stays for the rest of the stream.
    if update.provider_executed.is_some() {
        tool.provider_executed = update.provider_executed;
    }
    if let Some(metadata) = update.provider_metadata {
        if is_result {
            tool.result_provider_metadata = Some(metadata);
        } else {
            tool.call_provider_metadata = Some(metadata);
        }
    }
}

/// Text and reasoning blocks follow the same start/delta/end rules (§A.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Reasoning,
}

/// The mutable fields of an open text or reasoning part.
struct BlockMut<'a> {
    text: &'a mut String,
    state: &'a mut Option<TextState>,
    provider_metadata: &'a mut Option<ProviderMetadata>,
}

fn block_part_mut(parts: &mut [UiPart], index: usize, kind: BlockKind) -> Option<BlockMut<'_>> {
    match (parts.get_mut(index), kind) {
        (Some(UiPart::Text(p)), BlockKind::Text) => Some(BlockMut {
            text: &mut p.text,
            state: &mut p.state,
            provider_metadata: &mut p.provider_metadata,
        }),
        (Some(UiPart::Reasoning(p)), BlockKind::Reasoning) => Some(BlockMut {
            text: &mut p.text,
            state: &mut p.state,
            provider_metadata: &mut p.provider_metadata,
        }),
        _ => None,
    }
}

impl MessageReducer {
    fn active_blocks(&mut self, kind: BlockKind) -> &mut HashMap<String, usize> {
        match kind {
            BlockKind::Text => &mut self.active_text,
            BlockKind::Reasoning => &mut self.active_reasoning,
        }
    }

    /// Appends a delta to its open block; `None` if no block with that id is open.
    fn append_delta(&mut self, kind: BlockKind, delta: &chunk::Delta) -> Option<Applied> {
        let index = *self.active_blocks(kind).get(&delta.id)?;
        let block = block_part_mut(&mut self.message.parts, index, kind)?;
        block.text.push_str(&delta.delta);
        if delta.provider_metadata.is_some() {
            block.provider_metadata.clone_from(&delta.provider_metadata);
        }
        Some(Applied::Updated)
    }

    /// Closes an open block; `None` if no block with that id is open.
    fn end_block(&mut self, kind: BlockKind, end: &chunk::Boundary) -> Option<Applied> {
        let index = *self.active_blocks(kind).get(&end.id)?;
        let block = block_part_mut(&mut self.message.parts, index, kind)?;
        *block.state = Some(TextState::Done);
        if end.provider_metadata.is_some() {
            block.provider_metadata.clone_from(&end.provider_metadata);
        }
        self.active_blocks(kind).remove(&end.id);
        Some(Applied::Updated)
    }
}

/// `useChat`'s message list and the stream being applied to it.
///
/// Mirrors the SDK's `Chat.makeRequest` (`packages/ai/src/ui/chat.ts`):
///
/// * [`Conversation::begin_stream`] with `submit-message` continues the last
///   message if it is an assistant message, otherwise starts a fresh one; with
///   `regenerate-message` (and [`Conversation::begin_resume`]) it always
///   starts fresh.
/// * After every chunk that publishes ([`Applied::publishes`]) the message is
///   written back: it *replaces* the last message when the ids match, and is
///   *pushed* otherwise. So a continuation whose `start.messageId` differs
///   from the continued message's id duplicates it — the server must reuse
///   the id (§A.2, §A.9).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    messages: Vec<UiMessage>,
    active: Option<MessageReducer>,
}

impl Conversation {
    /// A conversation with this history and no active stream.
    pub fn new(messages: Vec<UiMessage>) -> Self {
        Self {
            messages,
            active: None,
        }
    }

    /// The messages as the UI shows them.
    pub fn messages(&self) -> &[UiMessage] {
        &self.messages
    }

    /// The messages, consuming the conversation (an active stream's
    /// unpublished changes are dropped, as in the SDK).
    pub fn into_messages(self) -> Vec<UiMessage> {
        self.messages
    }

    /// Appends a message (the user's turn).
    pub fn push(&mut self, message: UiMessage) {
        self.messages.push(message);
    }

    /// The reducer of the active stream, if any.
    pub fn active(&self) -> Option<&MessageReducer> {
        self.active.as_ref()
    }

    /// Starts applying a response stream. `fresh_message_id` is the
    /// client-generated id used when the stream does not continue the last
    /// message. For `regenerate-message` the caller has already cut the list
    /// back to the message being regenerated, as `Chat.regenerate` does.
    pub fn begin_stream(&mut self, trigger: Trigger, fresh_message_id: impl Into<String>) {
        let continued = match trigger {
            Trigger::SubmitMessage => self
                .messages
                .last()
                .filter(|message| message.role == Role::Assistant)
                .cloned(),
            Trigger::RegenerateMessage => None,
        };
        self.active = Some(match continued {
            Some(message) => MessageReducer::continuing(message),
            None => MessageReducer::new(fresh_message_id),
        });
    }

    /// Starts applying a resumed stream (`resume-stream`, `ai@6.0.264`): always
    /// from an empty message, so the replay must begin at the stream's
    /// `start` chunk (§A.8).
    pub fn begin_resume(&mut self, fresh_message_id: impl Into<String>) {
        self.active = Some(MessageReducer::new(fresh_message_id));
    }

    /// Applies one chunk of the active stream and writes the message back if
    /// it publishes.
    pub fn apply(&mut self, chunk: &Chunk) -> Result<Applied, ReduceError> {
        let reducer = self.active.as_mut().ok_or(ReduceError::NoActiveStream)?;
        let applied = reducer.apply(chunk)?;
        if applied.publishes() {
            let message = reducer.message();
            match self.messages.last_mut() {
                Some(last) if last.id == message.id => *last = message.clone(),
                _ => self.messages.push(message.clone()),
            }
        }
        Ok(applied)
    }

    /// Ends the active stream and returns its reducer (final message, finish
    /// reason, error). Unpublished changes are not written back, as in the SDK.
    pub fn end_stream(&mut self) -> Option<MessageReducer> {
        self.active.take()
    }

    /// `addToolApprovalResponse`: answers the approval `approval_id` in the
    /// *last* message (and in the active stream's message, if any). Only parts
    /// in `approval-requested` with that approval id change. Returns how many
    /// parts changed.
    pub fn add_tool_approval_response(
        &mut self,
        approval_id: &str,
        approved: bool,
        reason: Option<String>,
    ) -> usize {
        self.update_last_tools(|tool| {
            let Some(approval) = tool.approval.as_mut() else {
                return false;
            };
            if tool.state != ToolState::ApprovalRequested || approval.id != approval_id {
                return false;
            }
            tool.state = ToolState::ApprovalResponded;
            approval.approved = Some(approved);
            approval.reason.clone_from(&reason);
            true
        })
    }

    /// `addToolOutput` with a result: the tool part `tool_call_id` of the last
    /// message becomes `output-available`. Returns how many parts changed.
    pub fn add_tool_output(&mut self, tool_call_id: &str, output: Value) -> usize {
        self.update_last_tools(|tool| {
            if tool.tool_call_id != tool_call_id {
                return false;
            }
            tool.state = ToolState::OutputAvailable;
            tool.output = Some(output.clone());
            tool.error_text = None;
            true
        })
    }

    /// `addToolOutput` with `state: "output-error"`.
    pub fn add_tool_error(&mut self, tool_call_id: &str, error_text: impl Into<String>) -> usize {
        let error_text = error_text.into();
        self.update_last_tools(|tool| {
            if tool.tool_call_id != tool_call_id {
                return false;
            }
            tool.state = ToolState::OutputError;
            tool.output = None;
            tool.error_text = Some(error_text.clone());
            true
        })
    }

    /// Applies `update` to every tool part of the last message and of the
    /// active stream's message (the SDK updates both so the running stream
    /// does not overwrite the answer).
    fn update_last_tools(&mut self, mut update: impl FnMut(&mut ToolPart) -> bool) -> usize {
        let mut changed = 0;
        if let Some(last) = self.messages.last_mut() {
            for tool in last.parts.iter_mut().filter_map(UiPart::as_tool_mut) {
                if update(tool) {
                    changed += 1;
                }
            }
        }
        if let Some(reducer) = self.active.as_mut() {
            for tool in reducer
                .message
                .parts
                .iter_mut()
                .filter_map(UiPart::as_tool_mut)
            {
                update(tool);
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reduce(chunks: &[Chunk]) -> MessageReducer {
        let mut reducer = MessageReducer::new("client-id");
        for chunk in chunks {
            reducer
                .apply(chunk)
                .unwrap_or_else(|e| panic!("{chunk:?}: {e}"));
        }
        reducer
    }

    #[test]
    fn plain_text_stream_builds_a_done_text_part() {
        let reducer = reduce(&[
            Chunk::start("asst-1"),
            Chunk::start_step(),
            Chunk::text_start("t"),
            Chunk::text_delta("t", "Hel"),
            Chunk::text_delta("t", "lo"),
            Chunk::text_end("t"),
            Chunk::finish_step(),
            Chunk::finish(FinishReason::Stop),
        ]);
        let message = reducer.message();
        assert_eq!(message.id, "asst-1");
        assert_eq!(message.text(), "Hello");
        assert_eq!(
            serde_json::to_value(message).unwrap(),
            json!({"id": "asst-1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Hello", "state": "done"}
            ]})
        );
        assert_eq!(reducer.finish_reason(), Some(&FinishReason::Stop));
    }

    #[test]
    fn start_without_id_keeps_the_client_id_and_is_quiet() {
        let mut reducer = MessageReducer::new("client-id");
        assert_eq!(
            reducer.apply(&Chunk::Start(Default::default())),
            Ok(Applied::Quiet)
        );
        assert_eq!(reducer.message().id, "client-id");
    }

    #[test]
    fn metadata_merges_deeply_across_start_message_metadata_and_finish() {
        let mut reducer = MessageReducer::new("m");
        reducer
            .apply(&Chunk::Start(chunk::Start {
                message_id: None,
                message_metadata: Some(json!({"model": "demo", "usage": {"in": 1}})),
            }))
            .unwrap();
        reducer
            .apply(&Chunk::message_metadata(json!({"usage": {"out": 2}})))
            .unwrap();
        assert_eq!(
            reducer.apply(&Chunk::message_metadata(Value::Null)),
            Ok(Applied::Quiet)
        );
        let applied = reducer
            .apply(&Chunk::Finish(chunk::Finish {
                finish_reason: Some(FinishReason::Stop),
                message_metadata: Some(json!({"usage": {"in": 5}})),
            }))
            .unwrap();
        assert_eq!(
            applied,
            Applied::Finished {
                finish_reason: Some(FinishReason::Stop),
                metadata_updated: true
            }
        );
        assert!(applied.publishes());
        assert_eq!(
            reducer.message().metadata,
            Some(json!({"model": "demo", "usage": {"in": 5, "out": 2}}))
        );
    }

    #[test]
    fn reasoning_parts_record_their_id() {
        let reducer = reduce(&[
            Chunk::reasoning_start("r0"),
            Chunk::reasoning_delta("r0", "think"),
            Chunk::reasoning_end("r0"),
        ]);
        assert_eq!(
            reducer.message().parts,
            vec![UiPart::Reasoning(ReasoningPart {
                id: Some("r0".into()),
                text: "think".into(),
                state: Some(TextState::Done),
                provider_metadata: None
            })]
        );
    }

    #[test]
    fn delta_provider_metadata_replaces_only_when_present() {
        let signature = json!({"google": {"thoughtSignature": "abc"}});
        let reducer = reduce(&[
            Chunk::text_start("t"),
            Chunk::TextDelta(chunk::Delta {
                id: "t".into(),
                delta: "a".into(),
                provider_metadata: signature.as_object().cloned(),
            }),
            Chunk::text_delta("t", "b"),
            Chunk::text_end("t"),
        ]);
        let UiPart::Text(text) = &reducer.message().parts[0] else {
            panic!("not text")
        };
        assert_eq!(text.provider_metadata, signature.as_object().cloned());
    }

    #[test]
    fn streamed_tool_input_is_parsed_as_partial_json() {
        let mut reducer = MessageReducer::new("m");
        reducer
            .apply(&Chunk::tool_input_start("c1", "transfer_funds"))
            .unwrap();
        let tool = reducer.message().find_tool_part("c1").unwrap();
        assert_eq!(
            (tool.state, tool.input.clone()),
            (ToolState::InputStreaming, None)
        );

        for (delta, expected) in [
            (r#"{"recipient": "Ri"#, json!({"recipient": "Ri"})),
            (
                r#"n", "amount": 2"#,
                json!({"recipient": "Rin", "amount": 2}),
            ),
            ("5}", json!({"recipient": "Rin", "amount": 25})),
        ] {
            reducer
                .apply(&Chunk::tool_input_delta("c1", delta))
                .unwrap();
            assert_eq!(
                reducer.message().find_tool_part("c1").unwrap().input,
                Some(expected)
            );
        }
        reducer
            .apply(&Chunk::tool_input_available(
                "c1",
                "transfer_funds",
                json!({"recipient": "Rin", "amount": 25}),
            ))
            .unwrap();
        let tool = reducer.message().find_tool_part("c1").unwrap();
        assert_eq!(tool.state, ToolState::InputAvailable);
        assert_eq!(reducer.message().parts.len(), 1, "updated in place");
    }

    #[test]
    fn unparseable_partial_input_clears_input() {
        let mut reducer = MessageReducer::new("m");
        reducer.apply(&Chunk::tool_input_start("c1", "t")).unwrap();
        reducer
            .apply(&Chunk::tool_input_delta("c1", "{\"a\": 1"))
            .unwrap();
        reducer.apply(&Chunk::tool_input_delta("c1", " x")).unwrap();
        assert_eq!(reducer.message().find_tool_part("c1").unwrap().input, None);
    }

    #[test]
    fn tool_input_available_needs_no_start_and_keeps_call_provider_metadata() {
        let metadata = json!({"google": {"thoughtSignature": "sig"}});
        let reducer = reduce(&[Chunk::ToolInputAvailable(Box::new(
            chunk::ToolInputAvailable {
                tool_call_id: "c1".into(),
                tool_name: "get_weather".into(),
                input: json!({"city": "Oslo"}),
                provider_metadata: metadata.as_object().cloned(),
                ..Default::default()
            },
        ))]);
        assert_eq!(
            serde_json::to_value(&reducer.message().parts[0]).unwrap(),
            json!({"type": "tool-get_weather", "toolCallId": "c1", "state": "input-available",
                   "input": {"city": "Oslo"}, "callProviderMetadata": metadata})
        );
    }

    #[test]
    fn dynamic_tools_become_dynamic_tool_parts() {
        let reducer = reduce(&[
            Chunk::ToolInputStart(Box::new(chunk::ToolInputStart {
                tool_call_id: "c1".into(),
                tool_name: "mcp_search".into(),
                dynamic: Some(true),
                title: Some("Search".into()),
                ..Default::default()
            })),
            Chunk::tool_input_delta("c1", "{\"q\":\"ru"),
            Chunk::tool_output_available("c1", json!(["hit"])),
        ]);
        assert_eq!(
            serde_json::to_value(&reducer.message().parts[0]).unwrap(),
            json!({"type": "dynamic-tool", "toolName": "mcp_search", "toolCallId": "c1", "state": "output-available",
                   "title": "Search", "input": {"q": "ru"}, "output": ["hit"]})
        );
    }

    #[test]
    fn tool_input_error_on_a_static_tool_keeps_the_bad_input_as_raw_input() {
        let reducer = reduce(&[
            Chunk::tool_input_start("c1", "transfer_funds"),
            Chunk::tool_input_error("c1", "transfer_funds", json!("{amount: x"), "Invalid input"),
        ]);
        assert_eq!(
            serde_json::to_value(&reducer.message().parts).unwrap(),
            json!([{"type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-error",
                    "rawInput": "{amount: x", "errorText": "Invalid input"}])
        );
        // A dynamic part in the current step decides the kind, whatever the flag says.
        let reducer = reduce(&[
            Chunk::ToolInputStart(Box::new(chunk::ToolInputStart {
                tool_call_id: "c2".into(),
                tool_name: "d".into(),
                dynamic: Some(true),
                ..Default::default()
            })),
            Chunk::tool_input_error("c2", "d", json!({"x": 1}), "bad"),
        ]);
        assert_eq!(reducer.message().parts.len(), 1);
        let UiPart::DynamicTool(tool) = &reducer.message().parts[0] else {
            panic!("kind changed")
        };
        assert_eq!(
            (tool.state, tool.input.clone(), tool.raw_input.clone()),
            (ToolState::OutputError, Some(json!({"x": 1})), None)
        );
    }

    #[test]
    fn approval_then_output_keeps_the_approval_and_input() {
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "pay")]);
        conversation.begin_stream(Trigger::SubmitMessage, "fresh");
        for chunk in [
            Chunk::start("a1"),
            Chunk::tool_input_available("c1", "transfer_funds", json!({"amount": 25})),
            Chunk::ToolApprovalRequest(Box::new(chunk::ToolApprovalRequest {
                approval_id: "ap1".into(),
                tool_call_id: "c1".into(),
                signature: Some("sig".into()),
                ..Default::default()
            })),
        ] {
            conversation.apply(&chunk).unwrap();
        }
        assert_eq!(
            conversation.add_tool_approval_response("ap1", true, None),
            1
        );
        assert_eq!(
            conversation.add_tool_approval_response("ap1", true, None),
            0,
            "only approval-requested parts"
        );
        conversation
            .apply(&Chunk::tool_output_available("c1", json!({"ok": true})))
            .unwrap();
        let tool = conversation.messages()[1].find_tool_part("c1").unwrap();
        assert_eq!(tool.state, ToolState::OutputAvailable);
        assert_eq!(tool.input, Some(json!({"amount": 25})));
        assert_eq!(
            tool.approval,
            Some(Approval {
                id: "ap1".into(),
                approved: Some(true),
                reason: None,
                signature: Some("sig".into()),
                edited_input: None,
                ..Default::default()
            })
        );
    }

    #[test]
    fn output_denied_keeps_the_approval() {
        let mut reducer = reduce(&[
            Chunk::tool_input_available("c1", "t", json!({})),
            Chunk::tool_approval_request("ap1", "c1"),
        ]);
        let mut message = reducer.message().clone();
        if let Some(tool) = message.parts[0].as_tool_mut() {
            tool.state = ToolState::ApprovalResponded;
            tool.approval = Some(Approval {
                id: "ap1".into(),
                approved: Some(false),
                reason: Some("no".into()),
                signature: None,
                edited_input: None,
                ..Default::default()
            });
        }
        reducer = MessageReducer::continuing(message);
        reducer.apply(&Chunk::tool_output_denied("c1")).unwrap();
        let tool = reducer.message().find_tool_part("c1").unwrap();
        assert_eq!(tool.state, ToolState::OutputDenied);
        assert_eq!(tool.approval.as_ref().and_then(|a| a.approved), Some(false));
    }

    #[test]
    fn output_provider_metadata_goes_to_result_provider_metadata() {
        let reducer = reduce(&[
            Chunk::tool_input_available("c1", "t", json!({})),
            Chunk::ToolOutputAvailable(Box::new(chunk::ToolOutputAvailable {
                tool_call_id: "c1".into(),
                output: json!(1),
                provider_metadata: json!({"p": {"k": 1}}).as_object().cloned(),
                provider_executed: Some(true),
                preliminary: Some(true),
                ..Default::default()
            })),
            // A later output without providerExecuted keeps it; preliminary is replaced.
            Chunk::tool_output_available("c1", json!(2)),
        ]);
        let tool = reducer.message().find_tool_part("c1").unwrap();
        assert_eq!(
            tool.result_provider_metadata,
            json!({"p": {"k": 1}}).as_object().cloned()
        );
        assert_eq!(tool.call_provider_metadata, None);
        assert_eq!(tool.provider_executed, Some(true));
        assert_eq!(tool.preliminary, None);
        assert_eq!(tool.output, Some(json!(2)));
    }

    #[test]
    fn raw_input_is_cleared_by_a_static_result_but_kept_on_dynamic_tools() {
        // Static: a later output replaces the failed input's rawInput.
        let reducer = reduce(&[
            Chunk::tool_input_error("c1", "t", json!("{bad"), "Invalid input"),
            Chunk::tool_output_available("c1", json!(1)),
        ]);
        assert_eq!(
            reducer.message().find_tool_part("c1").unwrap().raw_input,
            None
        );
        // Static: an output error keeps it.
        let reducer = reduce(&[
            Chunk::tool_input_error("c1", "t", json!("{bad"), "Invalid input"),
            Chunk::tool_output_error("c1", "still bad"),
        ]);
        assert_eq!(
            reducer.message().find_tool_part("c1").unwrap().raw_input,
            Some(json!("{bad"))
        );
        // Dynamic: updates without rawInput keep the stored one.
        let message: UiMessage = serde_json::from_value(json!({"id": "m", "role": "assistant", "parts": [
            {"type": "dynamic-tool", "toolName": "d", "toolCallId": "c2", "state": "output-error", "rawInput": "{x", "errorText": "e"}
        ]}))
        .unwrap();
        let mut reducer = MessageReducer::continuing(message);
        reducer
            .apply(&Chunk::tool_output_available("c2", json!(2)))
            .unwrap();
        assert_eq!(
            reducer.message().find_tool_part("c2").unwrap().raw_input,
            Some(json!("{x"))
        );
    }

    #[test]
    fn tool_lookup_prefers_the_current_step() {
        // The same call id in two steps (a provider re-using ids): results go
        // to the current step's part.
        let reducer = reduce(&[
            Chunk::start_step(),
            Chunk::tool_input_available("c1", "t", json!({"n": 1})),
            Chunk::finish_step(),
            Chunk::start_step(),
            Chunk::tool_input_available("c1", "t", json!({"n": 2})),
            Chunk::tool_output_available("c1", json!("second")),
        ]);
        let tools: Vec<_> = reducer.message().tool_parts().collect();
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].state, ToolState::InputAvailable);
        assert_eq!(tools[1].output, Some(json!("second")));
    }

    #[test]
    fn data_parts_replace_by_name_and_id_and_transient_ones_are_not_stored() {
        let mut reducer = MessageReducer::new("m");
        for chunk in [
            Chunk::data_with_id("progress", "p1", json!({"pct": 10})),
            Chunk::data_with_id("status", "p1", json!("other name, same id")),
            Chunk::data("note", json!(1)),
            Chunk::data("note", json!(2)),
            Chunk::data_with_id("progress", "p1", json!({"pct": 90})),
        ] {
            assert_eq!(reducer.apply(&chunk), Ok(Applied::Updated));
        }
        let transient = Chunk::transient_data("pcm", json!("AAAA"));
        let Chunk::Data(expected) = transient.clone() else {
            unreachable!()
        };
        assert_eq!(reducer.apply(&transient), Ok(Applied::Transient(expected)));
        assert_eq!(
            serde_json::to_value(&reducer.message().parts).unwrap(),
            json!([
                {"type": "data-progress", "id": "p1", "data": {"pct": 90}},
                {"type": "data-status", "id": "p1", "data": "other name, same id"},
                {"type": "data-note", "data": 1},
                {"type": "data-note", "data": 2}
            ])
        );
    }

    #[test]
    fn sources_and_files_are_appended() {
        let reducer = reduce(&[
            Chunk::source_url("s1", "https://example.test"),
            Chunk::SourceDocument(chunk::SourceDocument {
                source_id: "d1".into(),
                media_type: "application/pdf".into(),
                title: "Terms".into(),
                ..Default::default()
            }),
            Chunk::file("data:image/png;base64,AA", "image/png"),
        ]);
        assert_eq!(
            serde_json::to_value(&reducer.message().parts).unwrap(),
            json!([
                {"type": "source-url", "sourceId": "s1", "url": "https://example.test"},
                {"type": "source-document", "sourceId": "d1", "mediaType": "application/pdf", "title": "Terms"},
                {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA"}
            ])
        );
    }

    #[test]
    fn error_abort_and_unknown_chunks_do_not_touch_the_message() {
        let mut reducer = reduce(&[Chunk::text_start("t"), Chunk::text_delta("t", "partial")]);
        let before = reducer.message().clone();
        assert_eq!(
            reducer.apply(&Chunk::error("Model overloaded")),
            Ok(Applied::Error {
                error_text: "Model overloaded".into()
            })
        );
        assert_eq!(
            reducer.apply(&Chunk::abort()),
            Ok(Applied::Aborted { reason: None })
        );
        assert_eq!(
            reducer.apply(&Chunk::Unknown(json!({"type": "reset-step"}))),
            Ok(Applied::Ignored)
        );
        assert_eq!(reducer.message(), &before);
        assert_eq!(reducer.error_text(), Some("Model overloaded"));
        assert!(reducer.is_aborted());
        assert_eq!(reducer.abort_reason(), None);
    }

    // -- Error rules: each one leaves the message unchanged. --

    fn assert_rejected(prefix: &[Chunk], bad: Chunk, expected: ReduceError) {
        let mut reducer = reduce(prefix);
        let before = reducer.clone();
        assert_eq!(reducer.apply(&bad), Err(expected));
        assert_eq!(reducer, before, "a rejected chunk changes nothing");
    }

    #[test]
    fn deltas_and_ends_without_their_start_are_rejected() {
        assert_rejected(
            &[],
            Chunk::text_delta("t", "x"),
            ReduceError::TextDeltaWithoutStart { id: "t".into() },
        );
        assert_rejected(
            &[],
            Chunk::text_end("t"),
            ReduceError::TextEndWithoutStart { id: "t".into() },
        );
        assert_rejected(
            &[],
            Chunk::reasoning_delta("r", "x"),
            ReduceError::ReasoningDeltaWithoutStart { id: "r".into() },
        );
        assert_rejected(
            &[],
            Chunk::reasoning_end("r"),
            ReduceError::ReasoningEndWithoutStart { id: "r".into() },
        );
        // Ended parts are closed for good.
        assert_rejected(
            &[Chunk::text_start("t"), Chunk::text_end("t")],
            Chunk::text_delta("t", "late"),
            ReduceError::TextDeltaWithoutStart { id: "t".into() },
        );
        // A text id is per kind: a reasoning id does not open text.
        assert_rejected(
            &[Chunk::reasoning_start("x")],
            Chunk::text_delta("x", "d"),
            ReduceError::TextDeltaWithoutStart { id: "x".into() },
        );
        assert_rejected(
            &[],
            Chunk::tool_input_delta("c9", "{"),
            ReduceError::ToolInputDeltaWithoutStart {
                tool_call_id: "c9".into(),
            },
        );
    }

    #[test]
    fn text_delta_after_finish_step_for_an_old_id_is_rejected() {
        assert_rejected(
            &[
                Chunk::start_step(),
                Chunk::text_start("t0"),
                Chunk::text_delta("t0", "a"),
                Chunk::finish_step(),
                Chunk::start_step(),
            ],
            Chunk::text_delta("t0", "b"),
            ReduceError::TextDeltaWithoutStart { id: "t0".into() },
        );
        assert_rejected(
            &[Chunk::reasoning_start("r0"), Chunk::finish_step()],
            Chunk::reasoning_end("r0"),
            ReduceError::ReasoningEndWithoutStart { id: "r0".into() },
        );
    }

    #[test]
    fn results_and_approvals_for_unknown_tool_calls_are_rejected() {
        let not_found = |chunk_type, id: &str| ReduceError::ToolCallNotFound {
            chunk_type,
            tool_call_id: id.to_owned(),
        };
        let prefix = [Chunk::tool_input_available("c1", "t", json!({}))];
        assert_rejected(
            &prefix,
            Chunk::tool_output_available("c2", json!(1)),
            not_found("tool-output-available", "c2"),
        );
        assert_rejected(
            &prefix,
            Chunk::tool_output_error("c2", "x"),
            not_found("tool-output-error", "c2"),
        );
        assert_rejected(
            &prefix,
            Chunk::tool_output_denied("c2"),
            not_found("tool-output-denied", "c2"),
        );
        assert_rejected(
            &prefix,
            Chunk::tool_approval_request("ap", "c2"),
            not_found("tool-approval-request", "c2"),
        );
        assert_rejected(
            &[],
            Chunk::tool_approval_request("ap", "c1"),
            not_found("tool-approval-request", "c1"),
        );
    }

    #[test]
    fn errors_read_well() {
        let error = ReduceError::ToolCallNotFound {
            chunk_type: "tool-output-available",
            tool_call_id: "c7".into(),
        };
        assert_eq!(
            error.to_string(),
            "tool-output-available: no tool invocation found for tool call `c7`"
        );
    }

    // -- Conversation write-back. --

    #[test]
    fn submit_starts_fresh_after_a_user_message_and_pushes_on_first_publish() {
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "hi")]);
        conversation.begin_stream(Trigger::SubmitMessage, "fresh-1");
        // Quiet chunks do not publish: nothing pushed yet.
        conversation
            .apply(&Chunk::Start(Default::default()))
            .unwrap();
        conversation.apply(&Chunk::start_step()).unwrap();
        assert_eq!(conversation.messages().len(), 1);
        conversation.apply(&Chunk::text_start("t")).unwrap();
        assert_eq!(conversation.messages().len(), 2);
        assert_eq!(conversation.messages()[1].id, "fresh-1");
        conversation.apply(&Chunk::text_delta("t", "yo")).unwrap();
        assert_eq!(
            conversation.messages().len(),
            2,
            "replaced, not pushed again"
        );
        assert_eq!(conversation.messages()[1].text(), "yo");
        assert!(conversation.end_stream().is_some());
        assert_eq!(
            conversation.apply(&Chunk::text_start("t")),
            Err(ReduceError::NoActiveStream)
        );
    }

    #[test]
    fn continuation_with_the_same_id_extends_the_assistant_message() {
        let assistant = reduce(&[
            Chunk::start("a1"),
            Chunk::tool_input_available("c1", "t", json!({})),
        ])
        .into_message();
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "go"), assistant]);
        conversation.begin_stream(Trigger::SubmitMessage, "fresh");
        conversation.apply(&Chunk::start("a1")).unwrap();
        conversation
            .apply(&Chunk::tool_output_available("c1", json!(1)))
            .unwrap();
        assert_eq!(conversation.messages().len(), 2);
        assert_eq!(
            conversation.messages()[1]
                .find_tool_part("c1")
                .unwrap()
                .state,
            ToolState::OutputAvailable
        );
    }

    #[test]
    fn continuation_with_a_different_id_duplicates_the_message_like_the_sdk() {
        let assistant = reduce(&[
            Chunk::start("a1"),
            Chunk::tool_input_available("c1", "t", json!({})),
        ])
        .into_message();
        let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "go"), assistant]);
        conversation.begin_stream(Trigger::SubmitMessage, "fresh");
        conversation.apply(&Chunk::start("a2")).unwrap();
        let ids: Vec<_> = conversation
            .messages()
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(ids, ["u1", "a1", "a2"]);
        assert_eq!(
            conversation.messages()[2].parts,
            conversation.messages()[1].parts
        );
    }

    #[test]
    fn regenerate_and_resume_start_from_an_empty_message() {
        let assistant = reduce(&[Chunk::start("a1"), Chunk::text_start("t")]).into_message();
        for resume in [false, true] {
            let mut conversation =
                Conversation::new(vec![UiMessage::user_text("u1", "go"), assistant.clone()]);
            if resume {
                conversation.begin_resume("fresh");
            } else {
                conversation.begin_stream(Trigger::RegenerateMessage, "fresh");
            }
            assert_eq!(
                conversation.active().unwrap().message(),
                &UiMessage::assistant("fresh")
            );
            // Replaying the stream's own start with the same id replaces in place.
            conversation.apply(&Chunk::start("a1")).unwrap();
            assert_eq!(conversation.messages()[1].parts, vec![]);
        }
    }

    #[test]
    fn tool_outputs_from_the_browser_update_the_last_message() {
        let assistant = reduce(&[
            Chunk::start("a1"),
            Chunk::tool_input_available("geo", "get_location", json!({})),
        ])
        .into_message();
        let mut conversation = Conversation::new(vec![assistant]);
        assert_eq!(conversation.add_tool_output("geo", json!({"lat": 1})), 1);
        assert!(last_assistant_message_is_complete_with_tool_calls_for(
            &conversation
        ));
        assert_eq!(conversation.add_tool_error("geo", "denied by browser"), 1);
        let tool = conversation.messages()[0].find_tool_part("geo").unwrap();
        assert_eq!(
            (tool.state, tool.output.clone(), tool.error_text.as_deref()),
            (ToolState::OutputError, None, Some("denied by browser"))
        );
        assert_eq!(conversation.add_tool_output("nope", json!(1)), 0);
    }

    fn last_assistant_message_is_complete_with_tool_calls_for(conversation: &Conversation) -> bool {
        super::super::message::last_assistant_message_is_complete_with_tool_calls(
            conversation.messages(),
        )
    }
}
