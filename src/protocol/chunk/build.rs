//! Building chunks: constructors for the common shapes (optional keys stay unset) and
//! `From<Payload> for Chunk`.

use serde_json::Value;

use super::*;

impl Chunk {
    // -- Constructors for the common shapes; optional keys stay unset. --

    /// `start` with the assistant message id (always set it: §A.9).
    pub fn start(message_id: impl Into<String>) -> Self {
        Self::Start(Start {
            message_id: Some(message_id.into()),
            message_metadata: None,
        })
    }

    /// `start-step`.
    pub fn start_step() -> Self {
        Self::StartStep
    }

    /// `finish-step`.
    pub fn finish_step() -> Self {
        Self::FinishStep
    }

    /// `finish` with a reason.
    pub fn finish(reason: FinishReason) -> Self {
        Self::Finish(Finish {
            finish_reason: Some(reason),
            message_metadata: None,
        })
    }

    /// `abort` without a reason (the form every v6 client accepts).
    pub fn abort() -> Self {
        Self::Abort(Abort { reason: None })
    }

    /// `error` with user-facing text.
    pub fn error(error_text: impl Into<String>) -> Self {
        Self::Error(ErrorChunk {
            error_text: error_text.into(),
        })
    }

    /// `message-metadata`.
    pub fn message_metadata(metadata: Value) -> Self {
        Self::MessageMetadata(MessageMetadata {
            message_metadata: metadata,
        })
    }

    /// `text-start`.
    pub fn text_start(id: impl Into<String>) -> Self {
        Self::TextStart(Boundary::new(id))
    }

    /// `text-delta`.
    pub fn text_delta(id: impl Into<String>, delta: impl Into<String>) -> Self {
        Self::TextDelta(Delta::new(id, delta))
    }

    /// `text-end`.
    pub fn text_end(id: impl Into<String>) -> Self {
        Self::TextEnd(Boundary::new(id))
    }

    /// `reasoning-start`.
    pub fn reasoning_start(id: impl Into<String>) -> Self {
        Self::ReasoningStart(Boundary::new(id))
    }

    /// `reasoning-delta`.
    pub fn reasoning_delta(id: impl Into<String>, delta: impl Into<String>) -> Self {
        Self::ReasoningDelta(Delta::new(id, delta))
    }

    /// `reasoning-end`.
    pub fn reasoning_end(id: impl Into<String>) -> Self {
        Self::ReasoningEnd(Boundary::new(id))
    }

    /// `tool-input-start` for a static tool.
    pub fn tool_input_start(tool_call_id: impl Into<String>, tool_name: impl Into<String>) -> Self {
        Self::ToolInputStart(Box::new(ToolInputStart {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            ..Default::default()
        }))
    }

    /// `tool-input-delta`.
    pub fn tool_input_delta(
        tool_call_id: impl Into<String>,
        input_text_delta: impl Into<String>,
    ) -> Self {
        Self::ToolInputDelta(ToolInputDelta {
            tool_call_id: tool_call_id.into(),
            input_text_delta: input_text_delta.into(),
        })
    }

    /// `tool-input-available` for a static tool.
    pub fn tool_input_available(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        input: Value,
    ) -> Self {
        Self::ToolInputAvailable(Box::new(ToolInputAvailable {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            input,
            ..Default::default()
        }))
    }

    /// `tool-input-error` for a static tool.
    pub fn tool_input_error(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        input: Value,
        error_text: impl Into<String>,
    ) -> Self {
        Self::ToolInputError(Box::new(ToolInputError {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            input,
            error_text: error_text.into(),
            ..Default::default()
        }))
    }

    /// `tool-approval-request` without a signature.
    pub fn tool_approval_request(
        approval_id: impl Into<String>,
        tool_call_id: impl Into<String>,
    ) -> Self {
        Self::ToolApprovalRequest(Box::new(ToolApprovalRequest {
            approval_id: approval_id.into(),
            tool_call_id: tool_call_id.into(),
            ..Default::default()
        }))
    }

    /// `tool-approval-response` (v7): an approval decided without the person.
    pub fn tool_approval_response(
        approval_id: impl Into<String>,
        approved: bool,
        reason: Option<String>,
    ) -> Self {
        Self::ToolApprovalResponse(ToolApprovalResponse {
            approval_id: approval_id.into(),
            approved,
            reason,
            provider_executed: None,
        })
    }

    /// `tool-output-available`.
    pub fn tool_output_available(tool_call_id: impl Into<String>, output: Value) -> Self {
        Self::ToolOutputAvailable(Box::new(ToolOutputAvailable {
            tool_call_id: tool_call_id.into(),
            output,
            ..Default::default()
        }))
    }

    /// `tool-output-error`.
    pub fn tool_output_error(
        tool_call_id: impl Into<String>,
        error_text: impl Into<String>,
    ) -> Self {
        Self::ToolOutputError(Box::new(ToolOutputError {
            tool_call_id: tool_call_id.into(),
            error_text: error_text.into(),
            ..Default::default()
        }))
    }

    /// `tool-output-denied`.
    pub fn tool_output_denied(tool_call_id: impl Into<String>) -> Self {
        Self::ToolOutputDenied(ToolOutputDenied {
            tool_call_id: tool_call_id.into(),
        })
    }

    /// `source-url` without a title.
    pub fn source_url(source_id: impl Into<String>, url: impl Into<String>) -> Self {
        Self::SourceUrl(SourceUrl {
            source_id: source_id.into(),
            url: url.into(),
            ..Default::default()
        })
    }

    /// `file`.
    pub fn file(url: impl Into<String>, media_type: impl Into<String>) -> Self {
        Self::File(File {
            url: url.into(),
            media_type: media_type.into(),
            provider_metadata: None,
        })
    }

    /// A persistent `data-<name>` chunk without an id (always appended).
    pub fn data(name: impl Into<String>, data: Value) -> Self {
        Self::Data(DataChunk {
            name: name.into(),
            id: None,
            data,
            transient: None,
        })
    }

    /// A `data-<name>` chunk with an id: a later one with the same name and id
    /// replaces the stored part's data (progress indicators, live status).
    pub fn data_with_id(name: impl Into<String>, id: impl Into<String>, data: Value) -> Self {
        Self::Data(DataChunk {
            name: name.into(),
            id: Some(id.into()),
            data,
            transient: None,
        })
    }

    /// A transient `data-<name>` chunk: delivered to the client's `onData`,
    /// never stored in the message.
    pub fn transient_data(name: impl Into<String>, data: Value) -> Self {
        Self::Data(DataChunk {
            name: name.into(),
            id: None,
            data,
            transient: Some(true),
        })
    }
}

/// `From<Payload> for Chunk` for every payload type that belongs to exactly
/// one variant ([`Boundary`] and [`Delta`] are shared, so they have none).
macro_rules! chunk_from_payload {
    ($($payload:ident => $variant:ident),* $(,)?) => {
        $(impl From<$payload> for Chunk {
            fn from(payload: $payload) -> Self {
                Self::$variant(payload.into())
            }
        })*
    };
}

chunk_from_payload! {
    Start => Start,
    Finish => Finish,
    Abort => Abort,
    ErrorChunk => Error,
    MessageMetadata => MessageMetadata,
    ToolInputStart => ToolInputStart,
    ToolInputDelta => ToolInputDelta,
    ToolInputAvailable => ToolInputAvailable,
    ToolInputError => ToolInputError,
    ToolApprovalRequest => ToolApprovalRequest,
    ToolApprovalResponse => ToolApprovalResponse,
    ToolOutputAvailable => ToolOutputAvailable,
    ToolOutputError => ToolOutputError,
    ToolOutputDenied => ToolOutputDenied,
    SourceUrl => SourceUrl,
    SourceDocument => SourceDocument,
    File => File,
    DataChunk => Data,
}
