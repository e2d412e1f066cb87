//! [`Chunk::from_value`]'s payloads, read by hand with [`Fields`].
//!
//! Until this module the payload structs derived `Deserialize` and were read with
//! `serde_json::from_value`; each derive put its own copy of serde_json's map and sequence
//! visitors into the browser's wasm (with the message parts' derives, ~20 KB gzip). The
//! results and the errors are the derive's, field for field (see [`Fields`]);
//! `protocol::decode_tests` checks them against the derives, which the test build still has.
//!
//! Fields are read in each struct's declaration order: when several required keys are
//! missing, serde names the first declared one.

use serde_json::{Map, Value};

use super::super::json_util::Fields;
use super::{
    Abort, Boundary, Chunk, ChunkDecodeError, DataChunk, Delta, ErrorChunk, File, Finish,
    FinishReason, MessageMetadata, SourceDocument, SourceUrl, Start, ToolApprovalRequest,
    ToolApprovalResponse, ToolInputAvailable, ToolInputDelta, ToolInputError, ToolInputStart,
    ToolOutputAvailable, ToolOutputDenied, ToolOutputError,
};

/// The chunk of type `kind` from its object (`type` key included, and ignored).
pub(super) fn chunk(kind: String, map: Map<String, Value>) -> Result<Chunk, ChunkDecodeError> {
    let mut f = Fields::new(map);
    let chunk = match kind.as_str() {
        "start" => Chunk::Start(Start {
            message_id: f.opt_string("messageId"),
            message_metadata: f.keep_null("messageMetadata"),
        }),
        "start-step" => Chunk::StartStep,
        "finish-step" => Chunk::FinishStep,
        "finish" => Chunk::Finish(Finish {
            finish_reason: f
                .opt_string("finishReason")
                .map(|reason| FinishReason::from_wire(&reason)),
            message_metadata: f.keep_null("messageMetadata"),
        }),
        "abort" => Chunk::Abort(Abort {
            reason: f.opt_string("reason"),
        }),
        "error" => Chunk::Error(ErrorChunk {
            error_text: f.string("errorText"),
        }),
        "message-metadata" => Chunk::MessageMetadata(MessageMetadata {
            message_metadata: f.value("messageMetadata"),
        }),
        "text-start" => Chunk::TextStart(boundary(&mut f)),
        "text-delta" => Chunk::TextDelta(delta(&mut f)),
        "text-end" => Chunk::TextEnd(boundary(&mut f)),
        "reasoning-start" => Chunk::ReasoningStart(boundary(&mut f)),
        "reasoning-delta" => Chunk::ReasoningDelta(delta(&mut f)),
        "reasoning-end" => Chunk::ReasoningEnd(boundary(&mut f)),
        "tool-input-start" => Chunk::ToolInputStart(Box::new(ToolInputStart {
            tool_call_id: f.string("toolCallId"),
            tool_name: f.string("toolName"),
            provider_executed: f.opt_bool("providerExecuted"),
            dynamic: f.opt_bool("dynamic"),
            title: f.opt_string("title"),
            provider_metadata: f.opt_object("providerMetadata"),
            tool_metadata: f.opt_object("toolMetadata"),
        })),
        "tool-input-delta" => Chunk::ToolInputDelta(ToolInputDelta {
            tool_call_id: f.string("toolCallId"),
            input_text_delta: f.string("inputTextDelta"),
        }),
        "tool-input-available" => Chunk::ToolInputAvailable(Box::new(ToolInputAvailable {
            tool_call_id: f.string("toolCallId"),
            tool_name: f.string("toolName"),
            input: f.value("input"),
            provider_executed: f.opt_bool("providerExecuted"),
            provider_metadata: f.opt_object("providerMetadata"),
            dynamic: f.opt_bool("dynamic"),
            title: f.opt_string("title"),
            tool_metadata: f.opt_object("toolMetadata"),
        })),
        "tool-input-error" => Chunk::ToolInputError(Box::new(ToolInputError {
            tool_call_id: f.string("toolCallId"),
            tool_name: f.string("toolName"),
            input: f.value("input"),
            error_text: f.string("errorText"),
            provider_executed: f.opt_bool("providerExecuted"),
            provider_metadata: f.opt_object("providerMetadata"),
            dynamic: f.opt_bool("dynamic"),
            title: f.opt_string("title"),
            tool_metadata: f.opt_object("toolMetadata"),
        })),
        "tool-approval-request" => Chunk::ToolApprovalRequest(Box::new(ToolApprovalRequest {
            approval_id: f.string("approvalId"),
            tool_call_id: f.string("toolCallId"),
            signature: f.opt_string("signature"),
            approval_descriptor: f.opt_value("approvalDescriptor"),
            reason: f.opt_string("reason"),
            is_automatic: f.opt_bool("isAutomatic"),
        })),
        "tool-approval-response" => Chunk::ToolApprovalResponse(ToolApprovalResponse {
            approval_id: f.string("approvalId"),
            approved: f.bool("approved"),
            reason: f.opt_string("reason"),
            provider_executed: f.opt_bool("providerExecuted"),
        }),
        "tool-output-available" => Chunk::ToolOutputAvailable(Box::new(ToolOutputAvailable {
            tool_call_id: f.string("toolCallId"),
            output: f.value("output"),
            provider_executed: f.opt_bool("providerExecuted"),
            dynamic: f.opt_bool("dynamic"),
            preliminary: f.opt_bool("preliminary"),
            provider_metadata: f.opt_object("providerMetadata"),
            tool_metadata: f.opt_object("toolMetadata"),
        })),
        "tool-output-error" => Chunk::ToolOutputError(Box::new(ToolOutputError {
            tool_call_id: f.string("toolCallId"),
            error_text: f.string("errorText"),
            provider_executed: f.opt_bool("providerExecuted"),
            dynamic: f.opt_bool("dynamic"),
            provider_metadata: f.opt_object("providerMetadata"),
            tool_metadata: f.opt_object("toolMetadata"),
        })),
        "tool-output-denied" => Chunk::ToolOutputDenied(ToolOutputDenied {
            tool_call_id: f.string("toolCallId"),
        }),
        "source-url" => Chunk::SourceUrl(SourceUrl {
            source_id: f.string("sourceId"),
            url: f.string("url"),
            title: f.opt_string("title"),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        "source-document" => Chunk::SourceDocument(SourceDocument {
            source_id: f.string("sourceId"),
            media_type: f.string("mediaType"),
            title: f.string("title"),
            filename: f.opt_string("filename"),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        "file" => Chunk::File(File {
            url: f.string("url"),
            media_type: f.string("mediaType"),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        other => match other.strip_prefix("data-") {
            Some(name) => Chunk::Data(DataChunk {
                name: name.to_owned(),
                id: f.opt_string("id"),
                data: f.value("data"),
                transient: f.opt_bool("transient"),
            }),
            None => return Ok(Chunk::Unknown(Value::Object(f.into_map()))),
        },
    };
    match f.check() {
        Ok(()) => Ok(chunk),
        Err(source) => Err(ChunkDecodeError::InvalidFields {
            chunk_type: kind,
            source,
        }),
    }
}

/// `text-start`, `text-end`, `reasoning-start`, `reasoning-end`.
fn boundary(f: &mut Fields) -> Boundary {
    Boundary {
        id: f.string("id"),
        provider_metadata: f.opt_object("providerMetadata"),
    }
}

/// `text-delta`, `reasoning-delta`.
fn delta(f: &mut Fields) -> Delta {
    Delta {
        id: f.string("id"),
        delta: f.string("delta"),
        provider_metadata: f.opt_object("providerMetadata"),
    }
}
