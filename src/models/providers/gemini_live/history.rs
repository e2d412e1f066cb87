//! The runner's history as Live turns: text only (calls and results described, thought
//! summaries left out), built on the REST provider's conversion (see the module docs of
//! [`super`]).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::NAMESPACE;
use crate::agent::history::{HistoryItem, ToolResult};
use crate::models::providers::gemini::{self, Content, Part};
use crate::models::providers::live_sync::{provider_call_id, provider_call_ids};

/// Runner call id → Live call id, from the calls in `history`.
pub(super) fn live_ids(history: &[HistoryItem]) -> HashMap<&str, String> {
    provider_call_ids(history, NAMESPACE)
}

/// The Live call id kept in a call's `provider_data`.
pub(super) fn google_id(provider_data: &Option<Value>) -> Option<String> {
    provider_call_id(provider_data, NAMESPACE)
}

/// History as Live `clientContent` turns: the REST conversion, with function calls and results
/// as text and thought summaries left out (see the module docs).
pub(super) fn live_contents(items: &[HistoryItem]) -> Vec<Content> {
    let contents = gemini::contents(items, false)
        .into_iter()
        .map(|content| Content {
            role: content.role,
            parts: content.parts.into_iter().filter_map(live_part).collect(),
        })
        .filter(|content| !content.parts.is_empty())
        .collect();
    merge_adjacent(contents)
}

fn live_part(mut part: Part) -> Option<Part> {
    part.thought_signature = None;
    if part.thought == Some(true) {
        return None;
    }
    if let Some(call) = part.function_call.take() {
        let args = call.args.unwrap_or_else(|| json!({}));
        return Some(text_part(format!(
            "[Called the tool {} with arguments {args}]",
            call.name
        )));
    }
    if let Some(response) = part.function_response.take() {
        return Some(text_part(format!(
            "[Result of the tool {}: {}]",
            response.name, response.response
        )));
    }
    (part.text.as_ref().is_some_and(|t| !t.is_empty())
        || part.inline_data.is_some()
        || part.file_data.is_some())
    .then_some(part)
}

pub(super) fn text_part(text: String) -> Part {
    Part {
        text: Some(text),
        ..Part::default()
    }
}

/// Results that cannot go as a `toolResponse` (their socket was replaced, or the server
/// cancelled the calls), as a user turn that says what they are.
pub(super) fn described_results(results: &[ToolResult]) -> Vec<Content> {
    let mut contents = live_contents(&[HistoryItem::ToolResults {
        results: results.to_vec(),
    }]);
    if let Some(first) = contents.first_mut() {
        first.parts.insert(
            0,
            text_part(
                "[The tool calls you made earlier have finished. Their results, delivered as \
                 text:]"
                    .into(),
            ),
        );
    }
    contents
}

/// Joins consecutive contents of the same role (Live, like REST, wants turns to alternate).
pub(super) fn merge_adjacent(contents: Vec<Content>) -> Vec<Content> {
    let mut out: Vec<Content> = Vec::with_capacity(contents.len());
    for content in contents {
        match out.last_mut() {
            Some(last) if last.role == content.role => last.parts.extend(content.parts),
            _ => out.push(content),
        }
    }
    out
}
