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
//! A turn in the original system's shape (ADR 0019: its frontend's download, talking to it or
//! to our `/stream` and `/live`) has no step markers but around its pauses for approval, which
//! hold nothing the
//! model said: when everything the model said in a turn is outside any step, a step is what it
//! said up to the results of the calls it made, and the markers are ignored. A text block whose
//! id ends in `_input_text` is what the person said (the original's input transcription, which
//! it shows inside the assistant's message; ADR 0035) and is never replayed as the model's.
//!
//! Every step ends with [`ModelEvent::Finish`]: `tool-calls` when it made calls; for the last
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

mod cutter;
mod lines;

#[cfg(test)]
mod tests;

use cutter::Cutter;
use lines::{decode, parse_lines};

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
