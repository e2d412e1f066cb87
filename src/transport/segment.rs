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
//!
//! In the seed's dialect ([`Dialect::Seed`], `POST /stream`) the segment's entries go through a
//! [`SeedEncoder`] instead, and it yields the encoder's finished frames ([`Piece::Frame`]), its
//! pause `finish` and `[DONE]` included.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use serde_json::Value;

use super::{answers::extract, edge::check_chat_rate, error::ApiError, request::ChatCommand};
use crate::{
    agent::{
        SessionRecord, TextTiming, Transport, TurnEntry, TurnLog, TurnStatus, session::LogReader,
        store::Actor,
    },
    protocol::{
        ChatRequest, Chunk, Dialect, FinishReason,
        seed::{Entry, SeedEncoder},
    },
    transport::state::AppState,
};

/// Where a request's answer starts in its turn's log.
pub struct Opened {
    /// The chat the turn belongs to.
    pub chat_id: String,
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
    let principal = super::access::principal_id(actor);
    match command {
        ChatCommand::Answer { message, .. } => {
            let session = super::access::own_chat(runtime, principal, chat_id).await?;
            let record = session
                .as_ref()
                .map(|s| s.snapshot())
                .unwrap_or_else(|| SessionRecord::new(chat_id, 0));
            let inputs = extract(&message, &record, principal)?;
            if inputs.is_empty() {
                return Err(nothing_to_continue(&record));
            }
            let receipt = runtime.submit_as(chat_id, &inputs, actor).await?;
            tracing::info!(chat = chat_id, answers = inputs.len(), %transport, "continuing turn");
            Ok(Opened {
                chat_id: chat_id.to_owned(),
                log: receipt.log,
                from: receipt.from,
                continuation: Some(receipt.message_id),
            })
        }
        ChatCommand::Start { user, context, .. } => {
            let started = runtime
                .start_turn_as(chat_id, user, context, timing, principal)
                .await?;
            tracing::info!(chat = chat_id, turn = %started.turn_id, %transport, "turn started");
            Ok(Opened {
                chat_id: chat_id.to_owned(),
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
    /// A whole frame as the seed's dialect writes it (`data: …\n\n`, `[DONE]` included): in
    /// that dialect the segment ends after its last frame, with no [`Piece::End`].
    Frame(String),
    /// Nothing happened for the keep-alive interval: say something so proxies keep the line.
    KeepAlive,
    /// The segment is over: the turn ended or waits for the person (after its `finish`).
    End,
}

/// What the turn's `finish` would carry now (see [`Entry::Pause`]).
pub type PauseMetadata = Box<dyn Fn() -> Option<Value> + Send>;

/// How a segment writes what it reads.
enum Encoding {
    /// Chunk JSON in a key dialect; the carrier frames it.
    Chunks(Dialect),
    /// The seed's frames, from its encoder.
    Seed {
        encoder: SeedEncoder,
        /// Frames written and not yet yielded.
        queue: VecDeque<String>,
        pause_metadata: Option<PauseMetadata>,
    },
}

/// Reads one segment of a turn's log as chunk JSON (or, in the seed's dialect, as frames).
pub struct Segment {
    reader: LogReader,
    /// A continuation's `start`, sent first.
    opening: Option<String>,
    /// Pauses up to this log position were already answered (a replay passes them).
    replay_until: usize,
    encoding: Encoding,
    keep_alive: Duration,
    /// The `finish` of a pause was sent; `End` follows.
    paused: bool,
    ended: bool,
}

impl Segment {
    /// The answer to a request [`open`]ed. In the seed's dialect the encoder first learns what
    /// the client already has (the log before `from`).
    pub fn new(opened: Opened, dialect: Dialect, keep_alive: Duration) -> Self {
        let encoding = Encoding::new(dialect);
        let mut segment = Segment {
            reader: opened.log.subscribe(opened.from),
            opening: opened.continuation,
            replay_until: 0,
            encoding,
            keep_alive,
            paused: false,
            ended: false,
        };
        if let Encoding::Seed { encoder, .. } = &mut segment.encoding {
            for entry in opened.log.entries_from(0).iter().take(opened.from) {
                encoder.prime(entry_of(entry));
            }
        }
        segment
    }

    /// A resume: the whole assistant message so far (from the turn's `start`), then live.
    pub fn replay(log: Arc<TurnLog>, dialect: Dialect, keep_alive: Duration) -> Self {
        Segment {
            replay_until: log.len(),
            reader: log.subscribe(0),
            opening: None,
            encoding: Encoding::new(dialect),
            keep_alive,
            paused: false,
            ended: false,
        }
    }

    /// Where the seed's dialect gets what its pause `finish` reports (the turn's usage so far
    /// and the model); without it that `finish` has no metadata. Other dialects ignore it.
    pub fn with_pause_metadata(mut self, metadata: PauseMetadata) -> Self {
        if let Encoding::Seed { pause_metadata, .. } = &mut self.encoding {
            *pause_metadata = Some(metadata);
        }
        self
    }

    /// What the segment says last when whoever asked for it may no longer be signed in
    /// (`why`): an `error` chunk in a chunk dialect; nothing in the seed's, whose client knows
    /// no such error.
    pub fn signed_out(&self, why: &str) -> Option<Piece> {
        match self.encoding {
            Encoding::Chunks(dialect) => Chunk::error(why).to_json(dialect).map(Piece::Chunk),
            Encoding::Seed { .. } => None,
        }
    }

    /// The next piece; `None` after [`Piece::End`] (in the seed's dialect: after the last
    /// frame).
    pub async fn next(&mut self) -> Option<Piece> {
        let Encoding::Chunks(dialect) = self.encoding else {
            return self.next_seed_frame().await;
        };
        if self.ended {
            return None;
        }
        if self.paused {
            self.ended = true;
            return Some(Piece::End);
        }
        if let Some(message_id) = self.opening.take()
            && let Some(json) = Chunk::start(message_id).to_json(dialect)
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
                    match Chunk::finish(FinishReason::ToolCalls).to_json(dialect) {
                        Some(json) => return Some(Piece::Chunk(json)),
                        None => {
                            self.ended = true;
                            return Some(Piece::End);
                        }
                    }
                }
                Some(TurnEntry::Chunk(chunk)) => {
                    if let Some(json) = chunk.to_json(dialect) {
                        return Some(Piece::Chunk(json));
                    }
                }
            }
        }
    }

    /// [`Segment::next`] in the seed's dialect: the log's entries through the encoder, which
    /// ends the segment at the turn's pause or end with `[DONE]` of its own.
    async fn next_seed_frame(&mut self) -> Option<Piece> {
        loop {
            let Encoding::Seed {
                encoder,
                queue,
                pause_metadata,
            } = &mut self.encoding
            else {
                return None;
            };
            if let Some(frame) = queue.pop_front() {
                return Some(Piece::Frame(frame));
            }
            if self.ended {
                return None;
            }
            if let Some(message_id) = self.opening.take() {
                queue.extend(encoder.push(Entry::Chunk(&Chunk::start(message_id))));
                continue;
            }
            let next = match tokio::time::timeout(self.keep_alive, self.reader.next()).await {
                Err(_) => return Some(Piece::KeepAlive),
                Ok(next) => next,
            };
            match next {
                Some(TurnEntry::Pause) if self.reader.position() <= self.replay_until => {
                    encoder.prime(Entry::Pause(None));
                }
                Some(TurnEntry::Pause) => {
                    let metadata = pause_metadata.as_ref().and_then(|m| m());
                    queue.extend(encoder.push(Entry::Pause(metadata.as_ref())));
                    self.ended = true;
                }
                None | Some(TurnEntry::End) => {
                    queue.extend(encoder.push(Entry::End));
                    self.ended = true;
                }
                Some(TurnEntry::Chunk(chunk)) => queue.extend(encoder.push(Entry::Chunk(&chunk))),
            }
        }
    }
}

impl Encoding {
    fn new(dialect: Dialect) -> Self {
        match dialect {
            Dialect::Seed(transport) => Encoding::Seed {
                encoder: SeedEncoder::new(transport),
                queue: VecDeque::new(),
                pause_metadata: None,
            },
            dialect => Encoding::Chunks(dialect),
        }
    }
}

/// A log entry as an encoder is primed with it (a pause without its metadata: nothing is
/// written).
pub fn entry_of(entry: &TurnEntry) -> Entry<'_> {
    match entry {
        TurnEntry::Chunk(chunk) => Entry::Chunk(chunk),
        TurnEntry::Pause => Entry::Pause(None),
        TurnEntry::End => Entry::End,
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
                chat_id: "c".into(),
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
                chat_id: "c".into(),
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

    #[tokio::test]
    async fn in_the_seeds_dialect_a_segment_is_the_encoders_frames_to_its_own_done() {
        let entries = vec![
            TurnEntry::Chunk(Chunk::start("m1")),
            TurnEntry::Chunk(Chunk::start_step()),
            TurnEntry::Chunk(Chunk::tool_input_start("c1", "process_payment")),
            TurnEntry::Chunk(Chunk::tool_approval_request("a1", "c1")),
            TurnEntry::Chunk(Chunk::finish_step()),
            TurnEntry::Pause,
            TurnEntry::Chunk(Chunk::tool_output_denied("c1")),
            TurnEntry::Chunk(Chunk::start_step()),
            TurnEntry::End,
        ];
        let seed = Dialect::Seed(crate::protocol::SeedTransport::Sse);
        let opened = |from, continuation: Option<&str>| Opened {
            chat_id: "c".into(),
            log: log(entries.clone()),
            from,
            continuation: continuation.map(str::to_owned),
        };
        let frames = |pieces: Vec<Piece>| -> Vec<String> {
            pieces
                .into_iter()
                .map(|p| match p {
                    Piece::Frame(frame) => frame,
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let first = Segment::new(opened(0, None), seed, Duration::from_secs(10))
            .with_pause_metadata(Box::new(|| {
                Some(serde_json::json!({"modelVersion": "v", "usage": {"inputTokens": 1}}))
            }));
        assert_eq!(
            frames(drain(first).await),
            [
                "data: {\"type\": \"start\", \"messageId\": \"m1\"}\n\n",
                "data: {\"type\": \"tool-input-start\", \"toolCallId\": \"c1\", \"toolName\": \"process_payment\"}\n\n",
                "data: {\"type\": \"tool-approval-request\", \"toolCallId\": \"c1\", \"approvalId\": \"a1\"}\n\n",
                "data: {\"type\": \"finish\", \"finishReason\": \"stop\", \"messageMetadata\": {\"usage\": {\"promptTokens\": 1, \"completionTokens\": null, \"totalTokens\": null}, \"modelVersion\": \"v\"}}\n\n",
                "data: [DONE]\n\n",
            ]
        );
        let second = Segment::new(opened(6, Some("m1")), seed, Duration::from_secs(10));
        assert_eq!(
            frames(drain(second).await),
            [
                "data: {\"type\": \"start\", \"messageId\": \"m1\"}\n\n",
                "data: {\"type\": \"tool-output-error\", \"toolCallId\": \"c1\", \"errorText\": \"This tool call is rejected.\"}\n\n",
                "data: [DONE]\n\n",
            ]
        );
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
