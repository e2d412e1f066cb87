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
//! What a segment yields is its client's [`Encoder`]'s (the route's [`Profile`]): an encoder
//! that closes the stream by itself (its own pause `finish` and `[DONE]`) ends the segment
//! after its last frame, with no [`Piece::End`].
//!
//! [`Profile`]: super::profile::Profile

use std::{collections::VecDeque, sync::Arc, time::Duration};

use serde_json::Value;

use super::{
    answers::decode,
    edge::check_chat_rate,
    error::ApiError,
    profile::{Encoder, Out, Profile},
    request::ChatCommand,
};
use crate::{
    agent::{
        Runtime, Session, TextTiming, TurnEntry, TurnLog, TurnStatus,
        answer::{AnswerOutcome, Answers},
        session::LogReader,
        store::Actor,
    },
    protocol::{ChatRequest, Chunk, FinishReason, UiMessage},
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

/// Starts or continues the turn of `request.id`, for a client of `profile`.
pub async fn open(
    state: &AppState,
    request: ChatRequest,
    profile: &Profile,
    timing: Option<TextTiming>,
    actor: &Actor,
) -> Result<Opened, ApiError> {
    let transport = profile.transport;
    let command = ChatCommand::decode(request, profile)?;
    let chat_id = command.chat_id().to_owned();
    let chat_id = chat_id.as_str();
    check_chat_rate(state, chat_id)?;
    let runtime = &state.runtime;
    let principal = super::access::principal_id(actor);
    match command {
        ChatCommand::Answer { message, .. } => {
            let (session, answers) =
                read_answers(runtime, chat_id, &message, principal, profile).await?;
            let receipt = match runtime.answer(chat_id, session, answers, actor).await? {
                AnswerOutcome::Applied(receipt) => receipt,
                AnswerOutcome::Nothing(status) => return Err(nothing_to_continue(status)),
            };
            tracing::info!(chat = chat_id, %transport, "continuing turn");
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

/// The chat `chat_id` as it is now, which must be `principal`'s (`None`: it does not exist),
/// and the person's answers in `message` (an [`ChatCommand::Answer`]'s), decoded as its
/// client's `profile` reads them: what every
/// route that takes answers in a message list does before it hands both to
/// [`Runtime::answer`] (which of them are new is the gate's to say, on that chat).
pub async fn read_answers(
    runtime: &Arc<Runtime>,
    chat_id: &str,
    message: &UiMessage,
    principal: &str,
    profile: &Profile,
) -> Result<(Option<Arc<Session>>, Answers), ApiError> {
    let session = super::access::own_chat_to_answer(runtime, principal, chat_id).await?;
    let answers = Answers::Resent(decode(message, profile.own_answer)?);
    Ok((session, answers))
}

/// Why a request whose answers the chat all holds already continues nothing (`status`: the
/// chat's turn's, if it has one).
fn nothing_to_continue(status: Option<TurnStatus>) -> ApiError {
    match status {
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
    /// A chunk, as JSON in the segment's key dialect: the carrier frames it.
    Chunk(String),
    /// A whole SSE event (`data: …\n\n`, `[DONE]` included), sent as it is.
    Frame(String),
    /// Nothing happened for the keep-alive interval: say something so proxies keep the line.
    KeepAlive,
    /// The segment is over: the turn ended or waits for the person (after its `finish`).
    End,
}

impl From<Out> for Piece {
    fn from(out: Out) -> Self {
        match out {
            Out::Chunk(json) => Piece::Chunk(json),
            Out::Frame(frame) => Piece::Frame(frame),
        }
    }
}

/// What the turn's `finish` would carry now (see [`Encoder::pause`]).
pub type PauseMetadata = Box<dyn Fn() -> Option<Value> + Send>;

/// Reads one segment of a turn's log and writes it with its client's encoder.
pub struct Segment {
    reader: LogReader,
    /// A continuation's `start`, sent first.
    opening: Option<String>,
    /// Pauses up to this log position were already answered (a replay passes them).
    replay_until: usize,
    encoder: Box<dyn Encoder>,
    /// Written and not yet yielded.
    queue: VecDeque<Piece>,
    pause_metadata: Option<PauseMetadata>,
    keep_alive: Duration,
    /// Everything the segment says is in `queue`.
    ended: bool,
}

impl Segment {
    /// The answer to a request [`open`]ed. The encoder first learns what the client already
    /// has (the log before `from`).
    pub fn new(opened: Opened, mut encoder: Box<dyn Encoder>, keep_alive: Duration) -> Self {
        encoder.prime(&opened.log, opened.from);
        Segment {
            reader: opened.log.subscribe(opened.from),
            opening: opened.continuation,
            replay_until: 0,
            encoder,
            queue: VecDeque::new(),
            pause_metadata: None,
            keep_alive,
            ended: false,
        }
    }

    /// A resume: the whole assistant message so far (from the turn's `start`), then live.
    pub fn replay(log: Arc<TurnLog>, encoder: Box<dyn Encoder>, keep_alive: Duration) -> Self {
        Segment {
            replay_until: log.len(),
            reader: log.subscribe(0),
            opening: None,
            encoder,
            queue: VecDeque::new(),
            pause_metadata: None,
            keep_alive,
            ended: false,
        }
    }

    /// Whether its encoder reports the turn's usage at a pause: then it needs
    /// [`Segment::with_pause_metadata`].
    pub fn reports_usage_at_pause(&self) -> bool {
        self.encoder.reports_usage_at_pause()
    }

    /// Where the encoder gets what its pause reports (the turn's usage so far and the model);
    /// without it the pause has no metadata.
    pub fn with_pause_metadata(mut self, metadata: PauseMetadata) -> Self {
        self.pause_metadata = Some(metadata);
        self
    }

    /// What the segment says last when whoever asked for it may no longer be signed in
    /// (`why`): the encoder's words, if its client knows such an error.
    pub fn signed_out(&mut self, why: &str) -> Option<Piece> {
        self.encoder
            .signed_out(why)
            .into_iter()
            .next()
            .map(Piece::from)
    }

    fn write(&mut self, out: Vec<Out>) {
        self.queue.extend(out.into_iter().map(Piece::from));
    }

    /// The segment stops here (a pause or the end): after `End`, unless the encoder's own
    /// frames close it.
    fn close(&mut self) {
        if !self.encoder.closes_itself() {
            self.queue.push_back(Piece::End);
        }
        self.ended = true;
    }

    /// The next piece; `None` once the segment is over (after [`Piece::End`], or the
    /// encoder's last frame).
    pub async fn next(&mut self) -> Option<Piece> {
        loop {
            if let Some(piece) = self.queue.pop_front() {
                return Some(piece);
            }
            if self.ended {
                return None;
            }
            if let Some(message_id) = self.opening.take() {
                let out = self.encoder.chunk(&Chunk::start(message_id));
                self.write(out);
                continue;
            }
            let next = match tokio::time::timeout(self.keep_alive, self.reader.next()).await {
                Err(_) => return Some(Piece::KeepAlive),
                Ok(next) => next,
            };
            match next {
                None | Some(TurnEntry::End) => {
                    let out = self.encoder.end();
                    self.write(out);
                    self.close();
                }
                Some(TurnEntry::Pause) if self.reader.position() <= self.replay_until => {
                    self.encoder.passed_pause();
                }
                Some(TurnEntry::Pause) => {
                    let metadata = self.pause_metadata.as_ref().and_then(|m| m());
                    let out = self.encoder.pause(metadata.as_ref());
                    self.write(out);
                    if !self.encoder.closes_itself() {
                        // A response that stops for the person says why (AI SDK: the client
                        // then sends the answers as a new request).
                        let out = self.encoder.chunk(&Chunk::finish(FinishReason::ToolCalls));
                        self.write(out);
                    }
                    self.close();
                }
                Some(TurnEntry::Chunk(chunk)) => {
                    let out = self.encoder.chunk(&chunk);
                    self.write(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Dialect;
    use crate::transport::profile::ChunkEncoder;

    fn strict() -> Box<dyn Encoder> {
        Box::new(ChunkEncoder(Dialect::V6Strict))
    }

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
            strict(),
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
            strict(),
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
        let replay = Segment::replay(log(entries), strict(), Duration::from_secs(10));
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
        let seed = || crate::transport::seed::stream().encoder(Dialect::V6Strict);
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
        let first = Segment::new(opened(0, None), seed(), Duration::from_secs(10))
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
        let second = Segment::new(opened(6, Some("m1")), seed(), Duration::from_secs(10));
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
        let mut segment = Segment::replay(log.clone(), strict(), Duration::from_secs(5));
        assert_eq!(segment.next().await, Some(chunk(Chunk::start("m1"))));
        assert_eq!(segment.next().await, Some(Piece::KeepAlive));
        log.push(TurnEntry::End);
        assert_eq!(segment.next().await, Some(Piece::End));
        assert_eq!(segment.next().await, None);
    }
}
