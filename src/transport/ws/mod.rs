//! BIDI mode: one WebSocket per chat carrying many turns, parallel approvals, browser-tool
//! results, interrupts and reconnects (seed ADR 0003/0010, the BIDI confirmation draft).
//!
//! Client → server: JSON text frames, the seed system's envelopes ([`ClientFrame`]). Server →
//! client: one UI chunk per text frame in SSE form (`data: {json}\n\n`) and `data: [DONE]\n\n` at
//! the end of every turn, so the seed system's own frontend can talk to Countersign; plus the
//! `{"type":"pong"}` control frame.
//!
//! A socket reads the chat's turn log, so everything a turn emits reaches it whatever started
//! the turn, and a reconnecting client says how many frames of the current turn it received
//! (`{"type":"resume","id","received"}`) and gets exactly the missing ones. Approval requests are
//! already wrapped by `start-step` … `finish-step` in the runner's output (seed ADR 0011), and the
//! socket stays open while the person decides. One socket per chat: a newer one takes over and
//! the older is closed with a reason.
//!
//! Whose chat a frame addresses depends on the route ([`ChatScope`]): on `/api/live` the
//! client's `id` names it; on the seed's `/live` every connection has its own chat, as the seed
//! gave each connection its own session (its frontend sends one constant id per endpoint, so two
//! tabs would otherwise share and take over one chat). A `resume` frame naming a chat still
//! re-attaches to it on either route.
//!
//! What a socket's client speaks is its route's client profile (`transport::profile`, ADR 0031):
//! on `/api/live` the AI SDK's chunks; on `/live` the seed's dialect (`transport::seed`, ADR
//! 0019), whose encoder writes its stream and whose manners are the seed backend's: invalid JSON
//! closes the socket (1002), unknown or malformed frames are logged and ignored.
//!
//! Voice (ADR 0035, [`voice`]): binary frames are microphone audio; `audio_chunk` and
//! `audio_control` are voice on both routes; the agent's speech goes out as binary frames to a
//! socket opened with `?audio=binary`, as `data-pcm` chunks to every other.
//!
//! The WebSocket itself is ours ([`socket`], RFC 6455 framing in [`frame`]): a socket waiting for
//! a person holds its TCP stream, one small task and no buffers (bench/: 1.9 KiB per idle
//! socket, 7.2 KiB with tungstenite).

pub mod chat;
#[cfg(test)]
mod conformance;
mod forward;
mod frame;
mod socket;
mod voice;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Router,
    extract::{Query, State},
    response::Response,
    routing::{MethodRouter, get},
};
use frame::{Message, OpCode};
use futures::future::Either;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::forward::Forwarding;
pub use self::socket::is_upgrade;
use self::socket::{Handshake, Socket, SocketError, SocketOptions, Upgrade};
use super::{
    edge::{Client, limits::TokenBucket},
    error::ApiError,
    profile::{Encoder, Profile, ai_sdk},
    request::{ChatCommand, MAX_CHAT_ID, off_thread, read_limits, too_many_messages},
    seed,
    segment::{read_answers, timing_named},
};
use crate::{
    agent::Transport,
    agent::clock::IdKind,
    agent::people::{Ending, Hold},
    agent::{
        ApprovalDecision, BrowserResult, PersonInput, Runtime, Session, TextTiming, TurnEntry,
        answer::{AnswerOutcome, Answers},
        followers::Following,
        session::{LogReader, Read, TurnLog},
    },
    protocol::{
        ChatRequest, Chunk, ClientFrame, Dialect, EnvelopeError, ServerControl, ToolReport,
        envelope::{ReadError, ReadLimits},
        sse::{DONE_FRAME, encode_chunk},
    },
    transport::state::AppState,
};

/// WebSocket close codes used here (RFC 6455 §7.4.1, plus application codes).
pub mod close {
    pub use super::frame::code::*;
    /// Another socket took over this chat.
    pub const REPLACED: u16 = 4001;
    /// Whoever opened the socket may no longer be signed in: they were removed, or signed out
    /// of the session they opened it with (HTTP's 401, in the application range). The reason
    /// says which; the page goes to sign-in rather than reconnecting.
    pub const SIGNED_OUT: u16 = 4401;
    /// The server failed (RFC 6455 §7.4.1).
    pub const INTERNAL: u16 = 1011;
}

/// The BIDI routes: `/api/live`, and `/live` as the seed system's alias (a client profile
/// each, ADR 0031).
pub fn routes() -> Router<AppState> {
    Router::new()
        // The AI SDK's chunks (`?dialect=full` for every key), text as it is generated unless
        // `?text=hold`, the client's `id` naming the chat.
        .route(
            "/api/live",
            live_route(|| ai_sdk(Transport::Bidi), ChatScope::Client),
        )
        .route("/live", live_route(seed::live, ChatScope::Connection))
}

/// Per-socket options from the upgrade URL: `?text=progressive|hold&dialect=full`.
#[derive(Debug, Default, Deserialize)]
pub struct LiveQuery {
    pub text: Option<String>,
    pub dialect: Option<String>,
    /// `binary`: the agent's speech as binary frames (our page); otherwise `data-pcm` chunks.
    pub audio: Option<String>,
}

/// Connection numbers, for the logs.
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// Whose chat a socket's `message` frames address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChatScope {
    /// The client's `id` names the chat (`/api/live`).
    Client,
    /// The connection has its own chat, named by the server, unguessable (`/live`); the
    /// client's `id` is only logged.
    Connection,
}

/// A BIDI route whose client speaks `profile` (the seed's `/live`: its dialect, ADR 0019; text
/// timing from `COUNTERSIGN_TEXT_TIMING`, default `hold`, seed ADR 0004, unless `?text=`; a
/// chat per connection, seed ADR 0001).
fn live_route(profile: fn() -> Profile, scope: ChatScope) -> MethodRouter<AppState> {
    get(
        move |state: State<AppState>,
              client: Client,
              query: Query<LiveQuery>,
              handshake: Handshake| async move {
            upgrade(state, client, query, handshake, profile(), scope)
        },
    )
}

/// The upgrade. The origin check (CSRF) and the per-address rate limit ran in the edge guard.
/// `?text=` and (where the profile lets the client choose) `?dialect=` override the profile's
/// own.
fn upgrade(
    State(state): State<AppState>,
    client: Client,
    Query(query): Query<LiveQuery>,
    handshake: Handshake,
    profile: Profile,
    scope: ChatScope,
) -> Response {
    let timing = timing_named(query.text.as_deref()).or(profile.timing);
    let keys = profile.keys_named(query.dialect.as_deref());
    let options = SocketOptions {
        limit: state.edge_settings.ws_max_frame_bytes,
        write_timeout: state.edge_settings.write_timeout,
    };
    let hold = super::edge::hold(&state, &client);
    let mut connection = Connection::new(&state, timing, profile, keys, scope, client, hold);
    connection.voice = voice::Voice::new(
        &state.edge_settings,
        query.audio.as_deref() == Some("binary"),
        Instant::now(),
    );
    handshake.accept(options, &state.edge.sockets, move |upgrade| {
        connection.run(upgrade)
    })
}

/// Frames over its rate a socket may send before it is closed (1008).
const STRIKES_BEFORE_CLOSE: u32 = 50;

/// Every frame a client sends (text, binary, ping, pong) takes a token: `rate` a second, bursts
/// of twice that. Frames over the rate are dropped; too many of them close the socket.
struct FrameLimiter {
    bucket: TokenBucket,
    strikes: u32,
}

impl FrameLimiter {
    fn new(rate: u32, now: Instant) -> Self {
        let rate = f64::from(rate);
        FrameLimiter {
            bucket: TokenBucket::new(rate * 2.0, rate, now),
            strikes: 0,
        }
    }

    /// Whether a frame arriving at `now` may be handled.
    fn allow(&mut self, now: Instant) -> bool {
        let allowed = self.bucket.take(now).is_ok();
        if !allowed {
            self.strikes += 1;
        }
        allowed
    }
}

/// One WebSocket connection. Everything here lives as long as the socket, idle or not, so it
/// holds handles and small settings, not the whole `AppState`.
struct Connection {
    runtime: Arc<Runtime>,
    idle: Duration,
    timing: Option<TextTiming>,
    /// What the client speaks.
    profile: Profile,
    /// The chunk keys it takes.
    keys: Dialect,
    /// What writes the forwarded turn's frames.
    encoder: Box<dyn Encoder>,
    scope: ChatScope,
    id: u64,
    chat: Option<Arc<str>>,
    /// This socket as its chat's follower (set once it knows its chat).
    following: Option<Following>,
    /// The turn this socket forwards.
    turn: Option<Forwarding>,
    limiter: FrameLimiter,
    /// How much of a `message` frame's messages is read.
    limits: ReadLimits,
    /// Who is on the other end, as the directory has them at the last frame.
    client: Client,
    /// Ends when they are removed or their sign-in ends: the socket closes.
    hold: Hold,
    /// Cancelled when the server shuts down.
    shutdown: CancellationToken,
    /// Microphone audio in and the agent's speech out.
    voice: voice::Voice,
}

/// What woke an idle connection.
enum Wake {
    /// The client sent something (or closed).
    Readable,
    /// The forwarded turn has a new entry, or ended.
    Entry,
    /// The chat has news, or another socket took it over.
    Signal,
    /// Time to check on the client.
    Ping,
    /// The server is shutting down.
    Shutdown,
    /// Whoever opened the socket may no longer be signed in.
    SignedOut(Ending),
}

/// What the connection loop should do after handling something.
enum Next {
    Continue,
    /// Close with this code and reason.
    Close(u16, String),
    /// The client closed (with its code): answer and end.
    ClientClosed(Option<(u16, String)>),
    /// The connection is gone; nothing more can be sent.
    Gone,
}

impl Connection {
    fn new(
        state: &AppState,
        timing: Option<TextTiming>,
        profile: Profile,
        keys: Dialect,
        scope: ChatScope,
        client: Client,
        hold: Hold,
    ) -> Self {
        Connection {
            runtime: state.runtime.clone(),
            idle: state.edge_settings.ws_idle,
            timing,
            profile,
            keys,
            encoder: profile.encoder(keys),
            scope,
            id: CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1,
            chat: None,
            following: None,
            turn: None,
            limiter: FrameLimiter::new(state.edge_settings.ws_rate, Instant::now()),
            limits: read_limits(state),
            client,
            hold,
            shutdown: state.edge.shutdown.clone(),
            voice: voice::Voice::new(&state.edge_settings, false, Instant::now()),
        }
    }

    /// The connection's life. What every idle socket holds is this task waiting in [`wait`],
    /// so that waits on small futures only; handling what woke it happens in a box that exists
    /// only while it runs.
    #[allow(clippy::manual_async_fn)] // see below
    fn run(mut self, upgrade: Upgrade) -> impl Future<Output = ()> + Send + 'static {
        // A block, not an `async fn`: an async fn's arguments are moved into locals and the
        // task would keep room for the connection twice.
        async move {
            let Some(mut socket) = upgrade.socket().await else {
                return;
            };
            let mut ping = tokio::time::interval(self.idle / 3);
            ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ping.tick().await;
            let mut last_heard = Instant::now();
            let next = loop {
                let Some(wake) = wait(
                    &self.turn,
                    &self.following,
                    &socket,
                    &mut ping,
                    &self.shutdown,
                    &self.hold,
                )
                .await
                else {
                    break Next::Gone;
                };
                match Box::pin(self.on_wake(wake, &mut socket, &mut last_heard)).await {
                    Next::Continue => {}
                    next => break next,
                }
            };
            // Done with the chat, whatever the close handshake takes.
            if let (Some(chat), Some(following)) = (&self.chat, &self.following) {
                self.runtime.followers.leave(chat, following.id);
            }
            match next {
                Next::Close(code, reason) => {
                    tracing::info!(connection = self.id, chat = ?self.chat, code, %reason, "closing socket");
                    Box::pin(socket.close(code, &reason)).await;
                }
                Next::ClientClosed(close) => Box::pin(socket.answer_close(close)).await,
                Next::Continue | Next::Gone => {}
            }
        }
    }

    async fn on_wake(&mut self, wake: Wake, socket: &mut Socket, last_heard: &mut Instant) -> Next {
        match wake {
            Wake::Readable => match socket.next_message() {
                Ok(None) => Next::Continue,
                Ok(Some(message)) => {
                    *last_heard = Instant::now();
                    self.on_message(message, socket).await
                }
                Err(SocketError::Frame(e)) => Next::Close(e.close_code(), e.to_string()),
                Err(SocketError::Eof | SocketError::Io(_)) => Next::Gone,
            },
            Wake::Entry => {
                let read = match self.turn.as_mut().and_then(|t| t.reader.as_mut()) {
                    Some(reader) => reader.try_next(),
                    None => Read::Nothing,
                };
                match read {
                    Read::Entry(entry) => self.forward(Some(entry), socket).await,
                    Read::End => self.forward(None, socket).await,
                    Read::Nothing => Next::Continue,
                }
            }
            Wake::Signal => {
                if self
                    .following
                    .as_ref()
                    .is_some_and(|f| f.signal.is_replaced())
                {
                    Next::Close(
                        close::REPLACED,
                        "another connection took over this chat".into(),
                    )
                } else {
                    self.catch_up().await;
                    Next::Continue
                }
            }
            Wake::Shutdown => Next::Close(close::GOING_AWAY, "the server is shutting down".into()),
            Wake::SignedOut(why) => Next::Close(close::SIGNED_OUT, why.words().into()),
            Wake::Ping => {
                if last_heard.elapsed() >= self.idle {
                    Next::Close(close::GOING_AWAY, "idle timeout".into())
                } else if socket.send(OpCode::Ping, &[]).await.is_err() {
                    Next::Gone
                } else {
                    Next::Continue
                }
            }
        }
    }

    async fn on_message(&mut self, message: Message, socket: &mut Socket) -> Next {
        if !matches!(message, Message::Close(_)) && !self.limiter.allow(Instant::now()) {
            if self.limiter.strikes > STRIKES_BEFORE_CLOSE {
                // One log line (the close), however many frames the flood had.
                return Next::Close(close::POLICY, "too many frames".into());
            }
            if self.limiter.strikes == 1 {
                // Said once, and not logged: a flood is one log line, its close.
                return self
                    .send_chunk(
                        socket,
                        &Chunk::error("Too many frames: slow down (rate limit)."),
                    )
                    .await;
            }
            return Next::Continue;
        }
        let text = match message {
            Message::Text(text) => text,
            // Microphone audio: PCM16LE mono 16 kHz.
            Message::Binary(pcm) => return self.on_audio(pcm, socket).await,
            Message::Close(close) => return Next::ClientClosed(close),
            Message::Ping(payload) => {
                return match socket.send(OpCode::Pong, &payload).await {
                    Ok(()) => Next::Continue,
                    Err(_) => Next::Gone,
                };
            }
            Message::Pong(_) => return Next::Continue,
        };
        let limits = self.limits;
        let size = text.len();
        let read = off_thread(text, size, move |text| {
            ClientFrame::value_for_server(&text, limits)
        })
        .await;
        let value: Value = match read {
            Ok(Ok(value)) => value,
            Ok(Err(ReadError::TooManyMessages { max })) => {
                return self.send_api_error(socket, too_many_messages(max)).await;
            }
            Ok(Err(ReadError::Json(e))) if self.profile.socket.close_on_bad_json => {
                return Next::Close(close::PROTOCOL_ERROR, format!("Invalid JSON: {e}"));
            }
            Ok(Err(ReadError::Json(e))) => {
                return self
                    .send_error(socket, &format!("The frame is not valid JSON: {e}"))
                    .await;
            }
            Err(e) => return Next::Close(close::INTERNAL, e.message),
        };
        let connection = self.id;
        let value =
            seed::normalise_frame(value, self.chat.as_deref(), || format!("live-{connection}"));
        match ClientFrame::from_value(value) {
            Ok(frame) => self.on_frame(frame, socket).await,
            Err(e) if self.profile.socket.ignore_unknown_frames => {
                tracing::warn!(connection = self.id, chat = ?self.chat, error = %e, "frame ignored");
                Next::Continue
            }
            Err(EnvelopeError::UnknownType { type_name }) => {
                self.send_error(socket, &format!("Unknown frame type {type_name:?}."))
                    .await
            }
            Err(e) => {
                self.send_error(socket, &format!("The frame cannot be read: {e}"))
                    .await
            }
        }
    }

    async fn on_frame(&mut self, frame: ClientFrame, socket: &mut Socket) -> Next {
        // Who sends it, as the directory has them now: nothing a socket does rests on who they
        // were when it opened (a role change takes effect at the next frame).
        match self.client.principal_now(self.runtime.people()) {
            Some(principal) => self.client.principal = Some(principal),
            None => return Next::Close(close::SIGNED_OUT, Ending::Removed.words().into()),
        }
        match frame {
            ClientFrame::Ping { timestamp } => {
                let pong = ServerControl::Pong { timestamp }.to_json();
                self.send_text(socket, pong).await
            }
            ClientFrame::Interrupt { reason } => {
                if let Some(chat) = &self.chat {
                    let reason = reason.unwrap_or_else(|| "interrupted by the person".into());
                    self.runtime.interrupt(chat, &reason).await;
                }
                Next::Continue
            }
            ClientFrame::AudioControl { action, id, mode } => {
                self.on_audio_control(action, id, mode, socket).await
            }
            ClientFrame::AudioChunk {
                chunk,
                sample_rate,
                channels,
                bit_depth,
            } => {
                self.on_audio_chunk(&chunk, (sample_rate, channels, bit_depth), socket)
                    .await
            }
            ClientFrame::Resume { id, received } => self.on_resume(id, received, socket).await,
            ClientFrame::ToolResult {
                tool_call_id,
                result,
            } => {
                let Some(chat) = self.chat.clone() else {
                    return self
                        .send_error(socket, "Send a message first: this socket has no chat yet.")
                        .await;
                };
                let input = self.tool_result_input(&chat, tool_call_id, result).await;
                self.submit(&chat, vec![input], socket).await
            }
            ClientFrame::Message {
                id,
                messages,
                trigger,
                message_id,
            } => {
                let request = ChatRequest {
                    id,
                    messages,
                    trigger,
                    message_id,
                };
                self.on_chat(request, socket).await
            }
        }
    }

    /// A `tool_result` frame: a browser tool's output, or — as in the seed's draft — a
    /// confirmation addressed to an approval id ([`tool_result`]).
    async fn tool_result_input(&self, chat: &str, id: String, result: Value) -> PersonInput {
        let session = self.runtime.existing_session(chat).await.ok().flatten();
        tool_result(id, result, |id| {
            session.as_ref().is_some_and(|s| s.has_pending_approval(id))
        })
    }

    async fn on_chat(&mut self, mut request: ChatRequest, socket: &mut Socket) -> Next {
        if self.scope == ChatScope::Connection {
            request.id = self.connection_chat(&request.id).to_string();
        }
        // A socket serves one chat: a frame for another is refused whatever else it holds.
        if let Some(bound) = &self.chat
            && !request.id.trim().is_empty()
            && **bound != *request.id.trim()
        {
            let chat_id = request.id.trim();
            return self
                .send_error(
                    socket,
                    &format!(
                        "This socket belongs to chat {bound}; open another socket for {chat_id}."
                    ),
                )
                .await;
        }
        let command = match ChatCommand::decode(request, &self.profile) {
            Ok(command) => command,
            Err(e) => return self.send_api_error(socket, e).await,
        };
        let chat_id = command.chat_id().to_owned();
        if let Some(refusal) = self.foreign(&chat_id).await {
            return self.send_api_error(socket, refusal).await;
        }
        self.bind(&chat_id);
        let runtime = self.runtime.clone();
        let principal = self.client.principal();
        match command {
            ChatCommand::Answer { message, .. } => {
                match read_answers(&runtime, &chat_id, &message, principal.id()).await {
                    Ok((session, answers)) => self.answer(&chat_id, session, answers, socket).await,
                    Err(e) => self.send_api_error(socket, e).await,
                }
            }
            ChatCommand::Start { user, context, .. } => {
                match runtime
                    .start_turn_as(&chat_id, user, context, self.timing, principal.id())
                    .await
                {
                    Ok(started) => {
                        tracing::info!(connection = self.id, chat = %chat_id, turn = %started.turn_id, "turn started");
                        self.follow(started.turn_id, &started.log, 0);
                        Next::Continue
                    }
                    Err(e) => self.send_api_error(socket, ApiError::from(e)).await,
                }
            }
        }
    }

    async fn submit(&mut self, chat: &str, inputs: Vec<PersonInput>, socket: &mut Socket) -> Next {
        let session = match self.runtime.existing_session(chat).await {
            Ok(session) => session,
            Err(e) => return self.send_api_error(socket, ApiError::from(e)).await,
        };
        self.answer(chat, session, Answers::Given(inputs), socket)
            .await
    }

    /// Gives the chat the person's answers and follows what they cause; answers the chat holds
    /// already (a client's resent copy) change nothing and are not an error here.
    async fn answer(
        &mut self,
        chat: &str,
        session: Option<Arc<Session>>,
        answers: Answers,
        socket: &mut Socket,
    ) -> Next {
        let actor = self.client.actor(self.profile.transport);
        match self.runtime.answer(chat, session, answers, &actor).await {
            Ok(AnswerOutcome::Applied(receipt)) => {
                match &mut self.turn {
                    // Already reading it, or waiting at its pause: go on from there.
                    Some(turn) if turn.turn_id == receipt.turn_id => {
                        if turn.reader.is_none() {
                            turn.reader = Some(receipt.log.subscribe(turn.sent));
                        }
                    }
                    _ => self.follow(receipt.turn_id, &receipt.log, receipt.from),
                }
                Next::Continue
            }
            Ok(AnswerOutcome::Nothing(_)) => Next::Continue,
            Err(e) => self.send_api_error(socket, ApiError::from(e)).await,
        }
    }

    /// Why this socket's principal may not touch `chat_id` (someone else's chat), if they may
    /// not.
    async fn foreign(&self, chat_id: &str) -> Option<ApiError> {
        super::access::may_touch_chat(&self.runtime, self.client.principal().id(), chat_id)
            .await
            .err()
    }

    /// `resume`: re-attach to the chat's current turn after `received` frames.
    async fn on_resume(&mut self, chat_id: String, received: u64, socket: &mut Socket) -> Next {
        if let Some(refusal) = self.foreign(&chat_id).await {
            return self.send_api_error(socket, refusal).await;
        }
        self.bind(&chat_id);
        let session = match self.runtime.existing_session(&chat_id).await {
            Ok(Some(session)) => session,
            Ok(None) => {
                return self
                    .send_error(socket, &format!("There is no chat {chat_id} to resume."))
                    .await;
            }
            Err(e) => return self.send_api_error(socket, ApiError::from(e)).await,
        };
        let Some((turn_id, log)) = session.current_turn() else {
            return self
                .send_error(socket, "This chat has no turn to resume.")
                .await;
        };
        let entries = log.entries_from(0);
        let mut frames = 0u64;
        let mut position = entries.len();
        for (index, entry) in entries.iter().enumerate() {
            if frames == received {
                position = index;
                break;
            }
            if !matches!(entry, TurnEntry::Pause) {
                frames += 1;
            }
        }
        if frames < received {
            return self
                .send_error(
                    socket,
                    &format!(
                        "Resume asked to skip {received} frames but the turn has only {frames}."
                    ),
                )
                .await;
        }
        // Say what still waits for the person before replaying, as a transient data chunk the
        // client's reducer does not store.
        let record = session.snapshot();
        let pending: Vec<Value> = record
            .turn
            .iter()
            .flat_map(|t| t.calls.iter())
            .filter(|c| c.is_waiting())
            .map(|c| {
                json!({
                    "toolCallId": c.call.id,
                    "toolName": c.call.name,
                    "approvalId": c.approval_id(),
                    "waitingFor": if c.approval_id().is_some() { "approval" } else { "browser" },
                })
            })
            .collect();
        let announce = Chunk::transient_data(
            "countersign-pending",
            json!({ "pending": pending, "resumedAt": received }),
        );
        // Only a client that speaks our protocol resumes (the seed's never does), so this goes
        // out past the profile's encoder (the seed's drops data chunks), in its keys.
        if let Some(frame) = encode_chunk(&announce, self.keys)
            && let Next::Gone = self.send_text(socket, frame).await
        {
            return Next::Gone;
        }
        self.follow(turn_id, &log, position);
        Next::Continue
    }
}

/// A `tool_result` frame as the person's input: a confirmation addressed to an approval id (the
/// seed's draft), or a browser tool's output or failure ([`ToolReport::read`] says which;
/// `is_pending_approval`: whether the chat has a waiting approval with an id).
fn tool_result(
    id: String,
    result: Value,
    is_pending_approval: impl FnOnce(&str) -> bool,
) -> PersonInput {
    match ToolReport::read(id, result, is_pending_approval) {
        ToolReport::Confirmation {
            approval_id,
            approved,
            reason,
        } => PersonInput::Approval {
            approval_id,
            decision: if approved {
                ApprovalDecision::Approve
            } else {
                ApprovalDecision::Deny { reason }
            },
            step_up: None,
        },
        ToolReport::Failed {
            tool_call_id,
            message,
        } => PersonInput::BrowserResult {
            tool_call_id,
            result: BrowserResult::Error { message },
        },
        ToolReport::Output {
            tool_call_id,
            output,
        } => PersonInput::BrowserResult {
            tool_call_id,
            result: BrowserResult::Output { output },
        },
    }
}

/// What wakes an idle connection next (`None`: the connection failed). Only small futures: this
/// is what ten thousand idle sockets wait in.
async fn wait(
    turn: &Option<Forwarding>,
    following: &Option<Following>,
    socket: &Socket,
    ping: &mut tokio::time::Interval,
    shutdown: &CancellationToken,
    hold: &Hold,
) -> Option<Wake> {
    let entry = match turn.as_ref().and_then(|t| t.reader.as_ref()) {
        Some(reader) => Either::Left(reader.ready()),
        None => Either::Right(std::future::pending()),
    };
    let signal = match following {
        Some(following) => Either::Left(following.signal.wait()),
        None => Either::Right(std::future::pending()),
    };
    tokio::select! {
        ready = socket.readable() => ready.ok().map(|()| Wake::Readable),
        () = entry => Some(Wake::Entry),
        () = signal => Some(Wake::Signal),
        _ = ping.tick() => Some(Wake::Ping),
        () = shutdown.cancelled() => Some(Wake::Shutdown),
        why = hold.ended() => Some(Wake::SignedOut(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_limiter_allows_bursts_then_counts_strikes() {
        let now = Instant::now();
        let mut limiter = FrameLimiter::new(5, now);
        let allowed = (0..20).filter(|_| limiter.allow(now)).count();
        assert_eq!(allowed, 10);
        assert_eq!(limiter.strikes, 10);
    }

    #[test]
    fn a_tool_result_frame_is_an_answer_or_a_browser_result_by_what_it_says() {
        let pending = |id: &str| id == "apv-1";
        let approval = |input: PersonInput| match input {
            PersonInput::Approval {
                approval_id,
                decision,
                ..
            } => Some((approval_id, decision)),
            _ => None,
        };
        assert_eq!(
            approval(tool_result(
                "apv-1".into(),
                json!({"approved": true}),
                pending
            )),
            Some(("apv-1".into(), ApprovalDecision::Approve))
        );
        assert_eq!(
            approval(tool_result(
                "confirmation-apv-9".into(),
                json!({"confirmed": false, "reason": "no"}),
                |_| false
            )),
            Some((
                "apv-9".into(),
                ApprovalDecision::Deny {
                    reason: Some("no".into())
                }
            ))
        );
        let browser = |input: PersonInput| match input {
            PersonInput::BrowserResult { result, .. } => Some(result),
            _ => None,
        };
        for (value, failed) in [
            (json!({"latitude": 1.0, "longitude": 2.0}), false),
            (json!({"latitude": 1.0, "error": "coarse fix"}), false),
            (json!({"success": true, "track": 2}), false),
            (json!({"success": false, "error": "blocked"}), true),
            (json!({"error": "permission denied"}), true),
            (json!({"error": "no", "message": "denied"}), true),
            (json!("plain"), false),
        ] {
            let result = browser(tool_result("call-1".into(), value.clone(), |_| false)).unwrap();
            assert_eq!(
                matches!(result, BrowserResult::Error { .. }),
                failed,
                "{value}"
            );
        }
    }
}
