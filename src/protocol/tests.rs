//! Scenario tests over recorded-shape streams, and property tests.
//!
//! The fixtures in `testdata/` are our own streams in the *shape* of the seed
//! system's recorded scenarios (seed-system.md §2.6): A SSE approval over two
//! requests, B BIDI approval in one stream, C denial in both modes, D a
//! browser-executed tool, E a plain tool call, F1 parallel and F2 sequential
//! approvals, G an approval timeout. One chunk per line; `[DONE]` ends a
//! response stream. Unlike the seed's SSE recordings, every continuation
//! reuses the assistant message id in `start`, as the AI SDK requires (§A.2).

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::chunk::{self, Chunk, Dialect, FinishReason};
use super::envelope::{ChatRequest, ClientFrame, Trigger};
use super::message::{
    Approval, TextState, ToolPart, ToolState, UiMessage, UiPart,
    last_assistant_message_is_complete_with_approval_responses as approvals_complete,
    last_assistant_message_is_complete_with_tool_calls as tool_calls_complete,
};
use super::partial_json::{PartialJson, parse_partial_json};
use super::reducer::{Applied, Conversation, MessageReducer};
use super::sse::{ChunkStreamDecoder, DONE_FRAME, SseDecoder, StreamItem, encode_chunk};

const CHAT_ID: &str = "chat-test";

mod properties;
mod scenarios;
mod strategies;

/// Splits a JSONL fixture into response streams (one per `[DONE]`).
fn streams(fixture: &str) -> Vec<Vec<Chunk>> {
    let mut streams = vec![Vec::new()];
    for line in fixture
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
    {
        if line == "[DONE]" {
            streams.push(Vec::new());
        } else {
            let chunk = Chunk::from_json(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            if let Some(stream) = streams.last_mut() {
                stream.push(chunk);
            }
        }
    }
    streams.retain(|stream| !stream.is_empty());
    streams
}

/// Plays one response stream into the conversation like `useChat` does, with
/// `react` standing in for the user/browser between chunks.
fn play(
    conversation: &mut Conversation,
    stream: &[Chunk],
    fresh_id: &str,
    mut react: impl FnMut(&mut Conversation, &Chunk, &Applied),
) -> MessageReducer {
    conversation.begin_stream(Trigger::SubmitMessage, fresh_id);
    for chunk in stream {
        let applied = conversation
            .apply(chunk)
            .unwrap_or_else(|e| panic!("{chunk:?}: {e}"));
        react(conversation, chunk, &applied);
    }
    conversation.end_stream().expect("stream was active")
}

/// Answers approval requests as they arrive (the BIDI flow).
fn answer_approvals(
    answers: &'static [(&'static str, bool)],
) -> impl FnMut(&mut Conversation, &Chunk, &Applied) {
    move |conversation, chunk, _| {
        let Chunk::ToolApprovalRequest(request) = chunk else {
            return;
        };
        if let Some((_, approved)) = answers.iter().find(|(id, _)| *id == request.approval_id) {
            assert_eq!(
                conversation.add_tool_approval_response(&request.approval_id, *approved, None),
                1
            );
        }
    }
}

fn no_reaction(_: &mut Conversation, _: &Chunk, _: &Applied) {}

/// A compact picture of the parts: `kind[:id:state]`.
fn shape(message: &UiMessage) -> Vec<String> {
    message
        .parts
        .iter()
        .map(|part| match part {
            UiPart::Text(text) => format!("text:{:?}", text.state.unwrap_or(TextState::Streaming)),
            UiPart::Reasoning(reasoning) => format!(
                "reasoning:{:?}",
                reasoning.state.unwrap_or(TextState::Streaming)
            ),
            UiPart::Tool(tool) | UiPart::DynamicTool(tool) => {
                format!(
                    "{}:{}:{}",
                    part.wire_type(),
                    tool.tool_call_id,
                    tool.state.as_str()
                )
            }
            other => other.wire_type().into_owned(),
        })
        .collect()
}

fn tool<'a>(message: &'a UiMessage, tool_call_id: &str) -> &'a ToolPart {
    message
        .find_tool_part(tool_call_id)
        .unwrap_or_else(|| panic!("no tool part {tool_call_id}"))
}

fn approval(id: &str, approved: Option<bool>, reason: Option<&str>) -> Option<Approval> {
    Some(Approval {
        id: id.into(),
        approved,
        reason: reason.map(str::to_owned),
        signature: None,
        edited_input: None,
        ..Default::default()
    })
}

/// What the browser would POST next, decoded the way the server decodes it.
fn next_request(conversation: &Conversation) -> ChatRequest {
    let request = ChatRequest {
        id: CHAT_ID.into(),
        messages: conversation.messages().to_vec(),
        trigger: Some(Trigger::SubmitMessage),
        message_id: conversation.messages().last().map(|m| m.id.clone()),
    };
    let body = serde_json::to_string(&request).unwrap();
    let decoded = ChatRequest::from_json(&body).unwrap();
    assert_eq!(decoded, request);
    decoded
}
