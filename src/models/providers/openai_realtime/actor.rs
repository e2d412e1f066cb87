//! The session actor: one task per conversation that owns the Realtime socket, keeps what the
//! server's conversation has seen, connects, and reads the socket between steps. A step is in
//! [`step`], the person's speech in [`voice`].

mod heard;
mod step;
mod voice;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Weak};

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::wire::{
    self, ServerEvent, SessionSpec, context_events, described, function_output, session_update,
};
use super::{CallNotice, Job, NAMESPACE, Registry, Shared, Ws, WsError};
use crate::agent::history::{AssistantPart, HistoryItem, ToolResult};
use crate::agent::lock;
use crate::agent::model::ModelError;
use crate::agent::voice::VoiceNotice;
use crate::models::providers::gemini_live::handshake_error;
use crate::models::providers::live_sync::{self, SyncedHistory, provider_call_ids};
use voice::Voice;

/// One WebSocket and what only it knows.
struct Connection {
    ws: Ws,
    serial: u64,
    /// What the last `session.update` said.
    spec: SessionSpec,
    /// Calls this socket issued that have no output yet: Realtime call id → tool name.
    issued: HashMap<String, String>,
    /// Responses whose step ended (the tool-call grace) before their `response.done`, with the
    /// calls the runner was handed: a cancellation withdraws them.
    open_calls: HashMap<String, Vec<String>>,
    /// Responses nobody reads (a dropped step, an answer to a turn that did not start).
    discard: HashSet<String>,
    /// What the last response whose step ended at the grace still says: held for the waiting
    /// turn (an aside of it), so the person hears it.
    tail: Option<Tail>,
    /// The response the server is generating, from our `response.create` (or its
    /// `response.created`) to its `response.done`: the server refuses a `response.create`
    /// meanwhile (`conversation_already_has_active_response`), so none is sent then.
    active: Option<Active>,
    /// A `response.create` waits for the active response's `response.done`: whom it is for.
    deferred_create: Option<Ask>,
}

/// Whom a `response.create` of ours asks an answer for: its `metadata` says so, and the
/// server's `response.created` carries it back, so a response the server starts on its own
/// (its voice activity detection answering speech) is never taken for a step's, nor ours for
/// its.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    /// The runner's step (typed, or a turn's next step).
    Step,
    /// Push-to-talk speech just committed: answered like the server's own answers to speech.
    Speech,
}

impl Ask {
    /// Its `metadata.countersign`.
    pub(super) fn tag(self) -> &'static str {
        match self {
            Ask::Step => "step",
            Ask::Speech => "speech",
        }
    }
}

/// What the actor knows of the server's active response.
#[derive(Debug, PartialEq)]
enum Active {
    /// `response.create` went; its `response.created` has not come.
    Requested,
    Response(String),
}

/// The rest of a response after its step ended at the grace (ADR 0041): its words and speech
/// go to the person as an aside of the turn that waits ([`VoiceNotice::WhileWaiting`]).
struct Tail {
    response: String,
    held: Vec<ServerEvent>,
    /// The runtime was told (at its first words or audio).
    announced: bool,
    /// Its `response.done` came.
    done: bool,
}

/// A frame read from the socket.
enum Incoming {
    Event(ServerEvent),
    Closed(ModelError),
    Ignore,
}

pub(super) struct SessionActor {
    shared: Arc<Shared>,
    session_id: String,
    actor_id: u64,
    registry: Weak<Registry>,
    jobs: mpsc::UnboundedReceiver<Job>,
    /// Jobs that came while a step read the socket (a step waits for the one before it).
    queued: VecDeque<Job>,
    conn: Option<Connection>,
    synced: SyncedHistory,
    voice: Voice,
    in_step: bool,
    last_active: Instant,
}

async fn next_frame(conn: &mut Option<Connection>) -> Option<Result<Message, WsError>> {
    match conn {
        Some(conn) => conn.ws.next().await,
        None => std::future::pending().await,
    }
}

fn classify(frame: Option<Result<Message, WsError>>) -> Incoming {
    let text = match frame {
        Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
        Some(Ok(Message::Binary(bytes))) => match String::from_utf8(bytes.to_vec()) {
            Ok(text) => text,
            Err(_) => {
                return Incoming::Closed(ModelError::Protocol(
                    "OpenAI Realtime sent a binary frame that is not UTF-8".into(),
                ));
            }
        },
        Some(Ok(Message::Close(frame))) => {
            let (code, reason) = frame
                .map(|f| (u16::from(f.code), f.reason.to_string()))
                .unwrap_or((1005, String::new()));
            return Incoming::Closed(if matches!(code, 1000 | 1001 | 1005) {
                ModelError::Transport("OpenAI Realtime closed the connection".into())
            } else {
                ModelError::Provider {
                    status: code,
                    message: if reason.is_empty() {
                        format!("OpenAI Realtime closed the connection with code {code}")
                    } else {
                        crate::models::providers::http::short_message(&reason)
                    },
                }
            });
        }
        Some(Ok(_)) => return Incoming::Ignore,
        Some(Err(error)) => {
            return Incoming::Closed(ModelError::Transport(format!(
                "the OpenAI Realtime connection broke: {error}"
            )));
        }
        None => {
            return Incoming::Closed(ModelError::Transport(
                "the OpenAI Realtime connection ended".into(),
            ));
        }
    };
    match wire::parse(&text) {
        Ok(event) => Incoming::Event(event),
        Err(error) => {
            tracing::warn!(%error, "OpenAI Realtime event skipped");
            Incoming::Ignore
        }
    }
}

async fn send(conn: &mut Connection, event: &Value) -> Result<(), String> {
    conn.ws
        .send(Message::text(event.to_string()))
        .await
        .map_err(|e| format!("cannot send to OpenAI Realtime: {e}"))
}

impl SessionActor {
    pub(super) fn new(
        shared: Arc<Shared>,
        session_id: String,
        actor_id: u64,
        registry: Weak<Registry>,
        jobs: mpsc::UnboundedReceiver<Job>,
    ) -> Self {
        Self {
            shared,
            session_id,
            actor_id,
            registry,
            jobs,
            queued: VecDeque::new(),
            conn: None,
            synced: SyncedHistory::new(NAMESPACE),
            voice: Voice::default(),
            in_step: false,
            last_active: Instant::now(),
        }
    }

    pub(super) async fn run(mut self) {
        loop {
            let job = match self.queued.pop_front() {
                Some(job) => job,
                None => {
                    let idle_until = self.last_active + self.shared.config.timeouts.idle_close;
                    tokio::select! {
                        job = self.jobs.recv() => match job {
                            Some(job) => job,
                            None => break,
                        },
                        frame = next_frame(&mut self.conn) => {
                            self.on_idle_frame(frame).await;
                            continue;
                        }
                        _ = sleep_until(idle_until) => {
                            if self.retire() {
                                break;
                            }
                            continue;
                        }
                    }
                }
            };
            match job {
                Job::Step(job) => self.run_step(job).await,
                Job::VoiceContext(request) => self.voice.context = Some(request),
                Job::Voice(input) => self.on_voice(input).await,
                Job::Aside(events) => self.run_aside(events).await,
                Job::Decline(words) => self.decline_spoken(&words),
            }
            self.last_active = Instant::now();
        }
        self.close_connection();
    }

    /// Idle for too long: the socket closes and the actor leaves the registry, unless a job is
    /// on its way (jobs are sent under the registry's lock, so none can come after this).
    fn retire(&mut self) -> bool {
        self.last_active = Instant::now();
        let Some(registry) = self.registry.upgrade() else {
            return true;
        };
        let mut sessions = lock(&registry);
        if !self.jobs.is_empty() {
            return false;
        }
        if sessions
            .get(&self.session_id)
            .is_some_and(|(id, _)| *id == self.actor_id)
        {
            sessions.remove(&self.session_id);
        }
        tracing::debug!(session = %self.session_id, "OpenAI Realtime session idle: closed");
        true
    }

    fn close_connection(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            tokio::spawn(async move {
                let _ = conn.ws.close(None).await;
            });
        }
    }

    /// Forgets the socket and what it saw (the next step seeds a new one).
    fn reset(&mut self, why: &str) {
        tracing::info!(session = %self.session_id, why, "OpenAI Realtime session reset");
        self.close_connection();
        self.synced.clear();
        self.voice.socket_gone();
    }

    async fn on_idle_frame(&mut self, frame: Option<Result<Message, WsError>>) {
        match classify(frame) {
            Incoming::Event(event) => {
                if let Err(reason) = self.observe(&event).await {
                    self.reset(&reason);
                    return;
                }
                self.on_idle_event(event).await
            }
            Incoming::Closed(error) => {
                tracing::info!(session = %self.session_id, %error, "OpenAI Realtime socket ended");
                self.conn = None;
                self.synced.clear();
                self.voice.socket_gone();
            }
            Incoming::Ignore => {}
        }
    }

    /// Asks for a response: now, or once the active one ended (the server refuses a
    /// `response.create` over an active response).
    async fn create_response(&mut self, ask: Ask) -> Result<(), String> {
        let conn = self.conn.as_mut().ok_or("no socket")?;
        if conn.active.is_some() {
            tracing::debug!(session = %self.session_id, active = ?conn.active, "OpenAI Realtime: response.create waits for the active response to end");
            conn.deferred_create = Some(ask);
            return Ok(());
        }
        send(conn, &wire::create_response(ask.tag())).await?;
        conn.active = Some(Active::Requested);
        Ok(())
    }

    /// Follows the server's responses (every event read goes through here first): which one
    /// is active, and the `response.create` that waited for its end.
    async fn observe(&mut self, event: &ServerEvent) -> Result<(), String> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        match event {
            ServerEvent::ResponseCreated { response } => {
                conn.active = Some(Active::Response(response.id.clone()));
            }
            ServerEvent::ResponseDone { response }
                if conn.active == Some(Active::Response(response.id.clone())) =>
            {
                conn.active = None;
            }
            // A `response.create` that failed made no response.
            ServerEvent::Error { error }
                if conn.active == Some(Active::Requested)
                    && error.code.as_deref() != Some("response_cancel_not_active")
                    && !error.about_truncation() =>
            {
                conn.active = None;
            }
            _ => {}
        }
        if conn.active.is_none()
            && let Some(ask) = conn.deferred_create.take()
        {
            send(conn, &wire::create_response(ask.tag())).await?;
            conn.active = Some(Active::Requested);
        }
        Ok(())
    }

    /// A server event no step reads: the person's speech and its answer, late cancellations,
    /// the tail of responses nobody reads.
    async fn on_idle_event(&mut self, event: ServerEvent) {
        if let ServerEvent::Error { error } = &event {
            tracing::warn!(session = %self.session_id, code = ?error.code, message = %error.message, "OpenAI Realtime error between steps");
            return;
        }
        if let ServerEvent::ResponseDone { response } = &event {
            self.settle_open_calls(response);
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if let Some(response) = event.response_id()
            && conn.discard.contains(response)
        {
            if let ServerEvent::ResponseDone { response } = &event {
                conn.discard.remove(&response.id);
            }
            return;
        }
        if self.hold_tail(&event) {
            return;
        }
        self.hold_spoken_answer(event);
    }

    /// A response whose step ended at the grace ended: if it was cancelled, the calls the
    /// runner was handed are withdrawn (their approvals can never run).
    pub(super) fn settle_open_calls(&mut self, response: &wire::ResponseBody) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let Some(calls) = conn.open_calls.remove(&response.id) else {
            return;
        };
        if response.ending() == wire::Ending::Cancelled {
            for call in calls {
                conn.issued.remove(&call);
                tracing::info!(session = %self.session_id, call, "OpenAI Realtime withdrew a call");
                let _ = self.shared.cancellations.send(CallNotice::Withdrawn {
                    session_id: self.session_id.clone(),
                    provider_call_id: call,
                });
            }
        }
    }

    /// An event of a response whose step ended at the grace: held for the waiting turn, whose
    /// runtime is told at the first words or audio; a tail that ends with nothing to say is
    /// dropped. `false`: not such an event.
    fn hold_tail(&mut self, event: &ServerEvent) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let Some(response) = event.response_id() else {
            return false;
        };
        let Some(tail) = conn.tail.as_mut().filter(|t| t.response == response) else {
            // The rest of an older grace-ended response is not read.
            return conn.open_calls.contains_key(response);
        };
        tail.held.push(event.clone());
        match event {
            ServerEvent::ResponseDone { .. } => {
                tail.done = true;
                if !tail.announced {
                    conn.tail = None;
                }
            }
            ServerEvent::AudioDelta { .. } | ServerEvent::TextDelta { .. } if !tail.announced => {
                tail.announced = true;
                tracing::debug!(session = %self.session_id, "OpenAI Realtime speaks after a grace-ended step");
                let _ = self.shared.voice_notices.send(VoiceNotice::WhileWaiting {
                    session_id: self.session_id.clone(),
                });
            }
            _ => {}
        }
        true
    }

    /// The tail announced to the runtime, taken for its aside: (what was held, its response
    /// id, whether it ended).
    pub(super) fn take_tail(&mut self) -> Option<(Vec<ServerEvent>, String, bool)> {
        let conn = self.conn.as_mut()?;
        if !conn.tail.as_ref().is_some_and(|t| t.announced) {
            return None;
        }
        let tail = conn.tail.take()?;
        Some((tail.held, tail.response, tail.done))
    }

    // -- what the server saw ---------------------------------------------------------------------

    /// Matches the request's history against what the server's conversation saw
    /// ([`SyncedHistory::reconcile`]); a conversation that diverged is started afresh.
    fn reconcile(&mut self, history: &[HistoryItem]) {
        if let Err(diverged) = self.synced.reconcile(history) {
            self.reset(&diverged.to_string());
        }
    }

    /// Sends what the server lacks of `history` (no answer asked for). A step of the model's
    /// goes as its words and its calls as `function_call` items (on their Realtime id, or ours
    /// for a call no Realtime socket made), so that a result goes as the call's
    /// `function_call_output` on any socket that has seen the call (ADR 0041): after a
    /// reconnection too, the model sees a real tool result, not words about one. A result whose
    /// call this socket has not seen (or whose response was cancelled) is described in words.
    async fn send_tail(&mut self, history: &[HistoryItem]) -> Result<(), String> {
        let conn = self.conn.as_mut().ok_or("no socket")?;
        let tail = self.synced.unsent(history);
        let ids = provider_call_ids(history, NAMESPACE);
        let id_of = |call_id: &str| {
            ids.get(call_id)
                .cloned()
                .unwrap_or_else(|| call_id.to_owned())
        };
        for item in tail {
            match item {
                HistoryItem::Assistant { parts } => {
                    if let Some(words) = wire::assistant_words(parts) {
                        send(conn, &words).await?;
                    }
                    for part in parts {
                        if let AssistantPart::ToolCall { call } = part {
                            let id = id_of(&call.id);
                            if conn.issued.contains_key(&id) {
                                continue;
                            }
                            send(conn, &wire::function_call(&id, call)).await?;
                            conn.issued.insert(id, call.name.clone());
                        }
                    }
                }
                HistoryItem::ToolResults { results } => {
                    let mut elsewhere: Vec<ToolResult> = Vec::new();
                    for result in results {
                        let id = id_of(&result.call_id);
                        if conn.issued.remove(&id).is_some() {
                            send(conn, &function_output(&id, result)).await?;
                        } else {
                            elsewhere.push(result.clone());
                        }
                    }
                    if !elsewhere.is_empty() {
                        send(conn, &wire::user_message(&described(&elsewhere))).await?;
                    }
                }
                other => {
                    for event in context_events(std::slice::from_ref(other)) {
                        send(conn, &event).await?;
                    }
                }
            }
        }
        self.synced.sent(tail);
        Ok(())
    }

    // -- connecting ------------------------------------------------------------------------------

    /// A socket set up with `spec`: the open one (updated if `spec` changed) or a new one.
    async fn ensure_connection(&mut self, spec: &SessionSpec) -> Result<(), ModelError> {
        if let Some(conn) = self.conn.as_mut() {
            if conn.spec == *spec {
                return Ok(());
            }
            let update = session_update(&self.shared, spec);
            match send(conn, &update).await {
                Ok(()) => {
                    conn.spec = spec.clone();
                    return Ok(());
                }
                Err(reason) => self.reset(&reason),
            }
        }
        self.synced.clear();
        let conn = self.open(spec).await?;
        self.conn = Some(conn);
        Ok(())
    }

    /// Connects, waits for `session.created`, sends `session.update`.
    async fn open(&self, spec: &SessionSpec) -> Result<Connection, ModelError> {
        let serial = self
            .shared
            .serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut request = self
            .shared
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| ModelError::Transport(format!("bad OpenAI Realtime URL: {e}")))?;
        request
            .headers_mut()
            .insert("authorization", self.shared.authorization.clone());
        let limit = self.shared.config.timeouts.connect;
        let connecting = live_sync::connect(request);
        let (ws, _) = match timeout(limit, connecting).await {
            Err(_) => {
                return Err(ModelError::Transport(format!(
                    "OpenAI Realtime did not answer within {} s",
                    limit.as_secs()
                )));
            }
            Ok(Err(error @ WsError::Http(_))) => return Err(handshake_error(error)),
            Ok(Err(error)) => {
                return Err(ModelError::Transport(format!(
                    "cannot connect to OpenAI Realtime: {error}"
                )));
            }
            Ok(Ok(connected)) => connected,
        };
        let mut conn = Connection {
            ws,
            serial,
            spec: spec.clone(),
            issued: HashMap::new(),
            open_calls: HashMap::new(),
            discard: HashSet::new(),
            tail: None,
            active: None,
            deferred_create: None,
        };
        let created = timeout(limit, async {
            loop {
                match classify(conn.ws.next().await) {
                    Incoming::Event(ServerEvent::SessionCreated) => return Ok(()),
                    Incoming::Event(ServerEvent::Error { error }) => {
                        return Err(error.into_model_error());
                    }
                    Incoming::Closed(error) => return Err(error),
                    Incoming::Event(_) | Incoming::Ignore => {}
                }
            }
        })
        .await
        .map_err(|_| {
            ModelError::Transport(format!(
                "OpenAI Realtime sent no session.created within {} s",
                limit.as_secs()
            ))
        })?;
        created?;
        send(&mut conn, &session_update(&self.shared, spec))
            .await
            .map_err(ModelError::Transport)?;
        tracing::debug!(session = %self.session_id, socket = conn.serial, "OpenAI Realtime connected");
        Ok(conn)
    }
}
