//! One segment of a turn, whatever carries it: what `POST /api/chat` streams as SSE and what the
//! ai@7 WebSocket on `/api/chat` sends as `chunk` frames.
//!
//! A chat request either starts a turn (its last message is a new user message) or continues
//! the chat's waiting turn with the person's answers. [`open`] decides which, through the one
//! request decoder and the runtime, and says where in the turn's log the answer starts. A
//! [`Segment`] then reads that log: a continuation opens with `start` carrying the *same*
//! assistant message id (AI SDK clients extend the message instead of adding one); a turn that
//! stops to wait for the person ends the segment with `finish` (reason `tool-calls`); the end of
//! the turn ends it too. A resume ([`Segment::replay`]) replays the whole assistant message from
//! its `start`, skipping the pauses it already went through, then follows it live.

use std::{sync::Arc, time::Duration};

use super::{answers::extract, edge::check_chat_rate, error::ApiError, request::ChatCommand};
use crate::{
    agent::{
        SessionRecord, TextTiming, Transport, TurnEntry, TurnLog, TurnStatus, session::LogReader,
        store::Actor,
    },
    protocol::{ChatRequest, Chunk, Dialect, FinishReason},
    state::AppState,
};

/// Where a request's answer starts in its turn's log.
pub struct Opened {
    pub log: Arc<TurnLog>,
    pub from: usize,
    /// The assistant message id a continuation opens with (`None`: the segment starts at the
    /// turn's own `start`).
    pub continuation: Option<String>,
}

/// Starts or continues the turn of `request.id`.
pub async fn open(
    state: &AppState,
    request: ChatRequest,
    transport: Transport,
    timing: Option<TextTiming>,
    actor: &Actor,
) -> Result<Opened, ApiError> {
    let command = ChatCommand::decode(request, transport)?;
    let chat_id = command.chat_id().to_owned();
    let chat_id = chat_id.as_str();
    check_chat_rate(state, chat_id)?;
    let runtime = &state.runtime;
    match command {
        ChatCommand::Answer { message, .. } => {
            let session = runtime.existing_session(chat_id).await?;
            let record = session
                .as_ref()
                .map(|s| s.snapshot())
                .unwrap_or_else(|| SessionRecord::new(chat_id, 0));
            let inputs = extract(&message, &record)?;
            if inputs.is_empty() {
                return Err(nothing_to_continue(&record));
            }
            let receipt = runtime.submit_as(chat_id, &inputs, actor).await?;
            tracing::info!(chat = chat_id, answers = inputs.len(), %transport, "continuing turn");
            Ok(Opened {
                log: receipt.log,
                from: receipt.from,
                continuation: Some(receipt.message_id),
            })
        }
        ChatCommand::Start { user, context, .. } => {
            let started = runtime
                .start_turn_with_context(chat_id, user, context, timing)
                .await?;
            tracing::info!(chat = chat_id, turn = %started.turn_id, %transport, "turn started");
            Ok(Opened {
                log: started.log,
                from: 0,
                continuation: None,
            })
        }
    }
}

fn nothing_to_continue(record: &SessionRecord) -> ApiError {
    match record.turn.as_ref().map(|t| t.status) {
        Some(TurnStatus::Running) => ApiError::conflict(
            "turn_in_progress",
            "the turn is still running; follow it with GET /api/chat/{id}/stream",
        ),
        Some(TurnStatus::AwaitingPerson) => ApiError::conflict(
            "nothing_to_continue",
            "the request answers none of the pending approvals or browser calls",
        ),
        _ => ApiError::conflict(
            "no_active_turn",
            "this chat has no turn waiting for an answer",
        ),
    }
}

/// The log of the chat's turn while it is still streaming (not paused for the person, not
/// ended): what a resume follows. `None`: nothing to resume.
pub async fn streaming_log(
    state: &AppState,
    chat_id: &str,
) -> Result<Option<Arc<TurnLog>>, ApiError> {
    let Some(session) = state.runtime.existing_session(chat_id).await? else {
        return Ok(None);
    };
    let Some(log) = session.current_log() else {
        return Ok(None);
    };
    let streaming = !matches!(
        log.entries_from(0).last(),
        None | Some(TurnEntry::End) | Some(TurnEntry::Pause)
    );
    Ok(streaming.then_some(log))
}

/// The dialect a client names (`full`: every key of the newest AI SDK; anything else: the keys
/// `ai@6.0.0` accepts), from a header, a query parameter or a frame's headers.
pub fn dialect_named(name: Option<&str>) -> Dialect {
    match name {
        Some(v) if v.trim().eq_ignore_ascii_case("full") => Dialect::Full,
        _ => Dialect::V6Strict,
    }
}

/// The text timing a client names (`progressive` / `hold`), if it names one (ADR 0004).
pub fn timing_named(name: Option<&str>) -> Option<TextTiming> {
    match name.map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("progressive") => Some(TextTiming::Progressive),
        Some(v) if v.eq_ignore_ascii_case("hold") => Some(TextTiming::Hold),
        _ => None,
    }
}

/// What a segment yields next.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// A chunk, as JSON in the segment's dialect.
    Chunk(String),
    /// Nothing happened for the keep-alive interval: say something so proxies keep the line.
    KeepAlive,
    /// The segment is over: the turn ended or waits for the person (after its `finish`).
    End,
}

/// Reads one segment of a turn's log as chunk JSON.
pub struct Segment {
    reader: LogReader,
    /// A continuation's `start`, sent first.
    opening: Option<String>,
    /// Pauses up to this log position were already answered (a replay passes them).
    replay_until: usize,
    dialect: Dialect,
    keep_alive: Duration,
    /// The `finish` of a pause was sent; `End` follows.
    paused: bool,
    ended: bool,
}

impl Segment {
    /// The answer to a request [`open`]ed.
    pub fn new(opened: Opened, dialect: Dialect, keep_alive: Duration) -> Self {
        Segment {
            reader: opened.log.subscribe(opened.from),
            opening: opened.continuation,
            replay_until: 0,
            dialect,
            keep_alive,
            paused: false,
            ended: false,
        }
    }

    /// A resume: the whole assistant message so far (from the turn's `start`), then live.
    pub fn replay(log: Arc<TurnLog>, dialect: Dialect, keep_alive: Duration) -> Self {
        Segment {
            replay_until: log.len(),
            reader: log.subscribe(0),
            opening: None,
            dialect,
            keep_alive,
            paused: false,
            ended: false,
        }
    }

    /// The next piece; `None` after [`Piece::End`].
    pub async fn next(&mut self) -> Option<Piece> {
        if self.ended {
            return None;
        }
        if self.paused {
            self.ended = true;
            return Some(Piece::End);
        }
        if let Some(message_id) = self.opening.take()
            && let Some(json) = Chunk::start(message_id).to_json(self.dialect)
        {
            return Some(Piece::Chunk(json));
        }
        loop {
            let next = match tokio::time::timeout(self.keep_alive, self.reader.next()).await {
                Err(_) => return Some(Piece::KeepAlive),
                Ok(next) => next,
            };
            match next {
                None | Some(TurnEntry::End) => {
                    self.ended = true;
                    return Some(Piece::End);
                }
                Some(TurnEntry::Pause) if self.reader.position() <= self.replay_until => continue,
                Some(TurnEntry::Pause) => {
                    self.paused = true;
                    match Chunk::finish(FinishReason::ToolCalls).to_json(self.dialect) {
                        Some(json) => return Some(Piece::Chunk(json)),
                        None => {
                            self.ended = true;
                            return Some(Piece::End);
                        }
                    }
                }
                Some(TurnEntry::Chunk(chunk)) => {
                    if let Some(json) = chunk.to_json(self.dialect) {
                        return Some(Piece::Chunk(json));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(entries: Vec<TurnEntry>) -> Arc<TurnLog> {
        Arc::new(TurnLog::restored(entries))
    }

    async fn drain(mut segment: Segment) -> Vec<Piece> {
        let mut out = Vec::new();
        while let Some(piece) = segment.next().await {
            out.push(piece);
        }
        out
    }

    fn chunk(c: Chunk) -> Piece {
        Piece::Chunk(c.to_json(Dialect::V6Strict).unwrap())
    }

    #[tokio::test]
    async fn a_pause_ends_the_segment_with_finish_and_a_continuation_opens_with_start() {
        let entries = vec![
            TurnEntry::Chunk(Chunk::start("m1")),
            TurnEntry::Chunk(Chunk::text_delta("t", "a")),
            TurnEntry::Pause,
            TurnEntry::Chunk(Chunk::text_delta("t", "b")),
            TurnEntry::End,
        ];
        let first = Segment::new(
            Opened {
                log: log(entries.clone()),
                from: 0,
                continuation: None,
            },
            Dialect::V6Strict,
            Duration::from_secs(10),
        );
        assert_eq!(
            drain(first).await,
            [
                chunk(Chunk::start("m1")),
                chunk(Chunk::text_delta("t", "a")),
                chunk(Chunk::finish(FinishReason::ToolCalls)),
                Piece::End
            ]
        );
        let second = Segment::new(
            Opened {
                log: log(entries.clone()),
                from: 3,
                continuation: Some("m1".into()),
            },
            Dialect::V6Strict,
            Duration::from_secs(10),
        );
        assert_eq!(
            drain(second).await,
            [
                chunk(Chunk::start("m1")),
                chunk(Chunk::text_delta("t", "b")),
                Piece::End
            ]
        );
        // A replay passes the pause it went through.
        let replay = Segment::replay(log(entries), Dialect::V6Strict, Duration::from_secs(10));
        assert_eq!(drain(replay).await.len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_log_yields_keep_alives() {
        let log = log(vec![TurnEntry::Chunk(Chunk::start("m1"))]);
        let mut segment = Segment::replay(log.clone(), Dialect::V6Strict, Duration::from_secs(5));
        assert_eq!(segment.next().await, Some(chunk(Chunk::start("m1"))));
        assert_eq!(segment.next().await, Some(Piece::KeepAlive));
        log.push(TurnEntry::End);
        assert_eq!(segment.next().await, Some(Piece::End));
        assert_eq!(segment.next().await, None);
    }
}
