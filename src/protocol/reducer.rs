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
//!
//! The rules live by what they touch: [`blocks`] for text and reasoning parts,
//! [`tools`] for tool parts (input streaming, approvals, results), and
//! [`conversation`] for the message list. This file keeps the dispatch, the
//! stream's own state (finish, abort, error, metadata) and the parts that are
//! only ever appended (sources, files, data).

mod blocks;
mod conversation;
mod tools;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use serde_json::Value;

use super::chunk::{self, Chunk, FinishReason};
use super::json_util::deep_merge;
use super::message::{DataPart, FilePart, SourceDocumentPart, SourceUrlPart, UiMessage, UiPart};

use blocks::BlockKind;
use tools::PartialToolCall;

pub use conversation::Conversation;

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
            Chunk::Start(start) => Ok(self.start(start)),
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
            Chunk::Finish(finish) => Ok(self.finish(finish)),
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
            Chunk::TextStart(start) => Ok(self.start_block(BlockKind::Text, start)),
            Chunk::TextDelta(delta) => self.append_delta(BlockKind::Text, delta).ok_or_else(|| {
                ReduceError::TextDeltaWithoutStart {
                    id: delta.id.clone(),
                }
            }),
            Chunk::TextEnd(end) => self
                .end_block(BlockKind::Text, end)
                .ok_or_else(|| ReduceError::TextEndWithoutStart { id: end.id.clone() }),
            Chunk::ReasoningStart(start) => Ok(self.start_block(BlockKind::Reasoning, start)),
            Chunk::ReasoningDelta(delta) => self
                .append_delta(BlockKind::Reasoning, delta)
                .ok_or_else(|| ReduceError::ReasoningDeltaWithoutStart {
                    id: delta.id.clone(),
                }),
            Chunk::ReasoningEnd(end) => self
                .end_block(BlockKind::Reasoning, end)
                .ok_or_else(|| ReduceError::ReasoningEndWithoutStart { id: end.id.clone() }),
            Chunk::ToolInputStart(start) => Ok(self.tool_input_start(start)),
            Chunk::ToolInputDelta(delta) => self.tool_input_delta(delta),
            Chunk::ToolInputAvailable(available) => Ok(self.tool_input_available(available)),
            Chunk::ToolInputError(error) => Ok(self.tool_input_error(error)),
            Chunk::ToolApprovalRequest(request) => self.tool_approval_request(request),
            Chunk::ToolApprovalResponse(response) => self.tool_approval_response(response),
            Chunk::ToolOutputDenied(denied) => self.tool_output_denied(denied),
            Chunk::ToolOutputAvailable(output) => self.tool_output_available(output),
            Chunk::ToolOutputError(error) => self.tool_output_error(error),
            Chunk::SourceUrl(source) => Ok(self.append(UiPart::SourceUrl(SourceUrlPart {
                source_id: source.source_id.clone(),
                url: source.url.clone(),
                title: source.title.clone(),
                provider_metadata: source.provider_metadata.clone(),
            }))),
            Chunk::SourceDocument(source) => {
                Ok(self.append(UiPart::SourceDocument(SourceDocumentPart {
                    source_id: source.source_id.clone(),
                    media_type: source.media_type.clone(),
                    title: source.title.clone(),
                    filename: source.filename.clone(),
                    provider_metadata: source.provider_metadata.clone(),
                })))
            }
            Chunk::File(file) => Ok(self.append(UiPart::File(FilePart {
                media_type: file.media_type.clone(),
                url: file.url.clone(),
                filename: None,
                provider_metadata: file.provider_metadata.clone(),
            }))),
            Chunk::Data(data) => Ok(self.data(data)),
            Chunk::Unknown(_) => Ok(Applied::Ignored),
        }
    }

    /// `start`: the server may rename the message and attach metadata.
    fn start(&mut self, start: &chunk::Start) -> Applied {
        if let Some(id) = &start.message_id {
            self.message.id.clone_from(id);
        }
        let merged = self.merge_metadata(start.message_metadata.as_ref());
        if start.message_id.is_some() || merged {
            Applied::Updated
        } else {
            Applied::Quiet
        }
    }

    /// `finish`: remembers the reason and merges the last metadata.
    fn finish(&mut self, finish: &chunk::Finish) -> Applied {
        if let Some(reason) = &finish.finish_reason {
            self.finish_reason = Some(reason.clone());
        }
        let metadata_updated = self.merge_metadata(finish.message_metadata.as_ref());
        Applied::Finished {
            finish_reason: self.finish_reason.clone(),
            metadata_updated,
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

    /// Sources and files: appended as they come.
    fn append(&mut self, part: UiPart) -> Applied {
        self.message.parts.push(part);
        Applied::Updated
    }

    /// A data chunk: transient ones go to the caller; stored ones replace the
    /// part with the same name and id, or are appended.
    fn data(&mut self, data: &chunk::DataChunk) -> Applied {
        if data.transient == Some(true) {
            return Applied::Transient(data.clone());
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
        Applied::Updated
    }
}
