//! Response → events: the streamed `GenerateContentResponse` chunks as model events.

use super::errors::{error_from_body, error_in};
use super::request::google_data;
use super::wire::{Part, StreamChunk, UsageMetadata};
use super::*;

/// Decodes one attempt's stream.
#[derive(Debug, Default)]
pub(super) struct GeminiDecoder {
    /// Any response chunk arrived.
    saw_chunk: bool,
    /// Function calls emitted so far.
    pub(super) calls: usize,
    pub(super) finish_reason: Option<String>,
    pub(super) block_reason: Option<String>,
    pub(super) usage: Option<UsageMetadata>,
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
    pub(super) fn part(&mut self, part: Part, events: &mut Vec<ModelEvent>) {
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
pub(super) fn map_finish_reason(reason: &str, made_calls: bool) -> FinishReason {
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

pub(super) fn usage(meta: UsageMetadata) -> Usage {
    gemini_usage(
        meta.prompt_token_count,
        meta.candidates_token_count,
        meta.thoughts_token_count,
        meta.total_token_count,
    )
}

/// Gemini's token counts as ours (REST and Live). Thought tokens are billed as output, so they
/// count as output.
pub(in crate::models::providers) fn gemini_usage(
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
