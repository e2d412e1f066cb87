//! The runner: the turn loop, and the registry of live sessions it runs turns in.
//!
//! A turn drives model step → tool calls → approval gate → execution → results back to the model
//! → … until the model answers without calling a tool. It runs as a task per turn that writes
//! protocol [`Chunk`]s into the turn's numbered [`TurnLog`]; transports read the log from a
//! position and frame the chunks for their wire. When nothing can happen until the person
//! answers, the task writes [`TurnEntry::Pause`] (an SSE response ends there) and sleeps until
//! person input, a deadline, or an interrupt wakes it. The same loop therefore serves one
//! WebSocket carrying the whole turn and a chain of HTTP requests each carrying one piece.
//!
//! The canonical chunk order of a turn (the AI SDK's, protocols.md §A.4):
//! `start` → per model step `start-step` … `tool-input-*` … `tool-approval-request`* →
//! `finish-step`, then outside any step the results of calls that waited
//! (`tool-output-available` / `-error` / `-denied`), then the next step … → `finish`.
//! An approval request is always the last thing before its step's `finish-step`, which is exactly
//! what the seed system's BIDI frontend needs to hand control back to the person (seed ADR 0011).

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt, StreamExt, future::BoxFuture, stream::FuturesUnordered};
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::{
    chunk_log::ChunkLog,
    clock::{Clock, IdGen, IdKind, Millis, until},
    followers::Followers,
    gate::{ApprovalResolution, CallPhase, InputError, PersonInput, StepCall},
    history::{AssistantPart, Attachment, HistoryItem, Outcome, ToolCall, ToolResult},
    model::{CallNotice, Model, ModelEvent, ModelRequest, Usage},
    schema::validate,
    session::{
        HeldText, LiveTurn, Parked, Receipt, Session, SessionRecord, SessionStore, StoreError,
        TurnEntry, TurnLog, TurnRecord, TurnStatus, lock,
    },
    store::{Actor, AuditEvent, AuditKind, StoredSession},
    tools::{Executor, ToolContext, ToolLocation, ToolRegistry},
};
use crate::protocol::{
    Chunk, FinishReason, MessageReducer, UiMessage, UiPart,
    chunk::{Abort, Finish},
    message::FilePart,
};

/// When text reaches the client (ADR 0004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextTiming {
    /// Text is delivered only in the final response of a turn: a response that ends waiting for
    /// the person carries no text (clients that treat text as "the answer is complete").
    #[default]
    Hold,
    /// Text streams as it is generated.
    Progressive,
}

/// Runtime-wide settings.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    pub system_prompt: String,
    pub text_timing: TextTiming,
    /// A turn stops after this many model steps (a model that keeps calling tools).
    pub max_steps: u32,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
            text_timing: TextTiming::Hold,
            max_steps: 16,
        }
    }
}

/// The instruction every model gets.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are Countersign's assistant. You can check the \
weather (get_weather), send payments from the person's wallet (process_payment), find where \
the person is (get_location) and switch the background music (change_bgm). Use the tools to do \
what is asked instead of describing what you would do. Payments and location need the \
person's approval: if they deny a call, do not retry it unless they ask; if an approval \
expires, say nothing was done. Answer in the language the person writes in, briefly.";

/// Why a turn could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TurnError {
    #[error("a turn is already running in this chat; stop it or wait for it to finish")]
    Busy,
    #[error("the message is empty")]
    EmptyMessage,
    #[error(transparent)]
    Store(#[from] StoreErrorText),
}

/// A store error as text (so `TurnError` stays `Clone + PartialEq`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct StoreErrorText(pub String);

impl From<StoreError> for TurnError {
    fn from(e: StoreError) -> Self {
        TurnError::Store(StoreErrorText(e.to_string()))
    }
}

/// What the person said to start a turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserTurn {
    /// The client's id for the user message, if it has one.
    pub message_id: Option<String>,
    pub text: String,
    pub attachments: Vec<Attachment>,
    /// The transport the turn came in on (`sse`, `bidi`), for the chunk log.
    pub transport: &'static str,
}

/// A started turn: read `log` from position 0.
#[derive(Debug, Clone)]
pub struct TurnStarted {
    pub turn_id: String,
    pub message_id: String,
    pub log: Arc<TurnLog>,
}

/// The agent runtime: model, tools, clock, ids, store and the live sessions.
pub struct Runtime {
    pub model: Arc<dyn Model>,
    pub tools: ToolRegistry,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGen>,
    pub store: Arc<dyn SessionStore>,
    pub settings: RuntimeSettings,
    /// Where every emitted chunk is recorded (`COUNTERSIGN_CHUNK_LOG`), if anywhere.
    chunk_log: std::sync::OnceLock<Arc<ChunkLog>>,
    /// The model of BIDI turns when it differs from `model` (Gemini Live).
    live_model: std::sync::OnceLock<Arc<dyn Model>>,
    live: Mutex<HashMap<String, Arc<Session>>>,
    /// When parked turns must wake up to expire what they wait for.
    deadlines: Arc<Deadlines>,
    /// Who follows each chat's turns as they happen (a BIDI socket).
    pub followers: Followers,
    /// Logs of parked turns that left memory while someone still held the log (a reader that
    /// did not stop at the pause): the turn takes the same log back when it returns, so such a
    /// reader sees what follows. Usually empty (a socket lets go at the pause).
    held_logs: Mutex<HashMap<String, std::sync::Weak<TurnLog>>>,
    /// How many held logs were alive at the last clean-up of `held_logs`.
    held_logs_kept: AtomicUsize,
    /// Sessions that left memory so far (the server gives freed memory back after a wave).
    released: AtomicU64,
    /// Parked sessions that could not leave memory when their task parked them because a
    /// request still held them: tried again shortly (ADR 0011).
    release_later: Arc<ReleaseLater>,
}

/// See [`Runtime::release_parked`].
#[derive(Default)]
struct ReleaseLater {
    chats: Mutex<BTreeSet<String>>,
    added: Notify,
    task: OnceLock<()>,
}

/// `held_logs` is not cleaned below this size.
const HELD_LOGS_CLEANUP: usize = 64;

/// How long a parked session that something still held waits before it is tried again.
const RELEASE_RETRY: Duration = Duration::from_millis(200);

/// The deadlines of parked turns (ADR 0010): one timer task for the runtime instead of a
/// sleeping task per turn waiting for a person. By chat id: a parked session may have left
/// memory (ADR 0011), and the timer brings it back.
#[derive(Default)]
struct Deadlines {
    /// (deadline, chat) for every parked turn that must wake then.
    queue: Mutex<BTreeSet<(Millis, String)>>,
    /// An earlier deadline was added: the timer sleeps too long.
    earlier: Notify,
    timer: OnceLock<()>,
}

impl Runtime {
    pub fn new(
        model: Arc<dyn Model>,
        tools: ToolRegistry,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGen>,
        store: Arc<dyn SessionStore>,
        settings: RuntimeSettings,
    ) -> Arc<Self> {
        Arc::new(Runtime {
            model,
            tools,
            clock,
            ids,
            store,
            settings,
            chunk_log: std::sync::OnceLock::new(),
            live_model: std::sync::OnceLock::new(),
            live: Mutex::new(HashMap::new()),
            deadlines: Arc::default(),
            followers: Followers::default(),
            held_logs: Mutex::new(HashMap::new()),
            held_logs_kept: AtomicUsize::new(0),
            released: AtomicU64::new(0),
            release_later: Arc::default(),
        })
    }

    /// Records every chunk of every session in `log` from now on (set once, at start-up).
    pub fn set_chunk_log(&self, log: Arc<ChunkLog>) {
        let _ = self.chunk_log.set(log);
    }

    /// Makes BIDI turns use `model` (set once, at start-up).
    pub fn set_live_model(&self, model: Arc<dyn Model>) {
        let _ = self.live_model.set(model);
    }

    /// The model that answers turns started on `transport` (`bidi` may have its own).
    pub fn model_for(&self, transport: &str) -> &Arc<dyn Model> {
        match self.live_model.get() {
            Some(live) if transport == "bidi" => live,
            _ => &self.model,
        }
    }

    /// The model(s) in use, as the banner and the UI name them.
    pub fn models_label(&self) -> String {
        match self.live_model.get() {
            Some(live) => format!("{} · BIDI: {}", self.model.label(), live.label()),
            None => self.model.label(),
        }
    }

    /// The chunk log, if one is configured.
    pub fn chunk_log(&self) -> Option<&Arc<ChunkLog>> {
        self.chunk_log.get()
    }

    /// The live session of `chat_id`, loaded from the store or created.
    /// A turn the store kept unfinished (a restart) is resumed here; a turn that waited for the
    /// person comes back parked, with its log (ADR 0011).
    pub async fn session(self: &Arc<Self>, chat_id: &str) -> Result<Arc<Session>, StoreError> {
        if let Some(session) = self.live_session(chat_id) {
            return Ok(session);
        }
        let stored = match self.store.load(chat_id).await? {
            Some(stored) => stored,
            None => StoredSession {
                record: SessionRecord::new(chat_id, self.clock.now_ms()),
                paused_log: None,
            },
        };
        Ok(self.make_live(stored))
    }

    /// The live session of `chat_id` if it exists (never creates one).
    pub async fn existing_session(
        self: &Arc<Self>,
        chat_id: &str,
    ) -> Result<Option<Arc<Session>>, StoreError> {
        if let Some(session) = self.live_session(chat_id) {
            return Ok(Some(session));
        }
        Ok(self
            .store
            .load(chat_id)
            .await?
            .map(|stored| self.make_live(stored)))
    }

    /// The session of `chat_id` if it is in memory (never loads one).
    pub fn live_session(&self, chat_id: &str) -> Option<Arc<Session>> {
        lock(&self.live).get(chat_id).cloned()
    }

    /// Makes a loaded session live — unless another request made it live meanwhile: that one
    /// is kept.
    fn make_live(self: &Arc<Self>, stored: StoredSession) -> Arc<Session> {
        let StoredSession { record, paused_log } = stored;
        let (session, fresh) = {
            let mut live = lock(&self.live);
            match live.get(&record.id) {
                Some(session) => (session.clone(), false),
                None => {
                    let session = Arc::new(Session::new(record));
                    live.insert(session.id.clone(), session.clone());
                    (session, true)
                }
            }
        };
        if fresh {
            self.revive(&session, paused_log);
        }
        session
    }

    /// Starts a turn for a new user message. A turn that is waiting for the person is
    /// superseded (its open calls end as interrupted, so the history stays valid); a turn that is
    /// generating makes this fail with [`TurnError::Busy`].
    pub async fn start_turn(
        self: &Arc<Self>,
        chat_id: &str,
        user: UserTurn,
        timing: Option<TextTiming>,
    ) -> Result<TurnStarted, TurnError> {
        if user.text.trim().is_empty() && user.attachments.is_empty() {
            return Err(TurnError::EmptyMessage);
        }
        let session = self.session(chat_id).await?;
        loop {
            let superseded = {
                // Lock order everywhere: record, then live.
                let mut record = lock(&session.record);
                let mut live = lock(&session.live);
                match live.as_mut() {
                    Some(turn) if !turn.log.is_ended() => {
                        let status = record.turn.as_ref().map(|t| t.status);
                        if status != Some(TurnStatus::AwaitingPerson) {
                            return Err(TurnError::Busy);
                        }
                        *lock(&turn.interrupt_reason) = Some("superseded by a new message".into());
                        turn.cancel.cancel();
                        // A parked turn needs a task to end itself.
                        self.unpark_locked(&session, &record, turn);
                        turn.task.take()
                    }
                    _ => {
                        let started =
                            self.begin_turn(&session, &mut record, &mut live, user, timing);
                        return Ok(started);
                    }
                }
            };
            if let Some(task) = superseded {
                let _ = task.await;
            } else {
                tokio::task::yield_now().await;
            }
        }
    }

    /// Creates the turn record and spawns its task (the caller holds both locks).
    fn begin_turn(
        self: &Arc<Self>,
        session: &Arc<Session>,
        record: &mut SessionRecord,
        live: &mut Option<LiveTurn>,
        user: UserTurn,
        timing: Option<TextTiming>,
    ) -> TurnStarted {
        let now = self.clock.now_ms();
        let turn_id = self.ids.next_id(IdKind::Turn);
        let message_id = self.ids.next_id(IdKind::Message);
        let transport = if user.transport.is_empty() {
            "api"
        } else {
            user.transport
        };
        {
            let user_id = user
                .message_id
                .clone()
                .unwrap_or_else(|| self.ids.next_id(IdKind::Message));
            let mut message = UiMessage::user_text(user_id, user.text.clone());
            for a in &user.attachments {
                message.parts.push(UiPart::File(FilePart {
                    media_type: a.media_type.clone(),
                    url: a.url.clone(),
                    filename: a.filename.clone(),
                    provider_metadata: None,
                }));
            }
            record.messages.push(message);
            record.history.push(HistoryItem::User {
                text: user.text,
                attachments: user.attachments,
            });
            record.turn = Some(TurnRecord {
                id: turn_id.clone(),
                message_id: message_id.clone(),
                status: TurnStatus::Running,
                steps: 0,
                calls: Vec::new(),
                held_text: Vec::new(),
                usage: Usage::default(),
                inputs: 0,
                transport: transport.to_owned(),
                timing,
            });
            record.updated_at_ms = now;
        }
        let reducer = MessageReducer::new(message_id.clone());
        let started = self.spawn_driver(
            session, live, turn_id, message_id, reducer, timing, transport,
        );
        self.followers.notify(&session.id);
        started
    }

    /// Spawns the task that drives a turn (new or resumed) and makes it the session's live turn.
    #[allow(clippy::too_many_arguments)]
    fn spawn_driver(
        self: &Arc<Self>,
        session: &Arc<Session>,
        live: &mut Option<LiveTurn>,
        turn_id: String,
        message_id: String,
        reducer: MessageReducer,
        timing: Option<TextTiming>,
        transport: &'static str,
    ) -> TurnStarted {
        let mut turn = LiveTurn {
            log: Arc::new(TurnLog::default()),
            cancel: CancellationToken::new(),
            interrupt_reason: Arc::new(Mutex::new(None)),
            task: None,
            parked: None,
            saved: 0,
        };
        let driver = self.driver(
            session,
            &turn,
            &turn_id,
            &message_id,
            reducer,
            timing,
            transport,
        );
        turn.task = Some(driver.spawn(Entry::Start));
        let log = turn.log.clone();
        *live = Some(turn);
        TurnStarted {
            turn_id,
            message_id,
            log,
        }
    }

    /// A driver for `turn`, writing its log.
    #[allow(clippy::too_many_arguments)]
    fn driver(
        self: &Arc<Self>,
        session: &Arc<Session>,
        turn: &LiveTurn,
        turn_id: &str,
        message_id: &str,
        reducer: MessageReducer,
        timing: Option<TextTiming>,
        transport: &'static str,
    ) -> TurnDriver {
        TurnDriver {
            rt: self.clone(),
            session: session.clone(),
            log: turn.log.clone(),
            cancel: turn.cancel.clone(),
            interrupt_reason: turn.interrupt_reason.clone(),
            timing: timing.unwrap_or(self.settings.text_timing),
            reducer,
            message_id: message_id.to_owned(),
            transport,
            turn_id: turn_id.to_owned(),
            audit: Vec::new(),
            notices: self.model_for(transport).call_notices(),
        }
    }

    /// Gives a parked turn a task again, continuing its log where it paused (the caller holds
    /// both locks of `session`, the record's first). Nothing happens if the turn is not parked.
    fn unpark_locked(
        self: &Arc<Self>,
        session: &Arc<Session>,
        record: &SessionRecord,
        turn: &mut LiveTurn,
    ) {
        let Some(parked) = turn.parked else {
            return;
        };
        let Some(current) = record.turn.as_ref() else {
            tracing::error!(session = %session.id, "a parked turn has no record");
            return;
        };
        turn.parked = None;
        // The record's copy of the message is exactly what the reducer had: the turn synced it
        // when it paused, and every text or reasoning block was closed.
        let reducer = match record
            .messages
            .iter()
            .rev()
            .find(|m| m.id == current.message_id)
        {
            Some(message) => MessageReducer::continuing(message.clone()),
            None => MessageReducer::new(current.message_id.clone()),
        };
        let driver = self.driver(
            session,
            turn,
            &current.id,
            &current.message_id,
            reducer,
            current.timing,
            static_transport(&current.transport),
        );
        turn.task = Some(driver.spawn(Entry::Unpark(parked)));
    }

    /// [`Runtime::unpark_locked`], taking the locks.
    fn unpark(self: &Arc<Self>, session: &Arc<Session>) {
        let record = lock(&session.record);
        let mut live = lock(&session.live);
        if let Some(turn) = live.as_mut() {
            self.unpark_locked(session, &record, turn);
        }
    }

    /// Tells `session`'s turn that person input was applied: a parked turn gets a task again,
    /// a waiting one is woken.
    fn wake(self: &Arc<Self>, session: &Arc<Session>) {
        {
            let record = lock(&session.record);
            let mut live = lock(&session.live);
            if let Some(turn) = live.as_mut().filter(|t| t.parked.is_some()) {
                self.unpark_locked(session, &record, turn);
                return;
            }
        }
        session.wake();
    }

    /// Wakes `chat`'s parked turn at `deadline` (once; a turn that is not parked then is left
    /// alone).
    fn wake_at(self: &Arc<Self>, deadline: Millis, chat: &str) {
        let deadlines = &self.deadlines;
        let earliest = {
            let mut queue = lock(&deadlines.queue);
            let key = (deadline, chat.to_owned());
            let earliest = queue.first().is_none_or(|first| key < *first);
            queue.insert(key);
            earliest
        };
        deadlines.timer.get_or_init(|| self.spawn_deadline_timer());
        if earliest {
            deadlines.earlier.notify_one();
        }
    }

    /// The task behind [`Runtime::wake_at`]: sleeps until the earliest deadline (or until an
    /// earlier one is added), then unparks every turn whose deadline came, bringing its session
    /// back into memory if it had left.
    fn spawn_deadline_timer(self: &Arc<Self>) {
        let runtime = Arc::downgrade(self);
        let deadlines = self.deadlines.clone();
        let clock = self.clock.clone();
        tokio::spawn(async move {
            loop {
                let now = clock.now_ms();
                let (due, next) = {
                    let mut queue = lock(&deadlines.queue);
                    let later = queue.split_off(&(now + 1, String::new()));
                    let due = std::mem::replace(&mut *queue, later);
                    (due, queue.first().map(|(at, _)| *at))
                };
                if !due.is_empty() {
                    let Some(runtime) = runtime.upgrade() else {
                        return;
                    };
                    for (_, chat) in due {
                        if let Some(session) = runtime.live_session(&chat) {
                            runtime.unpark(&session);
                            continue;
                        }
                        // Only a session that left memory needs a task: its load awaits the store.
                        let runtime = runtime.clone();
                        tokio::spawn(async move {
                            match runtime.existing_session(&chat).await {
                                Ok(Some(session)) => runtime.unpark(&session),
                                Ok(None) => {}
                                Err(e) => {
                                    tracing::error!(session = %chat, error = %e, "cannot load a session whose deadline came");
                                }
                            }
                        });
                    }
                }
                match next {
                    Some(at) => {
                        tokio::select! {
                            () = tokio::time::sleep(until(clock.now_ms(), at)) => {}
                            () = deadlines.earlier.notified() => {}
                        }
                    }
                    None => deadlines.earlier.notified().await,
                }
            }
        });
    }

    /// Picks up a turn that was running or waiting for the person when the server stopped: its
    /// record came back from the store but no task drives it. Calls that were running start
    /// again (server tools are idempotent by tool call id: a payment is never made twice);
    /// approvals keep their deadlines (wall-clock), so one that ran out meanwhile expires now.
    ///
    /// A turn that waited for the person and whose log the store kept (`paused_log`) comes back
    /// parked, its log exactly as clients saw it (ADR 0011); it gets a task at once only if it
    /// has something to do (an answer applied before a restart, a deadline that passed).
    fn revive(self: &Arc<Self>, session: &Arc<Session>, paused_log: Option<Vec<TurnEntry>>) {
        // Lock order everywhere: record, then live.
        let mut record = lock(&session.record);
        let mut live = lock(&session.live);
        if live.is_some() {
            return;
        }
        if let Some(turn) = record.turn.as_mut().filter(|t| !t.status.is_over()) {
            // A call that was running when the server stopped runs again (idempotent tools).
            for call in &mut turn.calls {
                if let CallPhase::Running { args, edited } = &call.phase {
                    call.phase = CallPhase::Ready {
                        args: args.clone(),
                        edited: *edited,
                    };
                }
            }
        }
        if let Some(entries) = paused_log
            && let Some(turn) = record
                .turn
                .as_ref()
                .filter(|t| t.status == TurnStatus::AwaitingPerson)
        {
            let now = self.clock.now_ms();
            let deadline = next_deadline(&turn.calls);
            let due = deadline.is_some_and(|d| d <= now)
                || turn
                    .calls
                    .iter()
                    .any(|c| matches!(c.phase, CallPhase::Ready { .. }));
            // The very log a reader may still hold, or the stored one.
            let held = lock(&self.held_logs)
                .remove(&session.id)
                .and_then(|log| log.upgrade())
                .filter(|log| log.len() == entries.len());
            let turn_state = live.insert(LiveTurn {
                saved: entries.len(),
                log: held.unwrap_or_else(|| Arc::new(TurnLog::restored(entries))),
                cancel: CancellationToken::new(),
                interrupt_reason: Arc::new(Mutex::new(None)),
                task: None,
                parked: Some(Parked {
                    inputs: turn.inputs,
                }),
            });
            if due {
                self.unpark_locked(session, &record, turn_state);
            } else {
                if let Some(deadline) = deadline {
                    self.wake_at(deadline, &session.id);
                }
                // Loaded to be looked at or answered: if nothing wakes it, it goes again.
                self.release_soon(&session.id);
            }
            return;
        }
        let (turn_id, message_id, timing, transport, existing) = {
            let SessionRecord { turn, messages, .. } = &*record;
            let Some(turn) = turn.as_ref().filter(|t| !t.status.is_over()) else {
                return;
            };
            let existing = messages
                .iter()
                .rev()
                .find(|m| m.id == turn.message_id)
                .cloned();
            (
                turn.id.clone(),
                turn.message_id.clone(),
                turn.timing,
                static_transport(&turn.transport),
                existing,
            )
        };
        drop(record);
        tracing::info!(session = %session.id, turn = %turn_id, "resuming a turn after a restart");
        let reducer = match existing {
            Some(message) => MessageReducer::continuing(message),
            None => MessageReducer::new(message_id.clone()),
        };
        self.spawn_driver(
            session, &mut live, turn_id, message_id, reducer, timing, transport,
        );
    }

    /// Resumes every turn the store says was not over (at start-up). Returns how many.
    pub async fn resume_unfinished(self: &Arc<Self>) -> Result<usize, StoreError> {
        let ids = self.store.unfinished().await?;
        for id in &ids {
            drop(self.session(id).await?);
            // A turn that came back parked waits in the store, not in memory.
            self.release_parked(id);
        }
        Ok(ids.len())
    }

    /// Applies the person's answers to `chat_id`'s waiting turn. An approval id that belongs to
    /// another chat is reported as such. Nothing an answer causes reaches any client before the
    /// answer and its audit entries are on disk: they are committed before the turn is woken
    /// (when the store fails, the answers are undone and the error says so), or, for approvals
    /// of tools whose effects stay in the record (`ToolEffects::InRecord`, a payment), by the
    /// turn in the same transaction as the result, before the output is emitted.
    pub async fn submit_as(
        self: &Arc<Self>,
        chat_id: &str,
        inputs: &[PersonInput],
        actor: &Actor,
    ) -> Result<Receipt, InputError> {
        let session = match self.existing_session(chat_id).await {
            Ok(Some(session)) => session,
            Ok(None) | Err(_) => {
                return Err(self
                    .explain_foreign(chat_id, inputs, InputError::NoActiveTurn)
                    .await);
            }
        };
        let now = self.clock.now_ms();
        let applied = match session.apply(inputs, &self.tools, now) {
            Ok(applied) => applied,
            Err(e) => return Err(self.explain_foreign(chat_id, inputs, e).await),
        };
        let events = answer_events(&session, inputs, &applied.resolutions, actor, now);
        if applied.resolutions.len() == inputs.len()
            && session.runs_in_record(&applied.resolutions, &self.tools)
        {
            // Approvals of calls whose effects are in this record: the turn runs them at once
            // and commits answer, effect and result together before it emits anything.
            lock(&session.unsaved_audit).extend(events);
            self.wake(&session);
            return Ok(applied.receipt);
        }
        // Earlier answers still waiting for their turn's commit go with this one: the record
        // written here contains them.
        let earlier = std::mem::take(&mut *lock(&session.unsaved_audit));
        let count = earlier.len();
        let events = [earlier, events].concat();
        let snapshot = session.snapshot();
        if let Err(e) = self.store.commit(&snapshot, &events).await {
            tracing::error!(session = %chat_id, error = %e, "cannot record the person's answer");
            lock(&session.unsaved_audit).splice(0..0, events.into_iter().take(count));
            session.undo(applied.undo);
            return Err(InputError::NotRecorded {
                message: e.to_string(),
            });
        }
        self.wake(&session);
        Ok(applied.receipt)
    }

    /// [`Runtime::submit_as`] for a caller the audit log knows only as the API.
    pub async fn submit(
        self: &Arc<Self>,
        chat_id: &str,
        inputs: &[PersonInput],
    ) -> Result<Receipt, InputError> {
        let actor = Actor {
            transport: "api".into(),
            ..Actor::default()
        };
        self.submit_as(chat_id, inputs, &actor).await
    }

    /// Turns "unknown approval" into "approval of another chat" when another live chat has it.
    async fn explain_foreign(
        &self,
        chat_id: &str,
        inputs: &[PersonInput],
        error: InputError,
    ) -> InputError {
        let approval_id = match &error {
            InputError::UnknownApproval { approval_id } => approval_id.clone(),
            InputError::NoActiveTurn => match inputs.iter().find_map(|i| match i {
                PersonInput::Approval { approval_id, .. } => Some(approval_id.clone()),
                _ => None,
            }) {
                Some(id) => id,
                None => return error,
            },
            _ => return error,
        };
        // The chat waiting for it may be in memory or only in the store (a parked turn).
        let in_memory = lock(&self.live)
            .iter()
            .any(|(id, s)| id != chat_id && s.has_pending_approval(&approval_id));
        let foreign = in_memory
            || match self.store.approval_owner(&approval_id).await {
                Ok(owner) => owner.is_some_and(|owner| owner != chat_id),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot look up whose approval this is");
                    false
                }
            };
        if foreign {
            InputError::ApprovalOfOtherChat { approval_id }
        } else {
            error
        }
    }

    /// Lets idle sessions leave memory (the store has them; the next request loads them
    /// again). A session goes when it was idle — no turn running or waiting, nobody holding
    /// it, nothing uncommitted — at this sweep and at the previous one, with the same last
    /// turn: so a finished turn stays replayable (SSE resume, a BIDI reconnect) for at least
    /// one sweep interval. `marked` carries the candidates from one sweep to the next.
    /// Returns how many sessions left.
    pub fn evict_idle(&self, marked: &mut HashMap<String, usize>) -> usize {
        let mut live = lock(&self.live);
        let mut next = HashMap::new();
        let before = live.len();
        live.retain(|id, session| {
            // Every holder clones under this lock, so a count of one cannot grow meanwhile.
            if Arc::strong_count(session) != 1 {
                return true;
            }
            // A parked turn whose log is stored comes back exactly: no need to wait a sweep.
            if session.parked_and_stored() {
                self.let_go(session);
                return false;
            }
            let Some(turn) = session.idle_turn() else {
                return true;
            };
            if marked.get(id) == Some(&turn) {
                return false;
            }
            next.insert(id.clone(), turn);
            true
        });
        *marked = next;
        self.prune_held_logs(&mut lock(&self.held_logs));
        before - live.len()
    }

    /// Lets `chat_id`'s session leave memory if its turn is parked with its whole log stored and
    /// nobody holds the session (ADR 0011). Called when a turn's task parks it.
    /// A request that still holds the session (it answered, or looked) makes it wait: it is
    /// tried again a moment later.
    fn release_parked(self: &Arc<Self>, chat_id: &str) {
        let mut live = lock(&self.live);
        let Some(session) = live.get(chat_id).filter(|s| s.parked_and_stored()) else {
            return;
        };
        // Every holder clones under this lock, so a count of one cannot grow meanwhile.
        if Arc::strong_count(session) == 1 {
            if let Some(session) = live.remove(chat_id) {
                self.let_go(&session);
            }
            return;
        }
        drop(live);
        self.release_soon(chat_id);
    }

    /// Tries [`Runtime::release_parked`] for `chat_id` again in a moment: it is held by a
    /// request now, or was just loaded by one (to look at it, to resume a socket).
    fn release_soon(self: &Arc<Self>, chat_id: &str) {
        let later = &self.release_later;
        lock(&later.chats).insert(chat_id.to_owned());
        later.task.get_or_init(|| {
            let runtime = Arc::downgrade(self);
            let later = later.clone();
            tokio::spawn(async move {
                loop {
                    if lock(&later.chats).is_empty() {
                        later.added.notified().await;
                    }
                    tokio::time::sleep(RELEASE_RETRY).await;
                    let Some(runtime) = runtime.upgrade() else {
                        return;
                    };
                    let chats = std::mem::take(&mut *lock(&later.chats));
                    for chat in chats {
                        runtime.release_parked(&chat);
                    }
                }
            });
        });
        later.added.notify_one();
    }

    /// A session removed from `live` leaves memory: its log stays reachable while a reader
    /// holds it, and the release is counted.
    fn let_go(&self, session: &Session) {
        self.hold_log(session);
        self.released.fetch_add(1, Ordering::Relaxed);
    }

    /// Remembers the log of a session leaving memory if a reader still holds it. (A socket
    /// usually lets go a moment later, at the pause: entries whose log is gone are dropped at
    /// every sweep, and whenever the map has doubled since it was last cleaned.)
    fn hold_log(&self, session: &Session) {
        let Some(log) = session.current_log() else {
            return;
        };
        if Arc::strong_count(&log) <= 2 {
            return;
        }
        let mut held = lock(&self.held_logs);
        if held.len() >= HELD_LOGS_CLEANUP.max(2 * self.held_logs_kept.load(Ordering::Relaxed)) {
            self.prune_held_logs(&mut held);
        }
        held.insert(session.id.clone(), Arc::downgrade(&log));
    }

    /// Drops the held logs no reader holds any more.
    fn prune_held_logs(&self, held: &mut HashMap<String, std::sync::Weak<TurnLog>>) {
        held.retain(|_, log| log.strong_count() > 0);
        self.held_logs_kept.store(held.len(), Ordering::Relaxed);
    }

    /// Runs [`Runtime::evict_idle`] every `every` for as long as the runtime exists.
    pub fn spawn_sweeper(self: &Arc<Self>, every: Duration) {
        let runtime = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut marked = HashMap::new();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                let evicted = runtime.evict_idle(&mut marked);
                if evicted > 0 {
                    tracing::debug!(evicted, "idle sessions left memory");
                }
            }
        });
    }

    /// How many sessions are in memory.
    pub fn live_sessions(&self) -> usize {
        lock(&self.live).len()
    }

    /// How many times a session left memory since the runtime started.
    pub fn released_sessions(&self) -> u64 {
        self.released.load(Ordering::Relaxed)
    }

    /// Interrupts `chat_id`'s turn. False when nothing was running or waiting.
    pub async fn interrupt(self: &Arc<Self>, chat_id: &str, reason: &str) -> bool {
        // A turn waiting for the person may be parked in the store only (ADR 0011).
        let session = match self.existing_session(chat_id).await {
            Ok(Some(session)) => session,
            Ok(None) => return false,
            Err(e) => {
                tracing::error!(session = %chat_id, error = %e, "cannot load the chat to interrupt");
                return false;
            }
        };
        let interrupted = session.interrupt(reason);
        if interrupted {
            // A parked turn needs a task to end itself.
            self.unpark(&session);
        }
        interrupted
    }

    /// Ids of the stored chats, most recent first.
    pub async fn list_sessions(&self) -> Result<Vec<String>, StoreError> {
        self.store.list().await
    }

    fn model_request(&self, session_id: &str, history: Vec<HistoryItem>) -> ModelRequest {
        ModelRequest {
            session_id: session_id.to_owned(),
            system: self.settings.system_prompt.clone(),
            history,
            tools: self.tools.declarations(),
        }
    }
}

/// How a phase of the loop ended.
enum Flow {
    Continue,
    Interrupted,
    /// The turn waits for the person and has no task any more (ADR 0010).
    Parked,
}

/// Where a driver enters its turn.
#[derive(Debug, Clone, Copy)]
enum Entry {
    /// A new turn, or one picked up after a restart: a new log that begins with `start`.
    Start,
    /// A parked turn: its log goes on where it paused.
    Unpark(Parked),
}

/// The running turn: owns the reducer that mirrors what the client sees.
struct TurnDriver {
    rt: Arc<Runtime>,
    session: Arc<Session>,
    log: Arc<TurnLog>,
    cancel: CancellationToken,
    interrupt_reason: Arc<Mutex<Option<String>>>,
    timing: TextTiming,
    reducer: MessageReducer,
    message_id: String,
    /// `sse` / `bidi`: recorded in the chunk log.
    transport: &'static str,
    turn_id: String,
    /// Audit events not yet committed (they go with the next save).
    audit: Vec<AuditEvent>,
    /// Notices from the model about calls of earlier steps (Gemini Live withdraws calls).
    notices: Option<broadcast::Receiver<CallNotice>>,
}

/// The open text or reasoning block of a model step.
struct Block {
    id: String,
    text: String,
    /// Provider data attached to the block (e.g. a signed thought); kept in the history.
    provider_data: Option<Value>,
}

/// What a model step produced.
#[derive(Default)]
struct StepOutput {
    parts: Vec<AssistantPart>,
    calls: Vec<StepCall>,
    /// Text chunks not yet emitted (hold mode).
    text: Option<Block>,
    reasoning: Option<Block>,
    finish: Option<FinishReason>,
}

impl TurnDriver {
    /// Runs the turn on a task of its own. When the task parks the turn, its session may leave
    /// memory as soon as the task is gone (ADR 0011).
    fn spawn(self, entry: Entry) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let runtime = self.rt.clone();
            let chat = self.session.id.clone();
            if self.run(entry).await {
                runtime.release_parked(&chat);
            }
        })
    }

    /// Drives the turn until it ends (false) or parks (true).
    async fn run(mut self, entry: Entry) -> bool {
        let mut paused_at = match entry {
            Entry::Start => {
                self.emit(Chunk::start(self.message_id.clone()));
                None
            }
            Entry::Unpark(parked) => Some(parked.inputs),
        };
        loop {
            // Phase A: the calls of the previous step, until every one has its result.
            match self.resolve_calls(paused_at.take()).await {
                Flow::Continue => {}
                Flow::Interrupted => {
                    self.finish_interrupted(None).await;
                    return false;
                }
                Flow::Parked => return true,
            }
            self.commit_results();

            let steps = self.with_turn(|t| t.steps).unwrap_or(0);
            if steps >= self.rt.settings.max_steps {
                let limit = self.rt.settings.max_steps;
                self.fail(format!(
                    "The model kept calling tools; the turn stopped after {limit} steps."
                ))
                .await;
                return false;
            }

            // Phase B: one model step.
            self.set_status(TurnStatus::Running);
            self.emit(Chunk::start_step());
            let (session_id, history) = {
                let record = lock(&self.session.record);
                (record.id.clone(), record.history.clone())
            };
            let mut stream = self
                .rt
                .model_for(self.transport)
                .stream(self.rt.model_request(&session_id, history));
            let mut step = StepOutput::default();
            let mut failure = None;
            loop {
                let event = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => None,
                    event = stream.next() => Some(event),
                };
                match event {
                    None => {
                        drop(stream);
                        self.finish_interrupted(Some(step)).await;
                        return false;
                    }
                    Some(None) => break,
                    Some(Some(Ok(event))) => {
                        if self.on_model_event(&mut step, event) {
                            break;
                        }
                    }
                    Some(Some(Err(e))) => {
                        failure = Some(e.to_string());
                        break;
                    }
                }
            }
            drop(stream);
            self.close_blocks(&mut step);
            self.with_turn(|t| t.steps += 1);

            if let Some(message) = failure {
                self.record_step(&mut step);
                self.fail_calls(&mut step, &message);
                self.flush_held_text();
                self.emit(Chunk::finish_step());
                self.fail(message).await;
                return false;
            }

            if step.calls.is_empty() {
                self.record_step(&mut step);
                self.flush_held_text();
                self.emit(Chunk::finish_step());
                let reason = step.finish.unwrap_or(FinishReason::Stop);
                self.finish(reason, TurnStatus::Finished).await;
                return false;
            }

            // The step called tools. In hold mode its text stays in `held_text` until the final
            // response (end_text put it there); in progressive mode it was already streamed.
            self.record_step(&mut step);
            self.gate_calls(&mut step);
            self.emit(Chunk::finish_step());
            let calls = std::mem::take(&mut step.calls);
            self.with_turn(|t| t.calls = calls);
            self.sync_messages();
        }
    }

    /// Handles one model event. Returns true when the step is over.
    fn on_model_event(&mut self, step: &mut StepOutput, event: ModelEvent) -> bool {
        match event {
            ModelEvent::TextDelta(delta) => {
                if delta.is_empty() {
                    return false;
                }
                if let Some(block) = step.reasoning.take() {
                    self.end_reasoning(step, block);
                }
                let progressive = self.timing == TextTiming::Progressive;
                let block = step.text.get_or_insert_with(|| {
                    let id = self.rt.ids.next_id(IdKind::Text);
                    Block {
                        id,
                        text: String::new(),
                        provider_data: None,
                    }
                });
                if progressive && block.text.is_empty() {
                    let id = block.id.clone();
                    self.emit(Chunk::text_start(id));
                }
                block.text.push_str(&delta);
                if progressive {
                    let id = step.text.as_ref().map(|b| b.id.clone()).unwrap_or_default();
                    self.emit(Chunk::text_delta(id, delta));
                }
            }
            ModelEvent::TextData(data) => {
                // The open text block's, or else the step's last text part's; a signature that
                // comes before any text (Gemini 3 may sign an empty last part) gets a part of
                // its own, so it still goes back.
                if let Some(block) = step.text.as_mut() {
                    block.provider_data = Some(data);
                } else if let Some(AssistantPart::Text { provider_data, .. }) = step
                    .parts
                    .iter_mut()
                    .rev()
                    .find(|p| matches!(p, AssistantPart::Text { .. }))
                {
                    *provider_data = Some(data);
                } else {
                    step.parts.push(AssistantPart::Text {
                        text: String::new(),
                        provider_data: Some(data),
                    });
                }
            }
            ModelEvent::ReasoningDelta {
                text,
                provider_data,
            } => {
                if text.is_empty() {
                    return false;
                }
                if let Some(block) = step.text.take() {
                    self.end_text(step, block);
                }
                if step.reasoning.is_none() {
                    let id = self.rt.ids.next_id(IdKind::Reasoning);
                    self.emit(Chunk::reasoning_start(id.clone()));
                    step.reasoning = Some(Block {
                        id,
                        text: String::new(),
                        provider_data: None,
                    });
                }
                if let Some(block) = step.reasoning.as_mut() {
                    block.text.push_str(&text);
                    if provider_data.is_some() {
                        block.provider_data = provider_data;
                    }
                    let id = block.id.clone();
                    self.emit(Chunk::reasoning_delta(id, text));
                }
            }
            ModelEvent::ToolCall(call) => {
                self.close_blocks(step);
                self.accept_call(step, call);
            }
            ModelEvent::Finish { reason, usage } => {
                self.with_turn(|t| t.usage.add(usage));
                step.finish = Some(reason);
                return true;
            }
        }
        false
    }

    /// Validates a call, gives it our id and emits its input chunks.
    fn accept_call(&mut self, step: &mut StepOutput, mut call: ToolCall) {
        call.id = self.rt.ids.next_id(IdKind::ToolCall);
        let rt = self.rt.clone();
        let tool = rt.tools.get(&call.name);
        let problem = match tool {
            None => Some(format!(
                "Unknown tool {:?}. Available tools: {}.",
                call.name,
                self.rt.tools.names().join(", ")
            )),
            Some(tool) => validate(&tool.spec.parameters, &call.args)
                .err()
                .map(|e| format!("Invalid arguments for {}: {e}", call.name)),
        };
        self.emit(Chunk::tool_input_start(call.id.clone(), call.name.clone()));
        let location = tool
            .map(|t| t.spec.location)
            .unwrap_or(ToolLocation::Server);
        let phase = match problem {
            Some(message) => {
                self.emit(Chunk::tool_input_error(
                    call.id.clone(),
                    call.name.clone(),
                    call.args.clone(),
                    message.clone(),
                ));
                CallPhase::Done {
                    outcome: Outcome::Error { message },
                    edited_args: None,
                }
            }
            None => {
                self.emit(Chunk::tool_input_available(
                    call.id.clone(),
                    call.name.clone(),
                    call.args.clone(),
                ));
                // Decided at the end of the step (gate_calls).
                CallPhase::Ready {
                    args: call.args.clone(),
                    edited: false,
                }
            }
        };
        let announced = matches!(phase, CallPhase::Done { .. });
        step.parts
            .push(AssistantPart::ToolCall { call: call.clone() });
        step.calls.push(StepCall {
            call,
            location,
            phase,
            announced,
            gated_by: None,
        });
    }

    /// At the end of a step: each valid call either waits for approval, waits for the browser,
    /// or is ready to run on the server.
    fn gate_calls(&mut self, step: &mut StepOutput) {
        let now = self.rt.clock.now_ms();
        let mut requests = Vec::new();
        for call in &mut step.calls {
            let CallPhase::Ready { args, .. } = &call.phase else {
                continue;
            };
            let Some(tool) = self.rt.tools.get(&call.call.name) else {
                continue;
            };
            if tool.spec.approval.requires_approval(args) {
                let approval_id = self.rt.ids.next_id(IdKind::Approval);
                let deadline_ms = now + tool.spec.approval_timeout.as_millis() as Millis;
                let mut event =
                    self.audit_event(AuditKind::Requested, &call.call, &approval_id, now);
                event.deadline_ms = Some(deadline_ms);
                self.audit.push(event);
                call.gated_by = Some(approval_id.clone());
                call.phase = CallPhase::AwaitingApproval {
                    approval_id: approval_id.clone(),
                    requested_at_ms: now,
                    deadline_ms,
                };
                requests.push(Chunk::tool_approval_request(
                    approval_id,
                    call.call.id.clone(),
                ));
            } else if tool.spec.location == ToolLocation::Browser {
                call.phase = CallPhase::AwaitingBrowser {
                    args: args.clone(),
                    edited: false,
                    deadline_ms: now + tool.spec.result_timeout.as_millis() as Millis,
                };
            }
        }
        for chunk in requests {
            self.emit(chunk);
        }
    }

    /// Phase A: waits until every call of the step has its result, running server tools,
    /// expiring deadlines and pausing for the person. `paused_at`: the input count at which
    /// the turn last paused, when it continues after being parked.
    async fn resolve_calls(&mut self, paused_at: Option<u64>) -> Flow {
        let mut running: FuturesUnordered<BoxFuture<'static, (String, Outcome)>> =
            FuturesUnordered::new();
        let mut last_pause_inputs: Option<u64> = paused_at;
        let mut emitted_since_pause = false;
        loop {
            let now = self.rt.clock.now_ms();
            let mut to_emit = Vec::new();
            let mut to_run = Vec::new();
            let mut expired = Vec::new();
            let (waiting, next_deadline, all_done, inputs) = {
                let mut record = lock(&self.session.record);
                let Some(turn) = record.turn.as_mut() else {
                    return Flow::Continue;
                };
                for call in &mut turn.calls {
                    match &call.phase {
                        CallPhase::AwaitingApproval {
                            approval_id,
                            deadline_ms,
                            ..
                        } if now >= *deadline_ms => {
                            expired.push(approval_id.clone());
                            let mut event = audit_event(
                                AuditKind::Expired,
                                &self.session.id,
                                &turn.id,
                                &call.call,
                                approval_id,
                                now,
                            );
                            event.deadline_ms = Some(*deadline_ms);
                            self.audit.push(event);
                            call.phase = CallPhase::Done {
                                outcome: Outcome::Expired,
                                edited_args: None,
                            };
                            call.announced = false;
                        }
                        CallPhase::AwaitingBrowser {
                            deadline_ms,
                            args,
                            edited,
                        } if now >= *deadline_ms => {
                            let waited = self
                                .rt
                                .tools
                                .get(&call.call.name)
                                .map(|t| t.spec.result_timeout.as_secs())
                                .unwrap_or(0);
                            call.phase = CallPhase::Done {
                                outcome: Outcome::Error {
                                    message: format!(
                                        "The browser did not return a result within {waited} s."
                                    ),
                                },
                                edited_args: edited.then(|| args.clone()),
                            };
                            call.announced = false;
                        }
                        CallPhase::Ready { args, edited } => {
                            to_run.push((call.call.clone(), args.clone(), *edited));
                            call.phase = CallPhase::Running {
                                args: args.clone(),
                                edited: *edited,
                            };
                        }
                        _ => {}
                    }
                    if let CallPhase::Done { outcome, .. } = &call.phase
                        && !call.announced
                    {
                        call.announced = true;
                        to_emit.push(result_chunk(
                            &call.call.id,
                            outcome,
                            &self.rt.tools,
                            &call.call.name,
                        ));
                    }
                }
                let waiting = turn.calls.iter().any(StepCall::is_waiting);
                let next_deadline = next_deadline(&turn.calls);
                let all_done = turn.calls.iter().all(StepCall::is_done);
                let inputs = turn.inputs;
                turn.status = if waiting && running.is_empty() && to_run.is_empty() {
                    TurnStatus::AwaitingPerson
                } else {
                    TurnStatus::Running
                };
                for id in expired {
                    record
                        .resolved_approvals
                        .insert(id, ApprovalResolution::Expired { at_ms: now });
                }
                (waiting, next_deadline, all_done, inputs)
            };
            let announced = !to_emit.is_empty();
            if announced {
                emitted_since_pause = true;
            }
            for chunk in to_emit {
                self.emit(chunk);
            }
            if announced {
                // The sockets following this turn were woken on this thread, behind this task:
                // let them send the results before the model's next step takes the thread.
                tokio::task::yield_now().await;
            }
            for (call, args, edited) in to_run {
                running.push(self.run_server_tool(call, args, edited));
            }
            if all_done && running.is_empty() {
                return Flow::Continue;
            }
            if running.is_empty()
                && waiting
                && (emitted_since_pause || last_pause_inputs != Some(inputs))
            {
                self.pause().await;
                last_pause_inputs = Some(inputs);
                emitted_since_pause = false;
            }
            if running.is_empty() && waiting && self.park(inputs, next_deadline) {
                return Flow::Parked;
            }
            let sleep = next_deadline.map(|d| until(self.rt.clock.now_ms(), d));
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Flow::Interrupted,
                Some((call_id, outcome)) = running.next(), if !running.is_empty() => {
                    let executed = {
                        let mut record = lock(&self.session.record);
                        let now = self.rt.clock.now_ms();
                        let turn_id = record.turn.as_ref().map(|t| t.id.clone()).unwrap_or_default();
                        match record
                            .turn
                            .as_mut()
                            .and_then(|t| t.calls.iter_mut().find(|c| c.call.id == call_id))
                        {
                            Some(call) => match &call.phase {
                                CallPhase::Running { args, edited } => {
                                    let edited_args = edited.then(|| args.clone());
                                    let event = call.gated_by.as_ref().map(|approval_id| {
                                        executed_event(
                                            &self.session.id,
                                            &turn_id,
                                            call,
                                            approval_id,
                                            &outcome,
                                            edited_args.clone(),
                                            now,
                                        )
                                    });
                                    call.phase = CallPhase::Done { outcome, edited_args };
                                    call.announced = false;
                                    event
                                }
                                _ => None,
                            },
                            None => None,
                        }
                    };
                    self.audit.extend(executed);
                    // A tool's effect (a payment) is on disk before its output is announced.
                    self.save().await;
                }
                () = self.session.wake.notified() => {}
                () = tokio::time::sleep(sleep.unwrap_or(Duration::ZERO)), if sleep.is_some() => {}
                Some(notice) = next_notice(&mut self.notices), if self.notices.is_some() => {
                    self.withdraw(notice);
                }
            }
        }
    }

    /// The model withdrew a call: if it still waits for the person or the browser, it ends
    /// (its approval can no longer be answered) and nothing runs.
    fn withdraw(&mut self, notice: CallNotice) {
        let CallNotice::Withdrawn {
            session_id,
            provider_call_id,
        } = notice;
        if session_id != self.session.id {
            return;
        }
        let now = self.rt.clock.now_ms();
        let mut events = Vec::new();
        {
            let mut record = lock(&self.session.record);
            let SessionRecord {
                turn,
                resolved_approvals,
                ..
            } = &mut *record;
            let Some(turn) = turn.as_mut() else {
                return;
            };
            for call in &mut turn.calls {
                if !is_provider_call(&call.call, &provider_call_id) || !call.is_waiting() {
                    continue;
                }
                if let CallPhase::AwaitingApproval { approval_id, .. } = &call.phase {
                    resolved_approvals.insert(
                        approval_id.clone(),
                        ApprovalResolution::Withdrawn { at_ms: now },
                    );
                    let mut event = audit_event(
                        AuditKind::Interrupted,
                        &self.session.id,
                        &turn.id,
                        &call.call,
                        approval_id,
                        now,
                    );
                    event.reason = Some("withdrawn by the model".into());
                    events.push(event);
                }
                tracing::info!(session = %self.session.id, call = %call.call.id, "the model withdrew a call");
                call.phase = CallPhase::Done {
                    outcome: Outcome::Error {
                        message:
                            "The model withdrew this call before it was answered. Nothing was done."
                                .into(),
                    },
                    edited_args: None,
                };
                call.announced = false;
            }
        }
        self.audit.extend(events);
    }

    /// Runs a server tool; the future resolves to (call id, outcome).
    fn run_server_tool(
        &self,
        call: ToolCall,
        args: Value,
        _edited: bool,
    ) -> BoxFuture<'static, (String, Outcome)> {
        let executor = self.rt.tools.get(&call.name).map(|t| t.executor.clone());
        let ctx = ToolContext {
            session: self.session.clone(),
            tool_call_id: call.id.clone(),
            clock: self.rt.clock.clone(),
            ids: self.rt.ids.clone(),
        };
        async move {
            let outcome = match executor {
                Some(Executor::Server(tool)) => match tool.call(args, ctx).await {
                    Ok(output) => Outcome::Output { output },
                    Err(e) => Outcome::Error { message: e.0 },
                },
                Some(Executor::Browser) | None => Outcome::Error {
                    message: format!("{} cannot run on the server", call.name),
                },
            };
            (call.id, outcome)
        }
        .boxed()
    }

    /// Moves the results of a finished step into the history (one result per call, in order).
    fn commit_results(&mut self) {
        let mut record = lock(&self.session.record);
        let Some(turn) = record.turn.as_mut() else {
            return;
        };
        if turn.calls.is_empty() || !turn.calls.iter().all(StepCall::is_done) {
            return;
        }
        let results: Vec<ToolResult> = std::mem::take(&mut turn.calls)
            .into_iter()
            .map(|c| match c.phase {
                CallPhase::Done {
                    outcome,
                    edited_args,
                } => ToolResult {
                    call_id: c.call.id,
                    name: c.call.name,
                    outcome,
                    edited_args,
                },
                _ => ToolResult {
                    call_id: c.call.id,
                    name: c.call.name,
                    outcome: Outcome::Interrupted,
                    edited_args: None,
                },
            })
            .collect();
        record.history.push(HistoryItem::ToolResults { results });
    }

    /// Adds the step's assistant item to the history.
    fn record_step(&mut self, step: &mut StepOutput) {
        let parts: Vec<AssistantPart> = std::mem::take(&mut step.parts)
            .into_iter()
            .filter(|p| {
                !matches!(p, AssistantPart::Text { text, provider_data: None } if text.is_empty())
            })
            .collect();
        if !parts.is_empty() {
            lock(&self.session.record)
                .history
                .push(HistoryItem::Assistant { parts });
        }
    }

    fn close_blocks(&mut self, step: &mut StepOutput) {
        if let Some(block) = step.reasoning.take() {
            self.end_reasoning(step, block);
        }
        if let Some(block) = step.text.take() {
            self.end_text(step, block);
        }
    }

    fn end_reasoning(&mut self, step: &mut StepOutput, block: Block) {
        self.emit(Chunk::reasoning_end(block.id));
        step.parts.push(AssistantPart::Reasoning {
            text: block.text,
            provider_data: block.provider_data,
        });
    }

    /// Ends a text block: emitted now in progressive mode, kept for the step's end in hold mode.
    fn end_text(&mut self, step: &mut StepOutput, block: Block) {
        if self.timing == TextTiming::Progressive {
            self.emit(Chunk::text_end(block.id));
        } else {
            self.with_turn(|t| {
                t.held_text.push(HeldText {
                    id: block.id.clone(),
                    text: block.text.clone(),
                })
            });
        }
        step.parts.push(AssistantPart::Text {
            text: block.text,
            provider_data: block.provider_data,
        });
    }

    /// Emits all held text (hold mode) as complete text blocks, in generation order.
    fn flush_held_text(&mut self) {
        let held = self
            .with_turn(|t| std::mem::take(&mut t.held_text))
            .unwrap_or_default();
        for block in held {
            self.emit(Chunk::text_start(block.id.clone()));
            self.emit(Chunk::text_delta(block.id.clone(), block.text));
            self.emit(Chunk::text_end(block.id));
        }
    }

    /// Ends every call of a failed step with the failure.
    fn fail_calls(&mut self, step: &mut StepOutput, message: &str) {
        if step.calls.is_empty() {
            return;
        }
        let mut results = Vec::new();
        for call in step.calls.drain(..) {
            let outcome = match call.phase {
                CallPhase::Done { outcome, .. } => outcome,
                _ => {
                    let text = format!("Not run: {message}");
                    self.emit(Chunk::tool_output_error(call.call.id.clone(), text.clone()));
                    Outcome::Error { message: text }
                }
            };
            results.push(ToolResult {
                call_id: call.call.id,
                name: call.call.name,
                outcome,
                edited_args: None,
            });
        }
        lock(&self.session.record)
            .history
            .push(HistoryItem::ToolResults { results });
    }

    /// Ends the turn after an interrupt: open calls end as interrupted, held text is delivered,
    /// and the stream closes with `abort` + `finish`.
    async fn finish_interrupted(&mut self, step: Option<StepOutput>) {
        let reason = lock(&self.interrupt_reason)
            .clone()
            .unwrap_or_else(|| "interrupted".to_string());
        if let Some(mut step) = step {
            self.close_blocks(&mut step);
            self.record_step(&mut step);
            let calls = std::mem::take(&mut step.calls);
            self.with_turn(|t| t.calls = calls);
        }
        let open: Vec<(String, String)> = {
            let mut record = lock(&self.session.record);
            let mut open = Vec::new();
            if let Some(turn) = record.turn.as_mut() {
                let now = self.rt.clock.now_ms();
                for call in &mut turn.calls {
                    if let CallPhase::AwaitingApproval { approval_id, .. } = &call.phase {
                        let mut event = audit_event(
                            AuditKind::Interrupted,
                            &self.session.id,
                            &turn.id,
                            &call.call,
                            approval_id,
                            now,
                        );
                        event.reason = Some(reason.clone());
                        self.audit.push(event);
                    }
                    if !call.is_done() {
                        call.phase = CallPhase::Done {
                            outcome: Outcome::Interrupted,
                            edited_args: None,
                        };
                    }
                    if !call.announced {
                        call.announced = true;
                        let text = match &call.phase {
                            CallPhase::Done {
                                outcome: Outcome::Interrupted,
                                ..
                            } => {
                                format!("Interrupted ({reason}) before it ran.")
                            }
                            _ => String::new(),
                        };
                        open.push((call.call.id.clone(), text));
                    }
                }
            }
            open
        };
        for (id, text) in open {
            if !text.is_empty() {
                self.emit(Chunk::tool_output_error(id, text));
            }
        }
        self.commit_results();
        self.flush_held_text();
        if self.reducer_in_step() {
            self.emit(Chunk::finish_step());
        }
        self.emit(Chunk::Abort(Abort {
            reason: Some(reason),
        }));
        self.finish(FinishReason::Other, TurnStatus::Interrupted)
            .await;
    }

    /// Ends the turn with an `error` chunk.
    async fn fail(&mut self, message: String) {
        tracing::warn!(session = %self.session.id, %message, "turn failed");
        self.emit(Chunk::error(message));
        self.set_status(TurnStatus::Failed);
        self.sync_messages();
        self.record_done();
        self.end().await;
    }

    async fn finish(&mut self, reason: FinishReason, status: TurnStatus) {
        let usage = self.with_turn(|t| t.usage).unwrap_or_default();
        let metadata = json!({
            "model": self.rt.model_for(self.transport).label(),
            "usage": usage,
        });
        self.emit(Chunk::Finish(Finish {
            finish_reason: Some(reason),
            message_metadata: Some(metadata),
        }));
        self.set_status(status);
        self.sync_messages();
        self.record_done();
        self.end().await;
    }

    /// Commits the ended turn, then logs its end (`[DONE]`): a client that saw the end finds
    /// the turn over after a crash or restart, and its next request does not queue behind this
    /// commit.
    async fn end(&mut self) {
        self.save().await;
        self.push(TurnEntry::End);
    }

    /// Parks the turn when it can wait for the person without a task (ADR 0010): nothing
    /// uncommitted, no provider notices to listen to, no input or interrupt since `inputs` was
    /// read. The check and the mark happen under the session's locks, where input is applied
    /// and interrupts are raised, so nothing that should wake the turn can be missed.
    fn park(&mut self, inputs: u64, deadline: Option<Millis>) -> bool {
        if self.notices.is_some() || !self.audit.is_empty() {
            return false;
        }
        {
            let record = lock(&self.session.record);
            let mut live = lock(&self.session.live);
            let Some(turn) = live.as_mut().filter(|t| Arc::ptr_eq(&t.log, &self.log)) else {
                return false;
            };
            if self.cancel.is_cancelled() || record.turn.as_ref().map(|t| t.inputs) != Some(inputs)
            {
                return false;
            }
            turn.parked = Some(Parked { inputs });
            // This very task: dropping its handle lets its memory go as soon as it returns.
            turn.task = None;
        }
        if let Some(deadline) = deadline {
            self.rt.wake_at(deadline, &self.session.id);
        }
        true
    }

    /// The turn waits for the person: the record is committed with the turn's whole log up to
    /// this pause (so the turn can leave memory while it waits, ADR 0011), then the pause is
    /// logged (an SSE response ends there).
    async fn pause(&mut self) {
        self.sync_messages();
        if let Some(log) = self.rt.chunk_log() {
            log.flush(&self.session.id);
        }
        let mut entries = self.log.entries_from(0);
        entries.push(TurnEntry::Pause);
        let stored = self.save_with(Some(&entries)).await;
        self.push(TurnEntry::Pause);
        if stored {
            let mut live = lock(&self.session.live);
            if let Some(turn) = live.as_mut().filter(|t| Arc::ptr_eq(&t.log, &self.log)) {
                turn.saved = entries.len();
            }
        }
    }

    /// Appends to the turn's log. Output after a pause is news for the chat's follower, which
    /// stopped reading there.
    fn push(&self, entry: TurnEntry) {
        if self.log.push(entry) {
            self.rt.followers.notify(&self.session.id);
        }
    }

    /// Whether a step is open in what was emitted (start-step without its finish-step).
    fn reducer_in_step(&self) -> bool {
        let entries = self.log.entries_from(0);
        let mut open = false;
        for entry in entries {
            match entry {
                TurnEntry::Chunk(Chunk::StartStep) => open = true,
                TurnEntry::Chunk(Chunk::FinishStep) => open = false,
                _ => {}
            }
        }
        open
    }

    fn emit(&mut self, chunk: Chunk) {
        self.apply(&chunk);
        if let Some(log) = self.rt.chunk_log() {
            log.record(
                &self.session.id,
                self.transport,
                &chunk,
                self.rt.clock.now_ms(),
            );
        }
        self.push(TurnEntry::Chunk(chunk));
    }

    /// Marks the end of the turn in the chunk log.
    fn record_done(&self) {
        if let Some(log) = self.rt.chunk_log() {
            log.record_done(&self.session.id, self.transport, self.rt.clock.now_ms());
        }
    }

    /// Folds a chunk into the server's copy of the assistant message.
    fn apply(&mut self, chunk: &Chunk) {
        if let Err(e) = self.reducer.apply(chunk) {
            tracing::error!(session = %self.session.id, error = %e, ?chunk, "the runner emitted a chunk its own reducer rejects");
        }
    }

    /// Writes the assistant message as the client now sees it into the session record.
    fn sync_messages(&mut self) {
        let message = self.reducer.message().clone();
        let mut record = lock(&self.session.record);
        match record.messages.last_mut() {
            Some(last) if last.id == message.id => *last = message,
            _ => record.messages.push(message),
        }
        record.updated_at_ms = self.rt.clock.now_ms();
    }

    /// Commits the session record with the audit events gathered since the last commit.
    async fn save(&mut self) {
        self.save_with(None).await;
    }

    /// [`TurnDriver::save`], with the turn's log when it pauses. True when it was committed.
    async fn save_with(&mut self, paused_log: Option<&[TurnEntry]>) -> bool {
        // Answers applied but not committed yet come first: they precede what they caused.
        let mut audit = std::mem::take(&mut *lock(&self.session.unsaved_audit));
        audit.append(&mut self.audit);
        let snapshot = self.session.snapshot();
        let result = match paused_log {
            Some(log) => self.rt.store.commit_paused(&snapshot, &audit, log).await,
            None => self.rt.store.commit(&snapshot, &audit).await,
        };
        self.session
            .dirty
            .store(result.is_err(), std::sync::atomic::Ordering::SeqCst);
        match result {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(session = %self.session.id, error = %e, "cannot save the session");
                // Keep the events for the next commit rather than lose them.
                self.audit.splice(0..0, audit);
                false
            }
        }
    }

    fn audit_event(
        &self,
        kind: AuditKind,
        call: &ToolCall,
        approval_id: &str,
        now: Millis,
    ) -> AuditEvent {
        audit_event(
            kind,
            &self.session.id,
            &self.turn_id,
            call,
            approval_id,
            now,
        )
    }

    fn set_status(&self, status: TurnStatus) {
        self.with_turn(|t| t.status = status);
    }

    fn with_turn<R>(&self, f: impl FnOnce(&mut TurnRecord) -> R) -> Option<R> {
        lock(&self.session.record).turn.as_mut().map(f)
    }
}

/// The earliest deadline of the calls waiting for the person or the browser.
fn next_deadline(calls: &[StepCall]) -> Option<Millis> {
    calls
        .iter()
        .filter_map(|c| match &c.phase {
            CallPhase::AwaitingApproval { deadline_ms, .. }
            | CallPhase::AwaitingBrowser { deadline_ms, .. } => Some(*deadline_ms),
            _ => None,
        })
        .min()
}

/// An audit event about `call`, gated by `approval_id`.
fn audit_event(
    kind: AuditKind,
    session_id: &str,
    turn_id: &str,
    call: &ToolCall,
    approval_id: &str,
    now: Millis,
) -> AuditEvent {
    let mut event = super::store::audit::event(
        kind, now, session_id, turn_id, &call.id, &call.name, &call.args,
    );
    event.approval_id = Some(approval_id.to_owned());
    event
}

/// The `executed` event of a gated call that just finished.
fn executed_event(
    session_id: &str,
    turn_id: &str,
    call: &StepCall,
    approval_id: &str,
    outcome: &Outcome,
    edited_args: Option<Value>,
    now: Millis,
) -> AuditEvent {
    let mut event = audit_event(
        AuditKind::Executed,
        session_id,
        turn_id,
        &call.call,
        approval_id,
        now,
    );
    event.edited_args = edited_args;
    event.outcome = Some(match outcome {
        Outcome::Output { output } => json!({ "ok": output }),
        Outcome::Error { message } => json!({ "error": message }),
        other => json!({ "error": other.model_view() }),
    });
    event
}

/// The audit events of accepted person input: each approval answer, and the execution of a
/// gated browser tool whose result came in.
fn answer_events(
    session: &Session,
    inputs: &[PersonInput],
    resolutions: &[(String, ApprovalResolution)],
    actor: &Actor,
    now: Millis,
) -> Vec<AuditEvent> {
    let record = lock(&session.record);
    let Some(turn) = record.turn.as_ref() else {
        return Vec::new();
    };
    let mut events = Vec::new();
    for (approval_id, resolution) in resolutions {
        let Some(call) = turn
            .calls
            .iter()
            .find(|c| c.gated_by.as_deref() == Some(approval_id.as_str()))
        else {
            continue;
        };
        let kind = match resolution {
            ApprovalResolution::Approved { edited: true, .. } => AuditKind::Edited,
            ApprovalResolution::Approved { .. } => AuditKind::Approved,
            ApprovalResolution::Denied { .. } => AuditKind::Denied,
            ApprovalResolution::Expired { .. } => AuditKind::Expired,
            ApprovalResolution::Withdrawn { .. } => AuditKind::Interrupted,
        };
        let mut event = audit_event(kind, &record.id, &turn.id, &call.call, approval_id, now);
        event.actor = Some(actor.clone());
        if let ApprovalResolution::Denied { reason, .. } = resolution {
            event.reason = reason.clone();
        }
        if kind == AuditKind::Edited {
            event.edited_args = match &call.phase {
                CallPhase::Ready { args, .. } | CallPhase::AwaitingBrowser { args, .. } => {
                    Some(args.clone())
                }
                _ => None,
            };
        }
        events.push(event);
    }
    for input in inputs {
        let PersonInput::BrowserResult { tool_call_id, .. } = input else {
            continue;
        };
        let Some(call) = turn.calls.iter().find(|c| &c.call.id == tool_call_id) else {
            continue;
        };
        if let (
            Some(approval_id),
            CallPhase::Done {
                outcome,
                edited_args,
            },
        ) = (&call.gated_by, &call.phase)
        {
            let mut event = executed_event(
                &record.id,
                &turn.id,
                call,
                approval_id,
                outcome,
                edited_args.clone(),
                now,
            );
            event.actor = Some(actor.clone());
            events.push(event);
        }
    }
    events
}

/// The next notice, skipping any the receiver missed; `None` once the sender is gone.
async fn next_notice(notices: &mut Option<broadcast::Receiver<CallNotice>>) -> Option<CallNotice> {
    let receiver = notices.as_mut()?;
    loop {
        match receiver.recv().await {
            Ok(notice) => return Some(notice),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "call notices were missed");
            }
            Err(broadcast::error::RecvError::Closed) => {
                *notices = None;
                return None;
            }
        }
    }
}

/// Whether `call` is the provider's call `provider_call_id` (any provider namespace's `id`).
fn is_provider_call(call: &ToolCall, provider_call_id: &str) -> bool {
    call.provider_data
        .as_ref()
        .and_then(Value::as_object)
        .is_some_and(|namespaces| {
            namespaces
                .values()
                .any(|data| data.get("id").and_then(Value::as_str) == Some(provider_call_id))
        })
}

/// The chunk log's label for a stored transport name.
fn static_transport(name: &str) -> &'static str {
    match name {
        "sse" => "sse",
        "bidi" => "bidi",
        "seed" => "seed",
        _ => "api",
    }
}

/// The chunk that reports how a call ended.
fn result_chunk(call_id: &str, outcome: &Outcome, tools: &ToolRegistry, name: &str) -> Chunk {
    match outcome {
        Outcome::Output { output } => Chunk::tool_output_available(call_id, output.clone()),
        Outcome::Error { message } => Chunk::tool_output_error(call_id, message.clone()),
        Outcome::Denied { .. } => Chunk::tool_output_denied(call_id),
        Outcome::Expired => {
            let timeout = tools
                .get(name)
                .map(|t| humanize(t.spec.approval_timeout))
                .unwrap_or_else(|| "its deadline".into());
            Chunk::tool_output_error(
                call_id,
                format!(
                    "{}: nobody answered within {timeout}. Nothing was done.",
                    crate::protocol::chunk::APPROVAL_EXPIRED_PREFIX
                ),
            )
        }
        Outcome::Interrupted => Chunk::tool_output_error(call_id, "Interrupted before it ran."),
    }
}

/// "5 minutes", "30 seconds".
fn humanize(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        let m = secs / 60;
        format!("{m} minute{}", if m == 1 { "" } else { "s" })
    } else {
        format!("{secs} second{}", if secs == 1 { "" } else { "s" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that answers every step with the same events.
    struct Scripted(Vec<ModelEvent>);

    impl Model for Scripted {
        fn label(&self) -> String {
            "scripted".into()
        }

        fn stream(&self, _: ModelRequest) -> super::super::model::ModelStream {
            futures::stream::iter(self.0.clone().into_iter().map(Ok)).boxed()
        }
    }

    #[tokio::test]
    async fn text_provider_data_is_kept_with_the_text_in_history() {
        let signature = json!({"google": {"thoughtSignature": "sig"}});
        let runtime = Runtime::new(
            Arc::new(Scripted(vec![
                ModelEvent::TextDelta("Take ".into()),
                ModelEvent::TextDelta("the train.".into()),
                ModelEvent::TextData(signature.clone()),
                ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: Usage::default(),
                },
            ])),
            ToolRegistry::default(),
            Arc::new(super::super::clock::SystemClock),
            Arc::new(super::super::clock::SequentialIds::default()),
            Arc::new(super::super::session::MemoryStore::default()),
            RuntimeSettings::default(),
        );
        let started = runtime
            .start_turn(
                "c",
                UserTurn {
                    message_id: None,
                    text: "Train?".into(),
                    attachments: Vec::new(),
                    transport: "sse",
                },
                None,
            )
            .await
            .unwrap();
        let mut reader = started.log.subscribe(0);
        while reader.next().await.is_some() {}
        let record = runtime.session("c").await.unwrap().snapshot();
        assert_eq!(
            record.history[1],
            HistoryItem::Assistant {
                parts: vec![AssistantPart::Text {
                    text: "Take the train.".into(),
                    provider_data: Some(signature),
                }]
            }
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(humanize(Duration::from_secs(300)), "5 minutes");
        assert_eq!(humanize(Duration::from_secs(60)), "1 minute");
        assert_eq!(humanize(Duration::from_secs(30)), "30 seconds");
        assert_eq!(humanize(Duration::from_secs(1)), "1 second");
    }
}
