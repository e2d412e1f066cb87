//! Tool parts: input streaming, approvals and results (the SDK's
//! `updateToolPart` / `updateDynamicToolPart` and `getToolInvocation`).

use serde_json::Value;

use super::{Applied, MessageReducer, ReduceError};
use crate::protocol::chunk::{self, ProviderMetadata, ToolMetadata};
use crate::protocol::message::{Approval, ToolPart, ToolState, UiPart, last_step_start};
use crate::protocol::partial_json::parse_partial_json;

/// A tool call whose input is still streaming (`partialToolCalls`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PartialToolCall {
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

impl MessageReducer {
    /// `tool-input-start`: a call whose input will stream.
    pub(super) fn tool_input_start(&mut self, start: &chunk::ToolInputStart) -> Applied {
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
        Applied::Updated
    }

    /// `tool-input-delta`: more raw input, re-parsed as partial JSON.
    pub(super) fn tool_input_delta(
        &mut self,
        delta: &chunk::ToolInputDelta,
    ) -> Result<Applied, ReduceError> {
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

    /// `tool-input-available`: the complete input.
    pub(super) fn tool_input_available(
        &mut self,
        available: &chunk::ToolInputAvailable,
    ) -> Applied {
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
        Applied::Updated
    }

    /// `tool-input-error`: input the model produced but the tool cannot take.
    pub(super) fn tool_input_error(&mut self, error: &chunk::ToolInputError) -> Applied {
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
        Applied::Updated
    }

    /// `tool-approval-request`: the call waits for a person.
    pub(super) fn tool_approval_request(
        &mut self,
        request: &chunk::ToolApprovalRequest,
    ) -> Result<Applied, ReduceError> {
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

    /// `tool-approval-response`: the approval was decided.
    pub(super) fn tool_approval_response(
        &mut self,
        response: &chunk::ToolApprovalResponse,
    ) -> Result<Applied, ReduceError> {
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

    /// `tool-output-denied`: the call will not run.
    pub(super) fn tool_output_denied(
        &mut self,
        denied: &chunk::ToolOutputDenied,
    ) -> Result<Applied, ReduceError> {
        // Only the state changes; the approval `{approved: false}` the
        // client recorded stays.
        let (_, tool) = self.tool_mut("tool-output-denied", &denied.tool_call_id)?;
        tool.state = ToolState::OutputDenied;
        Ok(Applied::Updated)
    }

    /// `tool-output-available`: the call's result.
    pub(super) fn tool_output_available(
        &mut self,
        output: &chunk::ToolOutputAvailable,
    ) -> Result<Applied, ReduceError> {
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

    /// `tool-output-error`: the call failed.
    pub(super) fn tool_output_error(
        &mut self,
        error: &chunk::ToolOutputError,
    ) -> Result<Applied, ReduceError> {
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
