//! [`UiPart::from_value`]'s payloads, read by hand with [`Fields`].
//!
//! Until this module the part structs derived `Deserialize` and were read with
//! `serde_json::from_value`, one copy of serde_json's map and sequence visitors per struct in
//! the browser's wasm. The results and the errors are the derive's, field for field (see
//! [`Fields`]); `protocol::decode_tests` checks them against the derives, which the test build
//! still has. Fields are read in each struct's declaration order.

use serde::de::Error as _;
use serde_json::{Error, Map, Value};

use super::super::json_util::{Fields, invalid_type, opt_bool_of, opt_string_of, string_of};
use super::{
    Approval, DataPart, FilePart, PartDecodeError, ReasoningPart, SourceDocumentPart,
    SourceUrlPart, TextPart, TextState, ToolPart, ToolState, UiPart,
};

/// [`TextState`]'s variants and their wire names, in declaration order.
const TEXT_STATES: [TextState; 2] = [TextState::Streaming, TextState::Done];
const TEXT_STATE_NAMES: &[&str] = &["streaming", "done"];

/// [`ToolState`]'s variants and their wire names, in declaration order (the order serde's
/// "unknown variant" error lists them in).
const TOOL_STATES: [ToolState; 7] = [
    ToolState::InputStreaming,
    ToolState::InputAvailable,
    ToolState::ApprovalRequested,
    ToolState::ApprovalResponded,
    ToolState::OutputAvailable,
    ToolState::OutputError,
    ToolState::OutputDenied,
];
const TOOL_STATE_NAMES: &[&str] = &[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
];

/// The part of type `kind` from its object (`type` key included, and ignored).
pub(super) fn part(kind: String, map: Map<String, Value>) -> Result<UiPart, PartDecodeError> {
    let mut f = Fields::new(map);
    let part = match kind.as_str() {
        "text" => UiPart::Text(TextPart {
            text: f.string("text"),
            state: text_state(&mut f),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        "reasoning" => UiPart::Reasoning(ReasoningPart {
            id: f.opt_string("id"),
            text: f.string("text"),
            state: text_state(&mut f),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        "source-url" => UiPart::SourceUrl(SourceUrlPart {
            source_id: f.string("sourceId"),
            url: f.string("url"),
            title: f.opt_string("title"),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        "source-document" => UiPart::SourceDocument(SourceDocumentPart {
            source_id: f.string("sourceId"),
            media_type: f.string("mediaType"),
            title: f.string("title"),
            filename: f.opt_string("filename"),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        "file" => UiPart::File(FilePart {
            media_type: f.string("mediaType"),
            url: f.string("url"),
            filename: f.opt_string("filename"),
            provider_metadata: f.opt_object("providerMetadata"),
        }),
        "step-start" => UiPart::StepStart,
        "dynamic-tool" => {
            // `toolName` is read (and its error reported) before the rest of the part, as
            // when it was a struct of its own decoded first.
            let tool_name = f.string("toolName");
            if let Err(source) = f.check() {
                return Err(invalid(kind, source));
            }
            UiPart::DynamicTool(tool_part(tool_name, &mut f))
        }
        other => {
            if let Some(name) = other.strip_prefix("tool-") {
                UiPart::Tool(tool_part(name.to_owned(), &mut f))
            } else if let Some(name) = other.strip_prefix("data-") {
                UiPart::Data(DataPart {
                    name: name.to_owned(),
                    id: f.opt_string("id"),
                    data: f.value("data"),
                })
            } else {
                return Ok(UiPart::Unknown(Value::Object(f.into_map())));
            }
        }
    };
    match f.check() {
        Ok(()) => Ok(part),
        Err(source) => Err(invalid(kind, source)),
    }
}

fn invalid(part_type: String, source: Error) -> PartDecodeError {
    PartDecodeError::InvalidFields { part_type, source }
}

/// `state` of a text or reasoning part (`Option<TextState>`).
fn text_state(f: &mut Fields) -> Option<TextState> {
    let index = f.opt_variant("state", TEXT_STATE_NAMES)?;
    TEXT_STATES.get(index).copied()
}

/// The fields of a `tool-<name>` or `dynamic-tool` part (`toolName` is not one of them).
fn tool_part(tool_name: String, f: &mut Fields) -> ToolPart {
    ToolPart {
        tool_name,
        tool_call_id: f.string("toolCallId"),
        // The placeholder stands only when `state` is missing or invalid, and then the part
        // is an error.
        state: f
            .variant("state", TOOL_STATE_NAMES)
            .and_then(|index| TOOL_STATES.get(index).copied())
            .unwrap_or(ToolState::InputStreaming),
        title: f.opt_string("title"),
        input: f.keep_null("input"),
        output: f.keep_null("output"),
        raw_input: f.keep_null("rawInput"),
        error_text: f.opt_string("errorText"),
        approval: f.opt_with("approval", approval),
        provider_executed: f.opt_bool("providerExecuted"),
        call_provider_metadata: f.opt_object("callProviderMetadata"),
        result_provider_metadata: f.opt_object("resultProviderMetadata"),
        preliminary: f.opt_bool("preliminary"),
        tool_metadata: f.opt_object("toolMetadata"),
    }
}

/// A tool part's `approval` (not `null`). A derived struct read from a [`Value`] also accepts
/// its fields as an array in declaration order (serde's sequence form), so this does too.
fn approval(value: Value) -> Result<Approval, Error> {
    match value {
        Value::Object(map) => {
            let mut f = Fields::new(map);
            let approval = Approval {
                id: f.string("id"),
                approved: f.opt_bool("approved"),
                reason: f.opt_string("reason"),
                signature: f.opt_string("signature"),
                edited_input: f.opt_value("editedInput"),
                descriptor: f.opt_value("descriptor"),
                request_reason: f.opt_string("requestReason"),
                is_automatic: f.opt_bool("isAutomatic"),
                grant: f.opt_value("grant"),
                dismissed: f.opt_bool("dismissed"),
                step_up: f.opt_value("stepUp"),
            };
            f.check().map(|()| approval)
        }
        Value::Array(items) => approval_from_array(items),
        other => Err(invalid_type(&other, "struct Approval")),
    }
}

/// The sequence form of [`Approval`]: `[id, approved?, reason?, signature?, editedInput?,
/// descriptor?, requestReason?, isAutomatic?, grant?, dismissed?, stepUp?]`. Only `id` is
/// required; a twelfth element is an error once the eleven have been read.
fn approval_from_array(items: Vec<Value>) -> Result<Approval, Error> {
    let len = items.len();
    let mut items = items.into_iter();
    let Some(id) = items.next() else {
        return Err(Error::invalid_length(
            0,
            &"struct Approval with 11 elements",
        ));
    };
    let approval = Approval {
        id: string_of(id)?,
        approved: items.next().map_or(Ok(None), opt_bool_of)?,
        reason: items.next().map_or(Ok(None), opt_string_of)?,
        signature: items.next().map_or(Ok(None), opt_string_of)?,
        edited_input: items.next().filter(|value| !value.is_null()),
        descriptor: items.next().filter(|value| !value.is_null()),
        request_reason: items.next().map_or(Ok(None), opt_string_of)?,
        is_automatic: items.next().map_or(Ok(None), opt_bool_of)?,
        grant: items.next().filter(|value| !value.is_null()),
        dismissed: items.next().map_or(Ok(None), opt_bool_of)?,
        step_up: items.next().filter(|value| !value.is_null()),
    };
    match items.next() {
        None => Ok(approval),
        Some(_) => Err(Error::invalid_length(len, &"fewer elements in array")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_tables_match_the_wire_names() {
        assert_eq!(TOOL_STATES.len(), TOOL_STATE_NAMES.len());
        for (state, name) in TOOL_STATES.iter().zip(TOOL_STATE_NAMES) {
            assert_eq!(state.as_str(), *name);
            assert_eq!(serde_json::to_value(state).ok(), Some(Value::from(*name)));
        }
        assert_eq!(TEXT_STATES.len(), TEXT_STATE_NAMES.len());
        for (state, name) in TEXT_STATES.iter().zip(TEXT_STATE_NAMES) {
            assert_eq!(serde_json::to_value(state).ok(), Some(Value::from(*name)));
        }
    }
}
