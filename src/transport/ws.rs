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
//! already wrapped by `start-step` … `finish-step` in the runner's output (ADR 0011), and the
//! socket stays open while the person decides. One socket per chat: a newer one takes over and
//! the older is closed with a reason.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use axum::{
    Router,
    extract::{
        Query, State, WebSocketUpgrade,
        ws::{CloseFrame, Message, Utf8Bytes, WebSocket},
    },
    response::Response,
    routing::get,
};
use futures::{SinkExt, StreamExt, stream::SplitSink};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{
    answers::{extract, is_answer, user_content},
    error::ApiError,
    guard::Client,
    sse::seed_message,
};
use crate::{
    agent::{
        ApprovalDecision, BrowserResult, PersonInput, SessionRecord, TextTiming, TurnEntry,
        TurnLog, UserTurn, session::LogReader, store::Actor,
    },
    protocol::{
        ChatRequest, Chunk, ClientFrame, Dialect, EnvelopeError, ServerControl,
        sse::{DONE_FRAME, encode_chunk},
    },
    server::AppState,
};

/// WebSocket close codes used here (RFC 6455 §7.4.1, plus an application code).
pub mod close {
    pub const GOING_AWAY: u16 = 1001;
    pub const INVALID_PAYLOAD: u16 = 1007;
    pub const POLICY: u16 = 1008;
    pub const TOO_BIG: u16 = 1009;
    /// Another socket took over this chat.
    pub const REPLACED: u16 = 4001;
}

/// The BIDI routes: `/api/live`, and `/live` as the seed system's alias.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/live", get(upgrade))
        .route("/live", get(upgrade))
}

/// Per-socket options from the upgrade URL: `?text=progressive|hold&dialect=full`.
#[derive(Debug, Default, Deserialize)]
struct LiveQuery {
    text: Option<String>,
    dialect: Option<String>,
}

/// The chats that have a live socket, so a second socket can take over from the first.
#[derive(Debug, Default)]
pub struct LiveSockets {
    next_id: AtomicU64,
    by_chat: Mutex<HashMap<String, (u64, Arc<Notify>)>>,
}

impl LiveSockets {
    fn connection_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers `conn` as the socket of `chat`, telling a previous one to go.
    fn bind(&self, chat: &str, conn: u64, notify: Arc<Notify>) {
        let mut map = crate::agent::session::lock(&self.by_chat);
        if let Some((old, old_notify)) = map.insert(chat.to_string(), (conn, notify))
            && old != conn
        {
            old_notify.notify_one();
        }
    }

    /// Whether `chat` has a live socket.
    pub fn is_live(&self, chat: &str) -> bool {
        crate::agent::session::lock(&self.by_chat).contains_key(chat)
    }

    fn release(&self, chat: &str, conn: u64) {
        let mut map = crate::agent::session::lock(&self.by_chat);
        if map.get(chat).is_some_and(|(id, _)| *id == conn) {
            map.remove(chat);
        }
    }
}

/// The upgrade. The origin check (CSRF) and the per-address rate limit ran in the edge guard.
async fn upgrade(
    State(state): State<AppState>,
    client: Client,
    Query(query): Query<LiveQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    let timing = match query.text.as_deref() {
        Some("progressive") => Some(TextTiming::Progressive),
        Some("hold") => Some(TextTiming::Hold),
        _ => None,
    };
    let dialect = match query.dialect.as_deref() {
        Some("full") => Dialect::Full,
        _ => Dialect::V6Strict,
    };
    let limit = state.http.ws_max_frame_bytes;
    // Small buffers: an idle socket holding a pending approval should cost kilobytes, not the
    // 2 × 128 KiB tungstenite reserves by default (bench/: memory per idle BIDI session).
    // Frames are written at once (every chunk is flushed anyway).
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .read_buffer_size(WS_READ_BUFFER)
        .write_buffer_size(0)
        .on_upgrade(move |socket| async move {
            Connection::new(state, timing, dialect, client.actor("bidi"))
                .run(socket)
                .await;
        })
}

/// The read buffer of a socket (grows for a larger frame, up to the frame limit). Client frames
/// are a few hundred bytes (bench/: a 4 KiB buffer was 4 KiB of every idle session).
const WS_READ_BUFFER: usize = 1024;

type Sink = SplitSink<WebSocket, Message>;

/// A token bucket: `rate` frames per second, bursts of `2 × rate`.
struct RateLimiter {
    rate: f64,
    tokens: f64,
    last: Instant,
    strikes: u32,
}

impl RateLimiter {
    fn new(rate: u32) -> Self {
        RateLimiter {
            rate: f64::from(rate),
            tokens: f64::from(rate) * 2.0,
            last: Instant::now(),
            strikes: 0,
        }
    }

    fn allow(&mut self) -> bool {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate * 2.0);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.strikes += 1;
            false
        }
    }
}

/// One WebSocket connection.
struct Connection {
    state: AppState,
    timing: Option<TextTiming>,
    dialect: Dialect,
    id: u64,
    chat: Option<String>,
    /// The turn being forwarded, and how many frames of it this socket has sent.
    reader: Option<(Arc<TurnLog>, LogReader)>,
    replaced: Arc<Notify>,
    limiter: RateLimiter,
    /// Who is on the other end (for the audit log).
    actor: Actor,
}

/// What the connection loop should do after handling something.
enum Next {
    Continue,
    Close(u16, String),
}

impl Connection {
    fn new(state: AppState, timing: Option<TextTiming>, dialect: Dialect, actor: Actor) -> Self {
        let id = state.live_sockets.connection_id();
        let rate = state.http.ws_rate;
        Connection {
            state,
            timing,
            dialect,
            id,
            chat: None,
            reader: None,
            replaced: Arc::new(Notify::new()),
            limiter: RateLimiter::new(rate),
            actor,
        }
    }

    async fn run(mut self, socket: WebSocket) {
        let (mut sink, mut stream) = socket.split();
        let idle = self.state.http.ws_idle;
        let mut ping = tokio::time::interval(idle / 3);
        ping.tick().await;
        let mut last_heard = Instant::now();
        let replaced = self.replaced.clone();
        let outcome = loop {
            let next = tokio::select! {
                frame = stream.next() => match frame {
                    None => break None,
                    Some(Err(e)) => break Some(close_for(&e)),
                    Some(Ok(message)) => {
                        last_heard = Instant::now();
                        // Boxed: the handler's state (a turn start, an answer) is large and
                        // only exists while a frame is handled, not in every idle socket.
                        Box::pin(self.on_message(message, &mut sink)).await
                    }
                },
                entry = next_entry(&mut self.reader) => self.forward(entry, &mut sink).await,
                _ = ping.tick() => {
                    if last_heard.elapsed() >= idle {
                        Next::Close(close::GOING_AWAY, "idle timeout".into())
                    } else if sink.send(Message::Ping(Vec::new().into())).await.is_err() {
                        break None;
                    } else {
                        Next::Continue
                    }
                }
                () = replaced.notified() => Next::Close(
                    close::REPLACED,
                    "another connection took over this chat".into(),
                ),
            };
            if let Next::Close(code, reason) = next {
                break Some((code, reason));
            }
        };
        if let Some((code, reason)) = outcome {
            tracing::info!(connection = self.id, chat = ?self.chat, code, %reason, "closing socket");
            let _ = sink
                .send(Message::Close(Some(CloseFrame {
                    code,
                    reason: Utf8Bytes::from(reason),
                })))
                .await;
        }
        let _ = sink.close().await;
        if let Some(chat) = &self.chat {
            self.state.live_sockets.release(chat, self.id);
        }
    }

    async fn on_message(&mut self, message: Message, sink: &mut Sink) -> Next {
        let text = match message {
            Message::Text(text) => text,
            Message::Binary(_) => {
                return self
                    .send_error(
                        sink,
                        "Binary frames are not accepted; send JSON text frames.",
                    )
                    .await;
            }
            Message::Close(_) => return Next::Close(1000, "bye".into()),
            Message::Ping(_) | Message::Pong(_) => return Next::Continue,
        };
        if !self.limiter.allow() {
            if self.limiter.strikes > 50 {
                return Next::Close(close::POLICY, "too many frames".into());
            }
            return self
                .send_error(sink, "Too many frames: slow down (rate limit).")
                .await;
        }
        let value: Value = match serde_json::from_str(text.as_str()) {
            Ok(value) => value,
            Err(e) => {
                return self
                    .send_error(sink, &format!("The frame is not valid JSON: {e}"))
                    .await;
            }
        };
        let value = self.normalise(value);
        match ClientFrame::from_value(value) {
            Ok(frame) => self.on_frame(frame, sink).await,
            Err(EnvelopeError::UnknownType { type_name }) => {
                self.send_error(sink, &format!("Unknown frame type {type_name:?}."))
                    .await
            }
            Err(e) => {
                self.send_error(sink, &format!("The frame cannot be read: {e}"))
                    .await
            }
        }
    }

    /// Accepts the seed system's looser `message` frames: no chat id (the socket's, or a new
    /// one), and messages with `content` strings or seed-only parts.
    fn normalise(&self, mut value: Value) -> Value {
        if value.get("type").and_then(Value::as_str) != Some("message") {
            return value;
        }
        if let Some(obj) = value.as_object_mut() {
            if obj.get("id").and_then(Value::as_str).is_none() {
                let id = self
                    .chat
                    .clone()
                    .unwrap_or_else(|| format!("live-{}", self.id));
                obj.insert("id".into(), json!(id));
            }
            if let Some(Value::Array(messages)) = obj.get_mut("messages") {
                for message in messages.iter_mut() {
                    if serde_json::from_value::<crate::protocol::UiMessage>(message.clone())
                        .is_err()
                        && let Ok(normalised) = seed_message(message)
                        && let Ok(v) = serde_json::to_value(normalised)
                    {
                        *message = v;
                    }
                }
            }
        }
        value
    }

    async fn on_frame(&mut self, frame: ClientFrame, sink: &mut Sink) -> Next {
        match frame {
            ClientFrame::Ping { timestamp } => {
                let pong = ServerControl::Pong { timestamp }.to_json();
                self.send_text(sink, pong).await
            }
            ClientFrame::Interrupt { reason } => {
                if let Some(chat) = &self.chat {
                    let reason = reason.unwrap_or_else(|| "interrupted by the person".into());
                    self.state.runtime.interrupt(chat, &reason);
                }
                Next::Continue
            }
            ClientFrame::AudioChunk { .. } | ClientFrame::AudioControl { .. } => {
                let label = self.state.runtime.model_for("bidi").label();
                self.send_error(
                    sink,
                    &format!("Voice input is not supported by this model ({label})."),
                )
                .await
            }
            ClientFrame::Resume { id, received } => self.on_resume(id, received, sink).await,
            ClientFrame::ToolResult {
                tool_call_id,
                result,
            } => {
                let Some(chat) = self.chat.clone() else {
                    return self
                        .send_error(sink, "Send a message first: this socket has no chat yet.")
                        .await;
                };
                let input = self.tool_result_input(&chat, tool_call_id, result).await;
                self.submit(&chat, vec![input], sink).await
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
                self.on_chat(request, sink).await
            }
        }
    }

    /// A `tool_result` frame: a browser tool's output, or — as in the seed's draft — a
    /// confirmation `{confirmed: bool}` addressed to an approval id.
    async fn tool_result_input(&self, chat: &str, id: String, result: Value) -> PersonInput {
        let id = id
            .strip_prefix("confirmation-")
            .map(str::to_string)
            .unwrap_or(id);
        let is_approval = match self.state.runtime.existing_session(chat).await {
            Ok(Some(session)) => session.has_pending_approval(&id),
            _ => false,
        };
        if is_approval
            || result.get("confirmed").is_some() && result.as_object().is_some_and(|o| o.len() <= 2)
        {
            let approved = result
                .get("confirmed")
                .or_else(|| result.get("approved"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let decision = if approved {
                ApprovalDecision::Approve
            } else {
                ApprovalDecision::Deny {
                    reason: result
                        .get("reason")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                }
            };
            return PersonInput::Approval {
                approval_id: id,
                decision,
            };
        }
        let failed = result.get("success").and_then(Value::as_bool) == Some(false)
            || (result.get("error").is_some()
                && result.get("result").is_none()
                && result
                    .as_object()
                    .is_some_and(|o| !o.contains_key("latitude")));
        let result = if failed {
            BrowserResult::Error {
                message: result
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("the browser reported an error")
                    .to_string(),
            }
        } else {
            BrowserResult::Output { output: result }
        };
        PersonInput::BrowserResult {
            tool_call_id: id,
            result,
        }
    }

    async fn on_chat(&mut self, request: ChatRequest, sink: &mut Sink) -> Next {
        let chat_id = request.id.trim().to_string();
        if chat_id.is_empty() {
            return self
                .send_error(sink, "The message frame has no chat id.")
                .await;
        }
        if let Some(bound) = &self.chat
            && bound != &chat_id
        {
            return self
                .send_error(
                    sink,
                    &format!(
                        "This socket belongs to chat {bound}; open another socket for {chat_id}."
                    ),
                )
                .await;
        }
        self.bind(&chat_id);
        let Some(last) = request.messages.last() else {
            return self
                .send_error(sink, "The message frame has no messages.")
                .await;
        };
        let runtime = self.state.runtime.clone();
        if is_answer(last) {
            let record = match runtime.existing_session(&chat_id).await {
                Ok(Some(session)) => session.snapshot(),
                Ok(None) => SessionRecord::new(&chat_id, 0),
                Err(e) => return self.send_error(sink, &e.to_string()).await,
            };
            let inputs = match extract(last, &record) {
                Ok(inputs) => inputs,
                Err(e) => return self.send_error(sink, &e.message).await,
            };
            if inputs.is_empty() {
                return Next::Continue;
            }
            return self.submit(&chat_id, inputs, sink).await;
        }
        let (text, attachments) = user_content(last);
        let user = UserTurn {
            message_id: (!last.id.is_empty()).then(|| last.id.clone()),
            text,
            attachments,
            transport: "bidi",
        };
        match runtime.start_turn(&chat_id, user, self.timing).await {
            Ok(started) => {
                tracing::info!(connection = self.id, chat = %chat_id, turn = %started.turn_id, "turn started");
                let reader = started.log.subscribe(0);
                self.reader = Some((started.log, reader));
                Next::Continue
            }
            Err(e) => self.send_error(sink, &ApiError::from(e).message).await,
        }
    }

    async fn submit(&mut self, chat: &str, inputs: Vec<PersonInput>, sink: &mut Sink) -> Next {
        match self
            .state
            .runtime
            .submit_as(chat, &inputs, &self.actor)
            .await
        {
            Ok(receipt) => {
                let following = self
                    .reader
                    .as_ref()
                    .is_some_and(|(log, _)| Arc::ptr_eq(log, &receipt.log));
                if !following {
                    let reader = receipt.log.subscribe(receipt.from);
                    self.reader = Some((receipt.log, reader));
                }
                Next::Continue
            }
            Err(e) => self.send_error(sink, &ApiError::from(e).message).await,
        }
    }

    /// `resume`: re-attach to the chat's current turn after `received` frames.
    async fn on_resume(&mut self, chat_id: String, received: u64, sink: &mut Sink) -> Next {
        self.bind(&chat_id);
        let session = match self.state.runtime.existing_session(&chat_id).await {
            Ok(Some(session)) => session,
            Ok(None) => {
                return self
                    .send_error(sink, &format!("There is no chat {chat_id} to resume."))
                    .await;
            }
            Err(e) => return self.send_error(sink, &e.to_string()).await,
        };
        let Some(log) = session.current_log() else {
            return self
                .send_error(sink, "This chat has no turn to resume.")
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
                    sink,
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
        if let Next::Close(code, reason) = self.send_chunk(sink, &announce).await {
            return Next::Close(code, reason);
        }
        let reader = log.subscribe(position);
        self.reader = Some((log, reader));
        Next::Continue
    }

    fn bind(&mut self, chat: &str) {
        if self.chat.as_deref() != Some(chat) {
            self.state
                .live_sockets
                .bind(chat, self.id, self.replaced.clone());
            self.chat = Some(chat.to_string());
        }
    }

    /// Sends one log entry: a chunk frame, `[DONE]` at the end of the turn, nothing for a pause.
    async fn forward(&mut self, entry: Option<TurnEntry>, sink: &mut Sink) -> Next {
        match entry {
            None => {
                self.reader = None;
                Next::Continue
            }
            Some(TurnEntry::Pause) => Next::Continue,
            Some(TurnEntry::End) => {
                self.reader = None;
                self.send_text(sink, DONE_FRAME.to_string()).await
            }
            Some(TurnEntry::Chunk(chunk)) => self.send_chunk(sink, &chunk).await,
        }
    }

    async fn send_chunk(&mut self, sink: &mut Sink, chunk: &Chunk) -> Next {
        match encode_chunk(chunk, self.dialect) {
            Some(frame) => self.send_text(sink, frame).await,
            None => Next::Continue,
        }
    }

    async fn send_error(&mut self, sink: &mut Sink, message: &str) -> Next {
        tracing::warn!(connection = self.id, chat = ?self.chat, message, "frame rejected");
        self.send_chunk(sink, &Chunk::error(message)).await
    }

    async fn send_text(&mut self, sink: &mut Sink, text: String) -> Next {
        match sink.send(Message::Text(text.into())).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close(close::GOING_AWAY, "send failed".into()),
        }
    }
}

/// The next entry of the forwarded turn; never resolves when no turn is forwarded.
async fn next_entry(reader: &mut Option<(Arc<TurnLog>, LogReader)>) -> Option<TurnEntry> {
    match reader {
        Some((_, reader)) => reader.next().await,
        None => std::future::pending().await,
    }
}

/// The close code for a read error: too big (1009), invalid UTF-8 (1007), else going away.
fn close_for(error: &axum::Error) -> (u16, String) {
    let text = error.to_string();
    let source = std::error::Error::source(error)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let all = format!("{text} {source}").to_lowercase();
    if all.contains("too long")
        || all.contains("too big")
        || all.contains("space limit")
        || all.contains("capacity")
    {
        (close::TOO_BIG, "message too big".into())
    } else if all.contains("utf-8") || all.contains("utf8") {
        (
            close::INVALID_PAYLOAD,
            "invalid UTF-8 in a text frame".into(),
        )
    } else {
        (close::GOING_AWAY, "read error".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limiter_allows_bursts_then_refuses() {
        let mut limiter = RateLimiter::new(5);
        let allowed = (0..20).filter(|_| limiter.allow()).count();
        assert_eq!(allowed, 10);
        assert_eq!(limiter.strikes, 10);
    }
}
