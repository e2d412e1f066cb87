//! `GET /api/chat` upgraded to a WebSocket: the AI SDK's `WebSocketChatTransport` (ai@7),
//! pointed at the same URL as HTTP (`new WebSocketChatTransport({ url: '/api/chat' })`).
//!
//! One socket carries many requests, of many chats, told apart by `requestId`
//! ([`crate::protocol::chat_socket`]). A `send` is exactly a `POST /api/chat` body: it starts or
//! continues a turn through the same [`segment`](crate::transport::segment) as SSE, and its
//! answer is that segment as `chunk` frames numbered from 0, closed by `end` (after `finish`,
//! `tool-calls` when the turn waits for the person). `resume` replays the chat's streaming turn
//! from its `start` (`no-active` when nothing streams); `abort` stops the turn the request
//! streams, before the socket reads its next frame. A socket that goes away lets go of its
//! requests only: their turns go on and can be resumed.
//!
//! Each request streams from its own task into the socket's outbox (bounded: a client that does
//! not read holds its requests back, and the write deadline ends the socket). Keep-alives are
//! WebSocket pings: the client closes the socket on any JSON frame it does not expect.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use axum::{
    extract::{Query, State},
    response::Response,
};
use serde_json::json;
use tokio::{sync::mpsc, task::JoinHandle};

use super::{
    LiveQuery, close,
    frame::OpCode,
    inbound::{self, Inbound, Keepalive, Next},
    limiter::FrameLimiter,
    socket::{Handshake, Socket, SocketOptions, Upgrade},
};
use crate::{
    agent::people::{Ending, Hold},
    agent::{TextTiming, Transport},
    protocol::{
        ChatRequest, Dialect,
        chat_socket::{ChatSocketFrameError, ChatSocketRequest, ChatSocketResponse, chunk_frame},
        sse::{DIALECT_HEADER, TEXT_TIMING_HEADER},
    },
    transport::state::AppState,
    transport::{
        ApiError,
        edge::Client,
        profile::{Profile, ai_sdk},
        request::{read_limits, too_many_messages},
        segment::{self, Piece, Segment, timing_named},
    },
};

/// Frames waiting for the socket, from all of its requests.
const OUTBOX: usize = 64;

/// What the client of this socket speaks: the AI SDK's `WebSocketChatTransport`.
fn profile() -> Profile {
    ai_sdk(Transport::Ws)
}

/// The upgrade. The host, origin and credential checks and the per-address rate limit ran in
/// the edge guard. `?text=` and `?dialect=` set the socket's defaults (a `send`'s own headers
/// win); text streams by default (ADR 0004).
pub async fn upgrade(
    State(state): State<AppState>,
    client: Client,
    Query(query): Query<LiveQuery>,
    handshake: Handshake,
) -> Response {
    let defaults = Defaults {
        timing: timing_named(query.text.as_deref()).unwrap_or(TextTiming::Progressive),
        dialect: profile().keys_named(query.dialect.as_deref()),
    };
    let options = SocketOptions {
        // A `send` carries the whole conversation, like a POST body.
        limit: state
            .edge_settings
            .max_body_bytes
            .max(state.edge_settings.ws_max_frame_bytes),
        write_timeout: state.edge_settings.write_timeout,
    };
    let tasks = state.edge.sockets.clone();
    let hold = crate::transport::edge::hold(&state, &client);
    handshake.accept(options, &tasks, move |upgrade| {
        ChatSocket::new(state, client, defaults).run(upgrade, hold)
    })
}

#[derive(Debug, Clone, Copy)]
struct Defaults {
    timing: TextTiming,
    dialect: Dialect,
}

/// A request being answered.
struct Active {
    chat_id: String,
    /// Streams the request's frames into the outbox.
    task: JoinHandle<()>,
    /// Its `end` is on its way: the turn paused or ended, nothing to stop any more.
    ended: Arc<AtomicBool>,
}

/// What a request's task hands the socket.
enum Out {
    Frame(String),
    Ping,
    /// The request's answer is complete.
    Done(String),
}

struct ChatSocket {
    state: AppState,
    client: Client,
    defaults: Defaults,
    requests: HashMap<String, Active>,
    limiter: FrameLimiter,
    outbox: mpsc::Sender<Out>,
    inbox: Option<mpsc::Receiver<Out>>,
}

impl ChatSocket {
    fn new(state: AppState, client: Client, defaults: Defaults) -> Self {
        let (outbox, inbox) = mpsc::channel(OUTBOX);
        ChatSocket {
            limiter: FrameLimiter::new(state.edge_settings.ws_rate, Instant::now()),
            state,
            client,
            defaults,
            requests: HashMap::new(),
            outbox,
            inbox: Some(inbox),
        }
    }

    /// The socket's life; it closes when `hold` ends (its person removed, their sign-in ended).
    async fn run(mut self, upgrade: Upgrade, hold: Hold) {
        let Some(mut socket) = upgrade.socket().await else {
            return;
        };
        let Some(mut inbox) = self.inbox.take() else {
            return;
        };
        let shutdown = self.state.edge.shutdown.clone();
        let mut keepalive = Keepalive::new(self.state.edge_settings.ws_idle);
        let next = loop {
            let next = tokio::select! {
                ready = socket.readable() => match ready {
                    Err(_) => Next::Gone,
                    Ok(()) => self.on_readable(&mut socket, &mut keepalive).await,
                },
                Some(out) = inbox.recv() => match out {
                    Out::Frame(text) => send_text(&mut socket, &text).await,
                    Out::Ping => Next::sent(socket.send(OpCode::Ping, &[]).await),
                    Out::Done(request_id) => {
                        self.requests.remove(&request_id);
                        Next::Continue
                    }
                },
                () = keepalive.tick() => keepalive.check(&mut socket).await,
                () = shutdown.cancelled() => Next::Close(close::GOING_AWAY, "the server is shutting down".into()),
                why = hold.ended() => Next::Close(close::SIGNED_OUT, why.words().into()),
            };
            match next {
                Next::Continue => {}
                next => break next,
            }
        };
        // The socket is gone or going: its requests stop forwarding; their turns go on.
        for (_, active) in self.requests.drain() {
            active.task.abort();
        }
        if let Next::Close(code, reason) = &next {
            tracing::info!(code, %reason, "closing chat socket");
        }
        next.end(socket).await;
    }

    /// What the client sent, through the one path every socket reads its client by
    /// ([`inbound::receive`]).
    async fn on_readable(&mut self, socket: &mut Socket, keepalive: &mut Keepalive) -> Next {
        let limits = read_limits(&self.state);
        let read = move |text: String| ChatSocketRequest::decode(&text, limits);
        match inbound::receive(socket, &mut self.limiter, keepalive, read).await {
            Inbound::Frame(decoded) => self.on_request(decoded, socket).await,
            Inbound::Binary(_) => Next::Close(
                close::UNSUPPORTED,
                "binary frames are not accepted; send JSON text frames".into(),
            ),
            // A dropped request must not leave its chat waiting: say so to it.
            Inbound::Dropped {
                text: Some(text), ..
            } => match ChatSocketRequest::request_id_of(&text) {
                Some(request_id) => {
                    let error = ApiError::new(
                        axum::http::StatusCode::TOO_MANY_REQUESTS,
                        "rate_limited",
                        "too many frames on this socket; slow down",
                    );
                    self.send_error(socket, &request_id, &error).await
                }
                None => Next::Continue,
            },
            Inbound::Dropped { text: None, .. } => Next::Continue,
            Inbound::Socket(next) => next,
        }
    }

    /// A request frame, read or not.
    async fn on_request(
        &mut self,
        decoded: Result<ChatSocketRequest, ChatSocketFrameError>,
        socket: &mut Socket,
    ) -> Next {
        // Who sends it, as the directory has them now (see `Connection::on_frame`).
        match self.client.principal_now(self.state.runtime.people()) {
            Some(principal) => self.client.principal = Some(principal),
            None => return Next::Close(close::SIGNED_OUT, Ending::Removed.words().into()),
        }
        match decoded {
            Ok(ChatSocketRequest::Send {
                request_id,
                id,
                messages,
                trigger,
                message_id,
                headers,
            }) => {
                let request = ChatRequest {
                    id,
                    messages,
                    trigger,
                    message_id,
                };
                self.on_send(socket, request_id, request, &headers).await
            }
            Ok(ChatSocketRequest::Resume {
                request_id,
                id,
                headers,
                ..
            }) => self.on_resume(socket, request_id, id, &headers).await,
            Ok(ChatSocketRequest::Abort { request_id }) => {
                self.on_abort(&request_id).await;
                Next::Continue
            }
            Err(ChatSocketFrameError::Invalid {
                request_id,
                message,
            }) => {
                let error = ApiError::bad_request("invalid_frame", message);
                self.send_error(socket, &request_id, &error).await
            }
            Err(ChatSocketFrameError::TooManyMessages { request_id, max }) => {
                self.send_error(socket, &request_id, &too_many_messages(max))
                    .await
            }
            // Nothing to answer it with: the client would close on our answer anyway.
            Err(e) => Next::Close(close::POLICY, e.to_string()),
        }
    }

    async fn on_send(
        &mut self,
        socket: &mut Socket,
        request_id: String,
        request: ChatRequest,
        headers: &BTreeMap<String, String>,
    ) -> Next {
        if self.requests.contains_key(&request_id) {
            let error = ApiError::bad_request(
                "duplicate_request_id",
                "a request with this requestId is still being answered",
            );
            return self.send_error(socket, &request_id, &error).await;
        }
        let timing = timing_named(headers.get(TEXT_TIMING_HEADER).map(String::as_str))
            .unwrap_or(self.defaults.timing);
        let dialect = self.dialect(headers);
        let chat_id = request.id.trim().to_owned();
        let actor = self.client.actor(profile().transport);
        // Opened here, not in the request's task: an `abort` right behind it must find the turn.
        match segment::open(&self.state, request, &profile(), Some(timing), &actor).await {
            Ok(opened) => {
                let encoder = profile().encoder(dialect);
                let segment = Segment::new(opened, encoder, self.state.edge_settings.keep_alive);
                self.stream(request_id, chat_id, segment, false);
                Next::Continue
            }
            Err(error) => self.send_error(socket, &request_id, &error).await,
        }
    }

    async fn on_resume(
        &mut self,
        socket: &mut Socket,
        request_id: String,
        chat_id: String,
        headers: &BTreeMap<String, String>,
    ) -> Next {
        let dialect = self.dialect(headers);
        if let Err(error) = crate::transport::access::may_touch_chat(
            &self.state.runtime,
            self.client.principal().id(),
            &chat_id,
        )
        .await
        {
            return self.send_error(socket, &request_id, &error).await;
        }
        match segment::streaming_log(&self.state, &chat_id).await {
            Ok(None) => {
                let frame = ChatSocketResponse::NoActive {
                    request_id: &request_id,
                }
                .to_json();
                send_text(socket, &frame).await
            }
            Ok(Some(log)) => {
                let encoder = profile().encoder(dialect);
                let segment = Segment::replay(log, encoder, self.state.edge_settings.keep_alive);
                self.stream(request_id, chat_id, segment, true);
                Next::Continue
            }
            Err(error) => self.send_error(socket, &request_id, &error).await,
        }
    }

    /// The person's Stop: the turn the request streams is interrupted, and the request's frames
    /// stop. Unknown or finished requests: nothing to do.
    async fn on_abort(&mut self, request_id: &str) {
        let Some(active) = self.requests.remove(request_id) else {
            return;
        };
        active.task.abort();
        if active.ended.load(Ordering::Acquire) {
            return;
        }
        let stopped = self
            .state
            .runtime
            .interrupt(&active.chat_id, "stopped by the person")
            .await;
        tracing::info!(chat = %active.chat_id, request = request_id, stopped, "abort");
    }

    fn dialect(&self, headers: &BTreeMap<String, String>) -> Dialect {
        match headers.get(DIALECT_HEADER) {
            Some(name) => profile().keys_named(Some(name)),
            None => self.defaults.dialect,
        }
    }

    /// Streams `segment` as the answer to `request_id` from a task of its own.
    fn stream(&mut self, request_id: String, chat_id: String, mut segment: Segment, start: bool) {
        let outbox = self.outbox.clone();
        let id = request_id.clone();
        let ended = Arc::new(AtomicBool::new(false));
        let ending = ended.clone();
        let task = tokio::spawn(async move {
            if start {
                let frame = ChatSocketResponse::Start { request_id: &id }.to_json();
                if outbox.send(Out::Frame(frame)).await.is_err() {
                    return;
                }
            }
            let mut sequence = 0u64;
            while let Some(piece) = segment.next().await {
                let out = match piece {
                    Piece::Chunk(json) => {
                        let frame = chunk_frame(&id, sequence, &json);
                        sequence += 1;
                        Out::Frame(frame)
                    }
                    Piece::KeepAlive => Out::Ping,
                    // Only an encoder that writes whole SSE events yields these; this
                    // profile's writes chunks.
                    Piece::Frame(_) => continue,
                    Piece::End => {
                        ending.store(true, Ordering::Release);
                        Out::Frame(ChatSocketResponse::End { request_id: &id }.to_json())
                    }
                };
                if outbox.send(out).await.is_err() {
                    return;
                }
            }
            let _ = outbox.send(Out::Done(id)).await;
        });
        self.requests.insert(
            request_id,
            Active {
                chat_id,
                task,
                ended,
            },
        );
    }

    /// Answers a request with an error (the socket stays open): `errorText` is the JSON an HTTP
    /// client would get, so the stable code travels with the message.
    async fn send_error(
        &mut self,
        socket: &mut Socket,
        request_id: &str,
        error: &ApiError,
    ) -> Next {
        tracing::warn!(request = request_id, code = error.code, message = %error.message, "chat socket request refused");
        let text = json!({"error": {"code": error.code, "message": error.message}}).to_string();
        let frame = ChatSocketResponse::Error {
            request_id,
            error_text: &text,
        }
        .to_json();
        send_text(socket, &frame).await
    }
}

async fn send_text(socket: &mut Socket, text: &str) -> Next {
    Next::sent(socket.send_text(text).await)
}
