//! The session actor: one task per conversation that owns the socket, keeps what the server
//! session has seen, connects and resumes, and reads the socket between steps. A step itself is
//! in [`step`].

mod step;
mod voice;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::NAMESPACE;
use super::history::{live_contents, live_ids};
use super::wire::{
    Incoming, LiveFunctionResponse, ServerContent, ServerMessage, SetupSpec, classify, close_error,
    handshake_error, is_normal_close, tool_response,
};
use super::{
    CallNotice, Job, LiveTimeouts, Registry, STRAY_CALL_ERROR, Shared, ToolBehavior, Ws, WsError,
};
use crate::agent::history::HistoryItem;
use crate::agent::lock;
use crate::agent::model::ModelError;
use crate::models::providers::gemini;
use crate::models::providers::live_sync::{self, SyncedHistory, split_tail};

/// The latest resumable handle and how much of `synced` it covers.
#[derive(Debug, Clone)]
struct ResumePoint {
    handle: String,
    synced_len: usize,
    at: Instant,
}

/// One WebSocket and what only it knows.
struct Connection {
    ws: Ws,
    serial: u64,
    /// The setup minus handle and history (system + tools): a change needs a new socket.
    fingerprint: String,
    going_away: bool,
    /// Opened with `historyConfig`: the first `clientContent` is the initial history.
    seeding: bool,
    /// Calls this socket issued that have no response yet: Live id → tool name.
    issued: HashMap<String, String>,
    /// Issued calls the model was told wait for a countersignature (`willContinue: true`):
    /// their final response says `willContinue: false`.
    awaiting: HashSet<String>,
    /// Generations in flight that no step owns; their content is discarded.
    discard: u32,
    /// One bare `turnComplete` may still come for a generation already closed.
    stray_turn_complete: bool,
}

/// Why opening a socket failed.
enum ConnectError {
    /// The server closed the socket during setup: with a handle, retry fresh.
    Rejected(ModelError),
    Failed(ModelError),
}

impl ConnectError {
    fn into_inner(self) -> ModelError {
        match self {
            ConnectError::Rejected(e) | ConnectError::Failed(e) => e,
        }
    }
}

/// One conversation's Live session: its socket (if open), what the server session has seen,
/// the latest resumption handle. Runs as a task until the model is dropped or the session is
/// forgotten ([`LiveTimeouts::resume_ttl`]).
pub(super) struct SessionActor {
    shared: Arc<Shared>,
    session_id: String,
    actor_id: u64,
    registry: Weak<Registry>,
    conn: Option<Connection>,
    synced: SyncedHistory,
    resume: Option<ResumePoint>,
    /// Live ids the server cancelled after their step ended.
    cancelled: HashSet<String>,
    last_used: Instant,
    /// The person's voice in this session.
    voice: voice::Voice,
    /// What the actor is asked to do ([`Job`]); read between steps and, for voice, during one.
    jobs: mpsc::UnboundedReceiver<Job>,
    /// The model is gone: no more jobs.
    jobs_closed: bool,
    /// A job that arrived during a step and waits for it to end.
    deferred: std::collections::VecDeque<Job>,
    /// A step is reading the socket.
    in_step: bool,
}

/// What woke the idle actor.
enum Wake {
    Job(Option<Job>),
    Frame(Option<Result<Message, WsError>>),
    IdleClose,
    Forget,
}

async fn next_frame(conn: &mut Option<Connection>) -> Option<Result<Message, WsError>> {
    match conn {
        Some(conn) => conn.ws.next().await,
        None => std::future::pending().await,
    }
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
            conn: None,
            synced: SyncedHistory::new(NAMESPACE),
            resume: None,
            cancelled: HashSet::new(),
            last_used: Instant::now(),
            voice: voice::Voice::default(),
            jobs,
            jobs_closed: false,
            deferred: std::collections::VecDeque::new(),
            in_step: false,
        }
    }

    fn timeouts(&self) -> LiveTimeouts {
        self.shared.config.timeouts
    }

    pub(super) async fn run(mut self) {
        tracing::debug!(
            session = %self.session_id, actor = self.actor_id,
            "Gemini Live session started"
        );
        loop {
            let idle_at = self.last_used + self.timeouts().idle_close;
            let forget_at = self.last_used + self.timeouts().resume_ttl;
            let connected = self.conn.is_some();
            // Server messages first: a step starts from the latest handle, `goAway` and
            // cancellations.
            let wake = if let Some(job) = self.deferred.pop_front() {
                Wake::Job(Some(job))
            } else {
                tokio::select! {
                biased;
                frame = next_frame(&mut self.conn) => Wake::Frame(frame),
                job = self.jobs.recv() => Wake::Job(job),
                () = sleep_until(idle_at), if connected => Wake::IdleClose,
                () = sleep_until(forget_at), if !connected => Wake::Forget,
                }
            };
            match wake {
                Wake::Job(Some(Job::Step(job))) => {
                    self.in_step = true;
                    self.run_step(job).await;
                    self.in_step = false;
                    self.last_used = Instant::now();
                }
                Wake::Job(Some(Job::VoiceContext(request))) => self.voice.context = Some(request),
                Wake::Job(Some(Job::Awaiting(call))) => self.on_awaiting(&call).await,
                Wake::Job(Some(Job::Aside(events))) => {
                    self.in_step = true;
                    self.run_aside(events).await;
                    self.in_step = false;
                    self.last_used = Instant::now();
                }
                Wake::Job(Some(Job::Decline(words))) => self.decline_spoken(&words).await,
                Wake::Job(Some(Job::Voice(input))) => {
                    self.on_voice(input).await;
                    self.last_used = Instant::now();
                }
                Wake::Job(None) => break,
                Wake::Frame(frame) => self.on_idle_frame(frame).await,
                Wake::IdleClose => {
                    tracing::debug!(
                        session = %self.session_id,
                        "closing the idle Gemini Live socket"
                    );
                    self.close_connection();
                }
                Wake::Forget => {
                    if self.retire() {
                        break;
                    }
                }
            }
        }
        self.close_connection();
        tracing::debug!(
            session = %self.session_id, actor = self.actor_id,
            "Gemini Live session ended"
        );
    }

    /// Leaves the registry unless a job is queued (checked under the registry lock, which every
    /// sender holds while sending).
    fn retire(&self) -> bool {
        let Some(registry) = self.registry.upgrade() else {
            return true;
        };
        let mut sessions = lock(&registry);
        if !self.jobs.is_empty() || !self.deferred.is_empty() {
            return false;
        }
        if sessions
            .get(&self.session_id)
            .is_some_and(|(id, _)| *id == self.actor_id)
        {
            sessions.remove(&self.session_id);
        }
        true
    }

    fn close_connection(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            tracing::debug!(
                session = %self.session_id, socket = conn.serial,
                "closing a Gemini Live socket"
            );
            tokio::spawn(async move {
                let _ = timeout(Duration::from_secs(2), conn.ws.close(None)).await;
            });
        }
    }

    /// Forgets everything the server session knew: the next step seeds a fresh socket.
    fn reset(&mut self, why: &str) {
        tracing::info!(session = %self.session_id, why, "starting a fresh Gemini Live session");
        self.close_connection();
        self.synced.clear();
        self.resume = None;
        self.cancelled.clear();
    }

    // -- between steps --------------------------------------------------------------------------

    async fn on_idle_frame(&mut self, frame: Option<Result<Message, WsError>>) {
        match classify(frame) {
            Incoming::Ignore => {}
            Incoming::Broken(error) => {
                tracing::warn!(
                    session = %self.session_id, %error,
                    "dropping the Gemini Live socket"
                );
                self.close_connection();
            }
            Incoming::Closed { code, reason } => {
                match code {
                    Some(code) if !is_normal_close(code) => tracing::warn!(
                        session = %self.session_id, code, %reason,
                        "Gemini Live closed the idle socket with an error"
                    ),
                    _ => {
                        tracing::debug!(
                            session = %self.session_id, ?code, %reason,
                            "Gemini Live closed the idle socket"
                        )
                    }
                }
                self.conn = None;
            }
            Incoming::Message(message) => {
                if let Err(reason) = self.on_idle_message(*message).await {
                    tracing::debug!(
                        session = %self.session_id, %reason,
                        "the idle Gemini Live socket broke"
                    );
                    self.conn = None;
                }
            }
        }
    }

    /// A server message with no step to take it.
    async fn on_idle_message(&mut self, message: ServerMessage) -> Result<(), String> {
        let Some(message) = self.hold_spoken_answer(message) else {
            return Ok(());
        };
        self.common(&message);
        if let Some(cancellation) = message.tool_call_cancellation {
            self.remember_cancelled(cancellation.ids);
        }
        if let Some(calls) = message.tool_call {
            self.answer_stray_calls(calls.function_calls, "arrived after the step ended")
                .await?;
        }
        if let Some(content) = message.server_content
            && let Some(conn) = self.conn.as_mut()
            && triage(conn, &content)
            && content.has_content()
        {
            // A generation no step asked for (or the talk after a non-blocking call that
            // outlasted the grace period): discard it to its end.
            tracing::info!(
                session = %self.session_id,
                "dropping Gemini Live output that arrived between steps"
            );
            conn.discard = 1;
            end_of_generation(conn, &content);
        }
        Ok(())
    }

    /// Messages handled the same in and out of a step: resumption handles and `goAway`.
    fn common(&mut self, message: &ServerMessage) {
        if let Some(update) = &message.session_resumption_update {
            match (&update.new_handle, update.resumable) {
                (Some(handle), resumable) if !handle.is_empty() && resumable != Some(false) => {
                    self.resume = Some(ResumePoint {
                        handle: handle.clone(),
                        synced_len: self.synced.len(),
                        at: Instant::now(),
                    });
                }
                _ => {}
            }
        }
        if let Some(go_away) = &message.go_away {
            tracing::info!(
                session = %self.session_id,
                time_left = go_away.time_left.as_deref().unwrap_or("?"),
                "Gemini Live will close this socket; the next step reconnects with the handle"
            );
            if let Some(conn) = self.conn.as_mut() {
                conn.going_away = true;
            }
        }
    }

    /// Cancellations of calls no step holds: remembered, published.
    fn remember_cancelled(&mut self, ids: Vec<String>) {
        for id in ids {
            tracing::info!(
                session = %self.session_id, call = %id,
                "Gemini Live cancelled a tool call; its result will not be sent"
            );
            let _ = self.shared.cancellations.send(CallNotice::Withdrawn {
                session_id: self.session_id.clone(),
                provider_call_id: id.clone(),
            });
            self.cancelled.insert(id);
        }
    }

    /// Answers calls no step can deliver, so a blocking model is not left waiting.
    async fn answer_stray_calls(
        &mut self,
        calls: Vec<gemini::FunctionCall>,
        why: &str,
    ) -> Result<(), String> {
        let behavior = self.shared.behavior;
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        let responses: Vec<LiveFunctionResponse> = calls
            .into_iter()
            .filter_map(|call| {
                tracing::warn!(
                    session = %self.session_id, tool = %call.name, why,
                    "answering a Gemini Live tool call that no step can take with an error"
                );
                Some(LiveFunctionResponse {
                    id: call.id?,
                    name: call.name,
                    response: json!({ "error": STRAY_CALL_ERROR }),
                    scheduling: (behavior == ToolBehavior::NonBlocking).then_some("SILENT"),
                    will_continue: None,
                })
            })
            .collect();
        if responses.is_empty() {
            return Ok(());
        }
        // The generation that made the calls goes on (or resumes, when blocking): discard it.
        conn.discard = conn.discard.max(1);
        if behavior == ToolBehavior::Blocking {
            conn.stray_turn_complete = true;
        }
        send(conn, &tool_response(responses)).await
    }

    // -- connecting -----------------------------------------------------------------------------

    /// Matches the request's history against what the server session saw
    /// ([`SyncedHistory::reconcile`]); a session that diverged is started afresh.
    fn reconcile(&mut self, history: &[HistoryItem]) {
        match self.synced.reconcile(history) {
            Ok(()) => {
                // A step the runner did not record left the server's conversation shorter.
                if let Some(point) = &mut self.resume {
                    point.synced_len = point.synced_len.min(self.synced.len());
                }
            }
            Err(diverged) => self.reset(&diverged.to_string()),
        }
    }

    async fn ensure_connection(
        &mut self,
        setup: &SetupSpec,
        history: &[HistoryItem],
    ) -> Result<(), ModelError> {
        if let Some(conn) = &self.conn {
            if conn.going_away {
                tracing::debug!(
                    session = %self.session_id,
                    "replacing the Gemini Live socket after goAway"
                );
                self.close_connection();
            } else if conn.fingerprint != setup.fingerprint {
                tracing::info!(
                    session = %self.session_id,
                    "system prompt or tools changed; replacing the Gemini Live socket"
                );
                self.close_connection();
            }
        }
        if self.conn.is_some() && self.blocking_calls_need_fresh_session(history) {
            self.reset("a new message arrived while blocking tool calls were open");
        }
        if self.conn.is_some() {
            return Ok(());
        }
        let ttl = self.timeouts().resume_ttl;
        if let Some(point) = self.resume.clone().filter(|p| p.at.elapsed() < ttl) {
            match self.open(setup, Some(&point.handle), false).await {
                Ok(conn) => {
                    self.synced.truncate(point.synced_len);
                    self.conn = Some(conn);
                    return Ok(());
                }
                Err(ConnectError::Rejected(error)) => {
                    tracing::warn!(
                        session = %self.session_id, %error,
                        "Gemini Live refused the resumption handle; seeding a fresh session"
                    );
                }
                Err(ConnectError::Failed(error)) => return Err(error),
            }
        }
        self.synced.clear();
        self.resume = None;
        self.cancelled.clear();
        let seeding = !live_contents(split_tail(history).0).is_empty();
        let conn = self
            .open(setup, None, seeding)
            .await
            .map_err(ConnectError::into_inner)?;
        self.conn = Some(conn);
        Ok(())
    }

    /// With blocking tools, results for calls this socket issued followed by a new message
    /// cannot be answered cleanly on this socket (see the module docs).
    fn blocking_calls_need_fresh_session(&self, history: &[HistoryItem]) -> bool {
        let Some(conn) = &self.conn else {
            return false;
        };
        if self.shared.behavior != ToolBehavior::Blocking || conn.issued.is_empty() {
            return false;
        }
        let (_, trigger) = split_tail(self.synced.unsent(history));
        if !trigger
            .iter()
            .any(|item| matches!(item, HistoryItem::User { .. }))
        {
            return false;
        }
        let ids = live_ids(history);
        trigger.iter().any(|item| match item {
            HistoryItem::ToolResults { results } => results.iter().any(|result| {
                ids.get(result.call_id.as_str())
                    .is_some_and(|id| conn.issued.contains_key(id))
            }),
            _ => false,
        })
    }

    /// Opens a socket, sends `setup`, waits for `setupComplete`.
    async fn open(
        &self,
        setup: &SetupSpec,
        handle: Option<&str>,
        seeding: bool,
    ) -> Result<Connection, ConnectError> {
        let timeouts = self.timeouts();
        let serial = self.shared.serial.fetch_add(1, Ordering::Relaxed);
        let mut request = self
            .shared
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| {
                ConnectError::Failed(ModelError::Transport(format!("invalid Live URL: {e}")))
            })?;
        request
            .headers_mut()
            .insert("x-goog-api-key", self.shared.key.clone());
        let (mut ws, _) = match timeout(timeouts.connect, live_sync::connect(request)).await {
            Ok(Ok(connected)) => connected,
            Ok(Err(error)) => return Err(ConnectError::Failed(handshake_error(error))),
            Err(_) => {
                return Err(ConnectError::Failed(ModelError::Transport(format!(
                    "no WebSocket connection to Gemini Live within {} s",
                    timeouts.connect.as_secs_f32()
                ))));
            }
        };
        let message = setup.message(handle, seeding);
        let text = serde_json::to_string(&message).map_err(|e| {
            ConnectError::Failed(ModelError::Protocol(format!(
                "cannot encode the setup: {e}"
            )))
        })?;
        tracing::debug!(
            session = %self.session_id, socket = serial, resumed = handle.is_some(), seeding,
            "Gemini Live setup"
        );
        if let Err(e) = ws.send(Message::text(text)).await {
            return Err(ConnectError::Failed(ModelError::Transport(format!(
                "cannot send the Gemini Live setup: {e}"
            ))));
        }
        let deadline = Instant::now() + timeouts.setup;
        loop {
            let frame = match timeout_at(deadline, ws.next()).await {
                Ok(frame) => frame,
                Err(_) => {
                    let _ = timeout(Duration::from_millis(500), ws.close(None)).await;
                    return Err(ConnectError::Failed(ModelError::Transport(format!(
                        "Gemini Live did not complete the setup within {} s",
                        timeouts.setup.as_secs_f32()
                    ))));
                }
            };
            match classify(frame) {
                Incoming::Message(message) if message.setup_complete.is_some() => break,
                Incoming::Message(_) | Incoming::Ignore => {
                    tracing::debug!(
                        session = %self.session_id,
                        "ignoring a Gemini Live message before setupComplete"
                    );
                }
                Incoming::Broken(error) => return Err(ConnectError::Failed(error)),
                Incoming::Closed {
                    code: Some(code),
                    reason,
                } if !is_normal_close(code) => {
                    return Err(ConnectError::Rejected(close_error(code, &reason)));
                }
                Incoming::Closed { code, reason } => {
                    return Err(ConnectError::Rejected(ModelError::Transport(format!(
                        "Gemini Live closed the connection during setup ({}{reason})",
                        code.map(|c| format!("{c} ")).unwrap_or_default()
                    ))));
                }
            }
        }
        Ok(Connection {
            ws,
            serial,
            fingerprint: setup.fingerprint.clone(),
            going_away: false,
            seeding,
            issued: HashMap::new(),
            awaiting: HashSet::new(),
            discard: 0,
            stray_turn_complete: false,
        })
    }
}

/// Whether a `serverContent` belongs to the generation being read. It does not when it is the
/// bare end marker of a generation already closed (swallowed once), or part of a discarded
/// generation (counted down at its end).
fn triage(conn: &mut Connection, content: &ServerContent) -> bool {
    if conn.stray_turn_complete {
        if content.has_content() {
            conn.stray_turn_complete = false;
        } else if content.turn_complete {
            conn.stray_turn_complete = false;
            return false;
        }
    }
    if conn.discard > 0 {
        end_of_generation(conn, content);
        return false;
    }
    true
}

/// Counts down the discarded generations.
fn end_of_generation(conn: &mut Connection, content: &ServerContent) {
    if conn.discard == 0 {
        return;
    }
    if content.interrupted {
        conn.discard -= 1;
        // `interrupted` is usually followed by a bare `turnComplete` for the same generation.
        conn.stray_turn_complete = !content.turn_complete;
    } else if content.turn_complete {
        conn.discard -= 1;
    }
}

/// Sends history items the server session lacks as context: on a seeded socket
/// (`historyConfig`) this ends the initial history without calling the model; otherwise it
/// appends without asking for an answer.
async fn send_context(conn: &mut Connection, items: &[HistoryItem]) -> Result<(), String> {
    let turns = live_contents(items);
    if turns.is_empty() {
        return Ok(());
    }
    let turn_complete = conn.seeding;
    conn.seeding = false;
    send(
        conn,
        &json!({"clientContent": {"turns": turns, "turnComplete": turn_complete}}),
    )
    .await
}

async fn send(conn: &mut Connection, message: &Value) -> Result<(), String> {
    let text = message.to_string();
    conn.ws
        .send(Message::text(text))
        .await
        .map_err(|e| format!("cannot send to Gemini Live: {e}"))
}
