//! `COUNTERSIGN_MODEL=replay:<path>`: a recorded chat played back as if it were the model, so a
//! bug report reproduces in the browser with the real runner, tools, approval gate and UI.
//!
//! # What it reads
//!
//! JSONL in the chunk-log shape (`{"timestamp", "session", "mode", "direction",
//! "sequence_number", "chunk"}`), from either end of the wire:
//!
//! * the server's `COUNTERSIGN_CHUNK_LOG` file ([`super::chunk_log`]): every line `"out"`;
//! * the browser's "Download JSONL": chunks it received are `"in"`, the requests and frames it
//!   sent are `"out"`.
//!
//! Only what the server sent is replayed: a file with any `"in"` line is a browser log and its
//! `"in"` lines are used, otherwise the `"out"` lines are. Every line must be a JSON object with
//! a string `direction` and a `chunk`; of the lines used, a `chunk` must be `"[DONE]"` or an
//! object with a string `type`, and a known type must have valid fields — anything else is a
//! [`ReplayError`] naming the line. Unknown chunk types (a `pong`, a v7 chunk) are skipped. The
//! lines not used are not checked further (the browser's request bodies have no `type`).
//!
//! # How it is cut up
//!
//! A *turn* begins at a `start` whose `messageId` differs from the current turn's (or has none):
//! SSE continuations open every response with `start` carrying the *same* id, and those belong
//! to the turn they continue. Chunks before any `start` form a turn of their own. A *step* is
//! `start-step` … `finish-step` (a step left open by the end of the file or by the next
//! `start-step` still counts). From each step:
//!
//! | chunk | event |
//! |---|---|
//! | `text-delta` | [`ModelEvent::TextDelta`], in order |
//! | `reasoning-delta` | [`ModelEvent::ReasoningDelta`] (no provider data) |
//! | `tool-input-available` | [`ModelEvent::ToolCall`] with an empty id (the runner assigns ids) |
//! | `tool-input-error` | the same: the model *did* make that call, the runner rejected its arguments, and will again |
//!
//! and the step ends with [`ModelEvent::Finish`]: `tool-calls` when it made calls; for the last
//! step of a turn otherwise, the turn's last recorded `finish` reason (`stop` when there is none,
//! or when it is `tool-calls`, which an SSE response ending at a pause says); `stop` elsewhere.
//! Usage is zero. Everything else — tool outputs, approval requests, errors, data parts — is the
//! runner's or the tools' doing, not the model's, and is ignored: the runner produces it again.
//!
//! # Which step to play
//!
//! Stateless, from the request: turn = number of user items − 1, step = number of assistant
//! items after the last user item. So a page reload, a stopped turn or two browser tabs cannot
//! desynchronise it, and the runner's own history is the cursor. Past the end of the recording
//! it says so in plain text ([`NO_MORE_TURNS`], [`NO_MORE_STEPS`]) and stops.
//!
//! # Known differences from the original run
//!
//! * In hold mode (ADR 0004) the text of a step that called tools is sent in the *final* step,
//!   so a recording made in hold mode replays that text in the final step: the person sees the
//!   same message, but the history (and the step index) attributes it differently. Two text
//!   blocks of one step arrive as one block.
//! * The person's answers are theirs to give again; denying a call that was approved in the
//!   recording still replays the recorded next step.
//! * A model error is recorded as an `error` chunk outside any step, indistinguishable from the
//!   runner's own errors, so it is not replayed as a [`ModelError`]; the step ends normally.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use futures::{StreamExt, stream};
use serde_json::{Map, Value};

use crate::agent::{
    history::{HistoryItem, ToolCall},
    model::{Model, ModelEvent, ModelRequest, ModelStream, Usage},
};
use crate::protocol::{Chunk, ChunkDecodeError, FinishReason};

/// What the replay says when the runner asks for a turn the recording does not have.
pub const NO_MORE_TURNS: &str = "The recording has no more turns to replay.";

/// What the replay says when the turn exists but the recording stops before this step.
pub const NO_MORE_STEPS: &str = "The recording has no more steps in this turn to replay.";

/// Why a recording cannot be replayed. Line numbers count from 1, blank lines included.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read the recording {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}: not JSON: {source}")]
    Json {
        file: String,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("{file}:{line}: not a chunk-log line: {reason}")]
    NotALogLine {
        file: String,
        line: usize,
        reason: &'static str,
    },
    #[error("{file}:{line}: not a chunk: {reason}")]
    NotAChunk {
        file: String,
        line: usize,
        reason: String,
    },
    #[error("{file}:{line}: {source}")]
    InvalidChunk {
        file: String,
        line: usize,
        #[source]
        source: ChunkDecodeError,
    },
    #[error("{file}: the recording has no chunks the server sent")]
    Empty { file: String },
}

/// A recorded chat, played back one model step per request (module docs).
#[derive(Debug, Clone)]
pub struct ReplayModel {
    /// The recording's file name, for the label and the logs.
    name: String,
    turns: Vec<Vec<Vec<ModelEvent>>>,
    text_delay: Duration,
}

impl ReplayModel {
    /// Reads and cuts up a chunk-log file (the server's or the browser's).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Read {
            path: path.to_owned(),
            source,
        })?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Self::from_jsonl(&name, &text)
    }

    /// Cuts up chunk-log text; `name` is what errors and the label call it.
    pub fn from_jsonl(name: &str, text: &str) -> Result<Self, ReplayError> {
        let lines = parse_lines(name, text)?;
        let direction = if lines.iter().any(|l| l.direction == "in") {
            "in"
        } else {
            "out"
        };
        let mut cutter = Cutter::default();
        for line in lines.into_iter().filter(|l| l.direction == direction) {
            if let Some(chunk) = decode(name, line.number, line.chunk)? {
                cutter.push(chunk);
            }
        }
        let turns = cutter.finish();
        if turns.is_empty() {
            return Err(ReplayError::Empty {
                file: name.to_owned(),
            });
        }
        tracing::info!(
            file = name,
            direction,
            turns = turns.len(),
            steps = turns.iter().map(Vec::len).sum::<usize>(),
            "replaying a recorded chat"
        );
        Ok(ReplayModel {
            name: name.to_owned(),
            turns,
            text_delay: Duration::ZERO,
        })
    }

    /// Waits `delay` before each text delta (default: none), to watch text stream in.
    pub fn with_text_delay(mut self, delay: Duration) -> Self {
        self.text_delay = delay;
        self
    }

    /// How many turns the recording has.
    pub fn turn_count(&self) -> usize {
        self.turns.len()
    }

    /// How many steps turn `turn` (from 0) has.
    pub fn step_count(&self, turn: usize) -> Option<usize> {
        self.turns.get(turn).map(Vec::len)
    }

    /// The events of step `step` of turn `turn` (both from 0), ending with `Finish`.
    pub fn events(&self, turn: usize, step: usize) -> Option<&[ModelEvent]> {
        self.turns.get(turn)?.get(step).map(Vec::as_slice)
    }

    /// What to play for this history (module docs, "Which step to play").
    fn play(&self, history: &[HistoryItem]) -> Vec<ModelEvent> {
        let Some((turn, step)) = position(history) else {
            return say(NO_MORE_TURNS);
        };
        match self.turns.get(turn) {
            None => {
                tracing::info!(file = %self.name, turn, "replay asked past the last turn");
                say(NO_MORE_TURNS)
            }
            Some(steps) => match steps.get(step) {
                None => {
                    tracing::info!(file = %self.name, turn, step, "replay asked past the turn's last step");
                    say(NO_MORE_STEPS)
                }
                Some(events) => {
                    tracing::debug!(file = %self.name, turn, step, "replaying a step");
                    events.clone()
                }
            },
        }
    }
}

impl Model for ReplayModel {
    /// It plays back what was recorded, whatever was attached.
    fn reads_attachments(&self) -> bool {
        false
    }

    fn label(&self) -> String {
        let n = self.turns.len();
        format!(
            "Replay of {} ({n} turn{})",
            self.name,
            if n == 1 { "" } else { "s" }
        )
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let events = self.play(&request.history);
        let delay = self.text_delay;
        if delay.is_zero() {
            return stream::iter(events.into_iter().map(Ok)).boxed();
        }
        stream::iter(events)
            .then(move |event| async move {
                if matches!(event, ModelEvent::TextDelta(_)) {
                    tokio::time::sleep(delay).await;
                }
                Ok(event)
            })
            .boxed()
    }
}

/// (turn, step) for a history: turn = user items − 1, step = assistant items after the last
/// user item. `None` without any user item.
pub fn position(history: &[HistoryItem]) -> Option<(usize, usize)> {
    let is_user = |item: &HistoryItem| matches!(item, HistoryItem::User { .. });
    let last_user = history.iter().rposition(is_user)?;
    let turn = history.iter().filter(|item| is_user(item)).count() - 1;
    let step = history[last_user + 1..]
        .iter()
        .filter(|item| matches!(item, HistoryItem::Assistant { .. }))
        .count();
    Some((turn, step))
}

/// A text-only step.
fn say(text: &str) -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta(text.to_owned()),
        ModelEvent::Finish {
            reason: FinishReason::Stop,
            usage: Usage::default(),
        },
    ]
}

/// One line of the file, before its chunk is looked at.
struct Line {
    number: usize,
    direction: String,
    chunk: Value,
}

fn parse_lines(file: &str, text: &str) -> Result<Vec<Line>, ReplayError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let not_a_line = |reason| ReplayError::NotALogLine {
            file: file.to_owned(),
            line: number,
            reason,
        };
        let value: Value = serde_json::from_str(raw).map_err(|source| ReplayError::Json {
            file: file.to_owned(),
            line: number,
            source,
        })?;
        let Value::Object(mut map) = value else {
            return Err(not_a_line("not a JSON object"));
        };
        let direction = match map.remove("direction") {
            Some(Value::String(direction)) => direction,
            _ => return Err(not_a_line("no string `direction`")),
        };
        let chunk = map
            .remove("chunk")
            .ok_or_else(|| not_a_line("no `chunk`"))?;
        lines.push(Line {
            number,
            direction,
            chunk,
        });
    }
    Ok(lines)
}

/// The chunk of a line that is replayed: `None` for `"[DONE]"` and for unknown types.
fn decode(file: &str, line: usize, chunk: Value) -> Result<Option<Chunk>, ReplayError> {
    let not_a_chunk = |reason: String| ReplayError::NotAChunk {
        file: file.to_owned(),
        line,
        reason,
    };
    match chunk {
        // The end of a response (SSE) or of a turn: turns are cut at `start`, not here.
        Value::String(text) if text == "[DONE]" => Ok(None),
        Value::String(text) => Err(not_a_chunk(format!(
            "the string {:?} (only \"[DONE]\" may be a string)",
            shorten(&text)
        ))),
        Value::Object(map) if has_string_type(&map) => {
            match Chunk::from_value(Value::Object(map)) {
                Ok(Chunk::Unknown(_)) => Ok(None),
                Ok(chunk) => Ok(Some(chunk)),
                Err(source) => Err(ReplayError::InvalidChunk {
                    file: file.to_owned(),
                    line,
                    source,
                }),
            }
        }
        Value::Object(_) => Err(not_a_chunk("an object without a string `type`".into())),
        _ => Err(not_a_chunk(
            "neither an object with a `type` nor \"[DONE]\"".into(),
        )),
    }
}

fn has_string_type(map: &Map<String, Value>) -> bool {
    matches!(map.get("type"), Some(Value::String(_)))
}

/// The first 40 characters, for error messages.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Cuts chunks into turns and steps (module docs, "How it is cut up").
#[derive(Default)]
struct Cutter {
    turns: Vec<Vec<Vec<ModelEvent>>>,
    current: Option<TurnDraft>,
}

#[derive(Default)]
struct TurnDraft {
    message_id: Option<String>,
    steps: Vec<StepDraft>,
    open: Option<StepDraft>,
    /// The reason of the turn's last `finish`.
    finish: Option<FinishReason>,
}

#[derive(Default)]
struct StepDraft {
    events: Vec<ModelEvent>,
    calls: usize,
}

impl Cutter {
    fn push(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Start(start) => {
                let continues = matches!(
                    (&self.current, &start.message_id),
                    (Some(turn), Some(id)) if turn.message_id.as_ref() == Some(id)
                );
                if !continues {
                    self.close_turn();
                    self.current = Some(TurnDraft {
                        message_id: start.message_id,
                        ..TurnDraft::default()
                    });
                }
            }
            Chunk::StartStep => {
                let turn = self.current.get_or_insert_with(TurnDraft::default);
                if let Some(step) = turn.open.take() {
                    turn.steps.push(step);
                }
                turn.open = Some(StepDraft::default());
            }
            Chunk::FinishStep => {
                if let Some(turn) = self.current.as_mut()
                    && let Some(step) = turn.open.take()
                {
                    turn.steps.push(step);
                }
            }
            Chunk::Finish(finish) => {
                if let Some(turn) = self.current.as_mut() {
                    turn.finish = finish.finish_reason;
                }
            }
            Chunk::TextDelta(delta) => self.step_event(ModelEvent::TextDelta(delta.delta), false),
            Chunk::ReasoningDelta(delta) => self.step_event(
                ModelEvent::ReasoningDelta {
                    text: delta.delta,
                    provider_data: None,
                },
                false,
            ),
            Chunk::ToolInputAvailable(input) => {
                self.step_event(call(input.tool_name, input.input), true);
            }
            Chunk::ToolInputError(input) => {
                self.step_event(call(input.tool_name, input.input), true);
            }
            _ => {}
        }
    }

    /// Adds an event to the open step; outside a step it is not the model's and is dropped.
    fn step_event(&mut self, event: ModelEvent, is_call: bool) {
        if let Some(step) = self.current.as_mut().and_then(|t| t.open.as_mut()) {
            step.events.push(event);
            if is_call {
                step.calls += 1;
            }
        }
    }

    fn close_turn(&mut self) {
        let Some(mut turn) = self.current.take() else {
            return;
        };
        if let Some(step) = turn.open.take() {
            turn.steps.push(step);
        }
        let last = turn.steps.len().saturating_sub(1);
        let steps = turn
            .steps
            .into_iter()
            .enumerate()
            .map(|(index, mut step)| {
                let reason = if step.calls > 0 {
                    FinishReason::ToolCalls
                } else if index == last {
                    match &turn.finish {
                        None | Some(FinishReason::ToolCalls) => FinishReason::Stop,
                        Some(reason) => reason.clone(),
                    }
                } else {
                    FinishReason::Stop
                };
                step.events.push(ModelEvent::Finish {
                    reason,
                    usage: Usage::default(),
                });
                step.events
            })
            .collect();
        self.turns.push(steps);
    }

    fn finish(mut self) -> Vec<Vec<Vec<ModelEvent>>> {
        self.close_turn();
        self.turns
    }
}

fn call(name: String, args: Value) -> ModelEvent {
    ModelEvent::ToolCall(ToolCall {
        id: String::new(),
        name,
        args,
        provider_data: None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use futures::executor::block_on;
    use serde_json::json;

    use super::*;
    use crate::{
        agent::{
            chunk_log::ChunkLog,
            history::{AssistantPart, Outcome, ToolResult},
        },
        protocol::Dialect,
    };

    // ----- helpers ------------------------------------------------------------------------------

    fn out(n: u64, chunk: Value) -> String {
        line(n, "sse", "out", chunk)
    }

    fn line(n: u64, mode: &str, direction: &str, chunk: Value) -> String {
        json!({
            "timestamp": 1_767_225_600_000_i64 + n as i64,
            "session": "chat-1",
            "mode": mode,
            "direction": direction,
            "sequence_number": n,
            "chunk": chunk,
        })
        .to_string()
    }

    fn text(t: &str) -> ModelEvent {
        ModelEvent::TextDelta(t.into())
    }

    fn think(t: &str) -> ModelEvent {
        ModelEvent::ReasoningDelta {
            text: t.into(),
            provider_data: None,
        }
    }

    fn tool(name: &str, args: Value) -> ModelEvent {
        call(name.into(), args)
    }

    fn finish(reason: FinishReason) -> ModelEvent {
        ModelEvent::Finish {
            reason,
            usage: Usage::default(),
        }
    }

    /// The history the runner has when it asks for `step` of `turn`: earlier turns complete
    /// (user, a tool step, its results, a text step), this turn's earlier steps with results.
    fn history(turn: usize, step: usize) -> Vec<HistoryItem> {
        let mut items = Vec::new();
        let call_step = || HistoryItem::Assistant {
            parts: vec![AssistantPart::ToolCall {
                call: ToolCall {
                    id: "call-1".into(),
                    name: "get_weather".into(),
                    args: json!({}),
                    provider_data: None,
                },
            }],
        };
        let results = || HistoryItem::ToolResults {
            results: vec![ToolResult {
                call_id: "call-1".into(),
                name: "get_weather".into(),
                outcome: Outcome::Expired,
                edited_args: None,
            }],
        };
        for _ in 0..turn {
            items.push(HistoryItem::user("earlier"));
            items.push(call_step());
            items.push(results());
            items.push(HistoryItem::Assistant {
                parts: vec![AssistantPart::Text {
                    text: "ok".into(),
                    provider_data: None,
                }],
            });
        }
        items.push(HistoryItem::user("now"));
        for _ in 0..step {
            items.push(call_step());
            items.push(results());
        }
        items
    }

    fn play(model: &ReplayModel, turn: usize, step: usize) -> Vec<ModelEvent> {
        let request = ModelRequest {
            session_id: "chat-1".into(),
            system: String::new(),
            history: history(turn, step),
            tools: Vec::new(),
        };
        block_on(model.stream(request).collect::<Vec<_>>())
            .into_iter()
            .map(|e| e.unwrap())
            .collect()
    }

    /// A server log of three turns: weather (a tool step, then a text step); a payment that
    /// waited for approval, recorded as the two SSE responses the browser got (both open with
    /// `start` of the same message); a short answer cut by the token limit.
    fn server_recording() -> String {
        let chunks = vec![
            // Turn 1.
            json!({"type": "start", "messageId": "msg-1"}),
            json!({"type": "start-step"}),
            json!({"type": "reasoning-start", "id": "r1"}),
            json!({"type": "reasoning-delta", "id": "r1", "delta": "Weather: use the tool."}),
            json!({"type": "reasoning-end", "id": "r1"}),
            json!({"type": "tool-input-start", "toolCallId": "call-1", "toolName": "get_weather"}),
            json!({"type": "tool-input-available", "toolCallId": "call-1", "toolName": "get_weather", "input": {"location": "Tokyo"}}),
            json!({"type": "finish-step"}),
            json!({"type": "tool-output-available", "toolCallId": "call-1", "output": {"celsius": 18}}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "t1"}),
            json!({"type": "text-delta", "id": "t1", "delta": "It is 18 °C"}),
            json!({"type": "text-delta", "id": "t1", "delta": " in Tokyo."}),
            json!({"type": "text-end", "id": "t1"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "stop", "messageMetadata": {"model": "gemini"}}),
            json!("[DONE]"),
            // Turn 2, first response: ends waiting for the approval.
            json!({"type": "start", "messageId": "msg-2"}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "t2"}),
            json!({"type": "text-delta", "id": "t2", "delta": "Sending 20 € to Rin."}),
            json!({"type": "text-end", "id": "t2"}),
            json!({"type": "tool-input-start", "toolCallId": "call-2", "toolName": "process_payment"}),
            json!({"type": "tool-input-available", "toolCallId": "call-2", "toolName": "process_payment", "input": {"recipient": "Rin", "amount": 20}}),
            json!({"type": "tool-approval-request", "approvalId": "ap-1", "toolCallId": "call-2"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "tool-calls"}),
            json!("[DONE]"),
            // Turn 2, continuation after the approval.
            json!({"type": "start", "messageId": "msg-2"}),
            json!({"type": "tool-output-available", "toolCallId": "call-2", "output": {"ok": true}}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "t3"}),
            json!({"type": "text-delta", "id": "t3", "delta": "Sent."}),
            json!({"type": "text-end", "id": "t3"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "stop"}),
            json!("[DONE]"),
            // Turn 3.
            json!({"type": "start", "messageId": "msg-3"}),
            json!({"type": "start-step"}),
            json!({"type": "text-delta", "id": "t4", "delta": "You're"}),
            json!({"type": "finish-step"}),
            json!({"type": "error", "errorText": "not model output"}),
            json!({"type": "finish", "finishReason": "length"}),
            json!("[DONE]"),
        ];
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| out(i as u64 + 1, c))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What each (turn, step) of [`server_recording`] plays.
    fn expected() -> Vec<Vec<Vec<ModelEvent>>> {
        vec![
            vec![
                vec![
                    think("Weather: use the tool."),
                    tool("get_weather", json!({"location": "Tokyo"})),
                    finish(FinishReason::ToolCalls),
                ],
                vec![
                    text("It is 18 °C"),
                    text(" in Tokyo."),
                    finish(FinishReason::Stop),
                ],
            ],
            vec![
                vec![
                    text("Sending 20 € to Rin."),
                    tool("process_payment", json!({"recipient": "Rin", "amount": 20})),
                    finish(FinishReason::ToolCalls),
                ],
                vec![text("Sent."), finish(FinishReason::Stop)],
            ],
            vec![vec![text("You're"), finish(FinishReason::Length)]],
        ]
    }

    fn assert_plays(model: &ReplayModel, expected: &[Vec<Vec<ModelEvent>>]) {
        assert_eq!(model.turn_count(), expected.len());
        for (turn, steps) in expected.iter().enumerate() {
            assert_eq!(model.step_count(turn), Some(steps.len()), "turn {turn}");
            for (step, events) in steps.iter().enumerate() {
                assert_eq!(&play(model, turn, step), events, "turn {turn} step {step}");
            }
        }
    }

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!(
                "countersign-replay-{name}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    // ----- tests --------------------------------------------------------------------------------

    #[test]
    fn each_turn_and_step_plays_what_the_model_said_in_it() {
        let model = ReplayModel::from_jsonl("bug-42.jsonl", &server_recording()).unwrap();
        assert_plays(&model, &expected());
        assert_eq!(model.label(), "Replay of bug-42.jsonl (3 turns)");
    }

    #[test]
    fn past_the_recording_it_says_so_and_stops() {
        let model = ReplayModel::from_jsonl("r", &server_recording()).unwrap();
        assert_eq!(play(&model, 0, 2), say(NO_MORE_STEPS));
        assert_eq!(play(&model, 3, 0), say(NO_MORE_TURNS));
        let request = ModelRequest {
            session_id: "chat-1".into(),
            system: String::new(),
            history: Vec::new(),
            tools: Vec::new(),
        };
        let events: Vec<_> = block_on(model.stream(request).collect::<Vec<_>>());
        assert_eq!(
            events.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
            say(NO_MORE_TURNS)
        );
    }

    #[test]
    fn the_position_comes_from_the_history_alone() {
        assert_eq!(position(&[]), None);
        assert_eq!(position(&history(0, 0)), Some((0, 0)));
        assert_eq!(position(&history(2, 1)), Some((2, 1)));
        // Tool results do not count as steps; a user message resets the step.
        let mut items = history(1, 3);
        items.push(HistoryItem::user("again"));
        assert_eq!(position(&items), Some((2, 0)));
    }

    #[test]
    fn the_browser_download_replays_what_it_received() {
        let request_body = json!({"id": "chat-1", "trigger": "submit-message", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather in Tokyo?"}]}]});
        let mut lines = vec![line(1, "bidi", "out", request_body.clone())];
        let mut n = 1;
        for raw in server_recording().lines() {
            let value: Value = serde_json::from_str(raw).unwrap();
            n += 1;
            lines.push(line(n, "bidi", "in", value["chunk"].clone()));
            if value["chunk"] == json!("[DONE]") {
                // What the browser sent next, and a control frame it got.
                n += 1;
                lines.push(line(n, "bidi", "out", request_body.clone()));
                n += 1;
                lines.push(line(
                    n,
                    "bidi",
                    "in",
                    json!({"type": "pong", "timestamp": 5}),
                ));
                n += 1;
                lines.push(line(
                    n,
                    "bidi",
                    "in",
                    json!({"type": "data-countersign-pending", "data": {"approvalIds": []}, "transient": true}),
                ));
            }
        }
        // A browser file has no trailing newline and may have blank lines.
        let text = lines.join("\n\n");
        let model = ReplayModel::from_jsonl("countersign-chat-1.jsonl", &text).unwrap();
        assert_plays(&model, &expected());
    }

    #[test]
    fn a_browser_log_with_sse_responses_keeps_one_turn_per_message() {
        // SSE: the browser logs no [DONE]; each response opens with `start` of the same id.
        let chunks = [
            json!({"type": "start", "messageId": "m"}),
            json!({"type": "start-step"}),
            json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "get_location", "input": {}}),
            json!({"type": "tool-approval-request", "approvalId": "a", "toolCallId": "c"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "tool-calls"}),
            json!({"type": "start", "messageId": "m"}),
            json!({"type": "tool-output-available", "toolCallId": "c", "output": {"city": "Kyoto"}}),
            json!({"type": "start-step"}),
            json!({"type": "text-delta", "id": "t", "delta": "Kyoto."}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "stop"}),
            json!({"type": "start", "messageId": "m2"}),
            json!({"type": "start-step"}),
            json!({"type": "text-delta", "id": "t", "delta": "Hi."}),
        ];
        let lines: Vec<String> = chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| line(i as u64 + 1, "sse", "in", c))
            .collect();
        let model = ReplayModel::from_jsonl("b", &lines.join("\n")).unwrap();
        assert_plays(
            &model,
            &[
                vec![
                    vec![
                        tool("get_location", json!({})),
                        finish(FinishReason::ToolCalls),
                    ],
                    vec![text("Kyoto."), finish(FinishReason::Stop)],
                ],
                // Cut off mid-step: the step still plays.
                vec![vec![text("Hi."), finish(FinishReason::Stop)]],
            ],
        );
    }

    #[test]
    fn a_call_the_runner_rejected_is_replayed_as_the_models_call() {
        let chunks = [
            json!({"type": "start", "messageId": "m"}),
            json!({"type": "start-step"}),
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "process_payment"}),
            json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "process_payment", "input": {"amount": -5}, "errorText": "Invalid arguments"}),
            json!({"type": "finish-step"}),
            json!({"type": "reasoning-file", "url": "data:,x"}),
        ];
        let lines: Vec<String> = chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| out(i as u64 + 1, c))
            .collect();
        let model = ReplayModel::from_jsonl("e", &lines.join("\n")).unwrap();
        assert_eq!(
            model.events(0, 0).unwrap(),
            &[
                tool("process_payment", json!({"amount": -5})),
                finish(FinishReason::ToolCalls)
            ]
        );
    }

    #[test]
    fn malformed_lines_are_errors_with_their_line_number() {
        let good = out(1, json!({"type": "start", "messageId": "m"}));
        let cases: Vec<(String, &str)> = vec![
            ("{not json".into(), "not JSON"),
            ("[1, 2]".into(), "not a JSON object"),
            (json!({"direction": "out"}).to_string(), "no `chunk`"),
            (
                json!({"chunk": {"type": "start"}}).to_string(),
                "no string `direction`",
            ),
            (out(2, json!("hello")), "only \"[DONE]\""),
            (out(2, json!({"delta": "x"})), "without a string `type`"),
            (out(2, json!({"type": 5})), "without a string `type`"),
            (out(2, json!(42)), "neither an object"),
            (
                out(2, json!({"type": "text-delta", "id": "t"})),
                "invalid `text-delta` chunk",
            ),
        ];
        for (bad, message) in cases {
            let text = format!("{good}\n\n{bad}\n{good}");
            let error = ReplayModel::from_jsonl("x.jsonl", &text).unwrap_err();
            let shown = error.to_string();
            assert!(shown.starts_with("x.jsonl:3: "), "{bad}: {shown}");
            assert!(shown.contains(message), "{bad}: {shown}");
        }
    }

    #[test]
    fn the_lines_not_replayed_are_not_checked_as_chunks() {
        // A browser log: its "out" lines are requests, not chunks.
        let text = [
            line(1, "sse", "out", json!({"id": "c", "messages": []})),
            line(2, "sse", "in", json!({"type": "start", "messageId": "m"})),
        ]
        .join("\n");
        assert!(ReplayModel::from_jsonl("b", &text).is_ok());
    }

    #[test]
    fn a_recording_with_nothing_to_replay_is_an_error() {
        for text in ["", "\n\n", &out(1, json!("[DONE]"))] {
            assert!(matches!(
                ReplayModel::from_jsonl("empty", text),
                Err(ReplayError::Empty { .. })
            ));
        }
        let missing = std::env::temp_dir().join("countersign-replay-does-not-exist.jsonl");
        let error = ReplayModel::from_file(&missing).unwrap_err();
        assert!(matches!(error, ReplayError::Read { .. }), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_text_delay_paces_the_text() {
        let model = ReplayModel::from_jsonl("r", &server_recording())
            .unwrap()
            .with_text_delay(Duration::from_millis(50));
        let request = ModelRequest {
            session_id: "chat-1".into(),
            system: String::new(),
            history: history(0, 1),
            tools: Vec::new(),
        };
        let started = tokio::time::Instant::now();
        let events: Vec<_> = model
            .stream(request)
            .map(Result::unwrap)
            .collect::<Vec<_>>()
            .await;
        assert_eq!(events, expected()[0][1]);
        // Two text deltas, 50 ms before each; the other events do not wait.
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(100) && elapsed < Duration::from_millis(150),
            "{elapsed:?}"
        );
    }

    /// What a model says in one step, as a script for the fake runner below.
    type Script = Vec<Vec<Vec<ModelEvent>>>;

    /// Emits the chunks the runner emits for these model steps (progressive text, every call
    /// answered by a server tool), recording each one as the runner will.
    fn run_and_record(log: &ChunkLog, session: &str, turns: &Script, first_turn: usize) {
        let now = std::cell::Cell::new(1_000);
        let tick = || {
            now.set(now.get() + 1);
            now.get()
        };
        let record = |chunk: Chunk| log.record(session, "bidi", &chunk, tick());
        for (t, steps) in turns.iter().enumerate() {
            let turn = first_turn + t;
            record(Chunk::start(format!("msg-{turn}")));
            let mut last_reason = FinishReason::Stop;
            for (s, events) in steps.iter().enumerate() {
                record(Chunk::start_step());
                let mut calls = Vec::new();
                for (e, event) in events.iter().enumerate() {
                    let id = format!("{turn}-{s}-{e}");
                    match event {
                        ModelEvent::TextDelta(delta) => {
                            record(Chunk::text_start(&id));
                            record(Chunk::text_delta(&id, delta));
                            record(Chunk::text_end(&id));
                        }
                        ModelEvent::TextData(_) => {}
                        ModelEvent::ReasoningDelta { text, .. } => {
                            record(Chunk::reasoning_start(&id));
                            record(Chunk::reasoning_delta(&id, text));
                            record(Chunk::reasoning_end(&id));
                        }
                        ModelEvent::ToolCall(call) => {
                            record(Chunk::tool_input_start(&id, &call.name));
                            record(Chunk::tool_input_available(
                                &id,
                                &call.name,
                                call.args.clone(),
                            ));
                            calls.push(id);
                        }
                        ModelEvent::Finish { reason, .. } => last_reason = reason.clone(),
                    }
                }
                record(Chunk::finish_step());
                for id in calls {
                    record(Chunk::tool_output_available(id, json!({"ok": true})));
                }
            }
            record(Chunk::finish(last_reason));
            log.record_done(session, "bidi", tick());
        }
    }

    #[test]
    fn what_the_chunk_log_records_replays_as_the_same_model_events() {
        let script: Script = vec![
            vec![
                vec![
                    think("Need the weather."),
                    text("Checking."),
                    tool("get_weather", json!({"location": "Oslo"})),
                    tool("get_weather", json!({"location": "Bergen"})),
                    finish(FinishReason::ToolCalls),
                ],
                vec![text("Oslo 3 °C, Bergen 7 °C."), finish(FinishReason::Stop)],
            ],
            vec![vec![text("Anything else?"), finish(FinishReason::Stop)]],
            vec![
                vec![
                    tool("process_payment", json!({"recipient": "Rin", "amount": 5})),
                    finish(FinishReason::ToolCalls),
                ],
                vec![text("Done."), finish(FinishReason::ContentFilter)],
            ],
        ];
        let dir = TempDir::new("round-trip");
        let session = "../Chat 1";
        {
            let log = ChunkLog::new(dir.0.clone()).unwrap();
            run_and_record(&log, session, &script[..2].to_vec(), 0);
        }
        // The server restarts between turns 2 and 3.
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        run_and_record(&log, session, &script[2..].to_vec(), 2);
        let path = log.path_for(session);
        drop(log);

        let recorded = std::fs::read_to_string(&path).unwrap();
        let numbers: Vec<u64> = recorded
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["sequence_number"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
        // Every chunk is recorded as the Full dialect writes it.
        let first: Value = serde_json::from_str(recorded.lines().next().unwrap()).unwrap();
        assert_eq!(
            Some(first["chunk"].clone()),
            Chunk::start("msg-0").to_value(Dialect::Full)
        );

        let model = ReplayModel::from_file(&path).unwrap();
        assert_plays(&model, &script);
        assert!(model.label().ends_with("(3 turns)"), "{}", model.label());
    }
}
