//! The runtime: the registry of live sessions and their memory lifecycle (load, revive, park,
//! release, evict, the deadline timer), and the entry points the transports call (start a turn,
//! submit person input, interrupt). The turn loop itself is [`super::turn`].
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

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    Transport,
    chunk_log::ChunkLog,
    clock::{Clock, IdGen, IdKind, Millis, until},
    followers::Followers,
    gate::next_deadline,
    gate::{CallPhase, InputError, PersonInput},
    history::{Attachment, HistoryItem},
    model::{Model, ModelRequest, Usage},
    session::{
        LiveTurn, Parked, Receipt, Session, SessionRecord, SessionState, TurnEntry, TurnLog,
        TurnRecord, TurnStatus, lock,
    },
    store::{Actor, SessionStore, StoreError, StoredSession},
    tools::ToolRegistry,
    turn::{DriveFrom, TurnDriver, answer_events},
};
use crate::protocol::{MessageReducer, UiMessage, UiPart, message::FilePart};

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

/// A store error as text, with its whole cause chain ([`StoreError::report`]), so `TurnError`
/// stays `Clone + PartialEq`. For logs: a client is told only that the store failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct StoreErrorText(pub String);

impl From<StoreError> for TurnError {
    fn from(e: StoreError) -> Self {
        TurnError::Store(StoreErrorText(e.report()))
    }
}

/// What the person said to start a turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserTurn {
    /// The client's id for the user message, if it has one.
    pub message_id: Option<String>,
    pub text: String,
    pub attachments: Vec<Attachment>,
    /// The transport the turn came in on.
    pub transport: Transport,
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
    pub fn model_for(&self, transport: Transport) -> &Arc<dyn Model> {
        match self.live_model.get() {
            Some(live) if transport == Transport::Bidi => live,
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
                let mut state = session.state();
                let SessionState { record, live, .. } = &mut *state;
                match live.as_mut() {
                    Some(turn) if !turn.log.is_ended() => {
                        let status = record.turn.as_ref().map(|t| t.status);
                        if status != Some(TurnStatus::AwaitingPerson) {
                            return Err(TurnError::Busy);
                        }
                        *lock(&turn.interrupt_reason) = Some("superseded by a new message".into());
                        turn.cancel.cancel();
                        // A parked turn needs a task to end itself.
                        self.unpark_locked(&session, record, turn);
                        turn.task.take()
                    }
                    _ => {
                        let started = self.begin_turn(&session, record, live, user, timing);
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
        let transport = user.transport;
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
                transport,
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
        transport: Transport,
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
        turn.task = Some(driver.spawn(DriveFrom::Start));
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
        transport: Transport,
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
            current.transport,
        );
        turn.task = Some(driver.spawn(DriveFrom::Pause(parked)));
    }

    /// [`Runtime::unpark_locked`], taking the locks.
    fn unpark(self: &Arc<Self>, session: &Arc<Session>) {
        let mut state = session.state();
        let SessionState { record, live, .. } = &mut *state;
        if let Some(turn) = live.as_mut() {
            self.unpark_locked(session, record, turn);
        }
    }

    /// Tells `session`'s turn that person input was applied: a parked turn gets a task again,
    /// a waiting one is woken.
    fn wake(self: &Arc<Self>, session: &Arc<Session>) {
        {
            let mut state = session.state();
            let SessionState { record, live, .. } = &mut *state;
            if let Some(turn) = live.as_mut().filter(|t| t.parked.is_some()) {
                self.unpark_locked(session, record, turn);
                return;
            }
        }
        session.wake();
    }

    /// Wakes `chat`'s parked turn at `deadline` (once; a turn that is not parked then is left
    /// alone).
    pub(crate) fn wake_at(self: &Arc<Self>, deadline: Millis, chat: &str) {
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
                                    tracing::error!(session = %chat, error = &e as &dyn std::error::Error, "cannot load a session whose deadline came");
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
        let mut state = session.state();
        let SessionState { record, live, .. } = &mut *state;
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
                self.unpark_locked(session, record, turn_state);
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
                turn.transport,
                existing,
            )
        };
        tracing::info!(session = %session.id, turn = %turn_id, "resuming a turn after a restart");
        let reducer = match existing {
            Some(message) => MessageReducer::continuing(message),
            None => MessageReducer::new(message_id.clone()),
        };
        self.spawn_driver(
            session, live, turn_id, message_id, reducer, timing, transport,
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
            session.state().unsaved_audit.extend(events);
            self.wake(&session);
            return Ok(applied.receipt);
        }
        // Earlier answers still waiting for their turn's commit go with this one: the record
        // written here contains them.
        let earlier = std::mem::take(&mut session.state().unsaved_audit);
        let count = earlier.len();
        let events = [earlier, events].concat();
        let snapshot = session.snapshot();
        if let Err(e) = self.store.commit(&snapshot, &events).await {
            tracing::error!(session = %chat_id, error = &e as &dyn std::error::Error, "cannot record the person's answer");
            session
                .state()
                .unsaved_audit
                .splice(0..0, events.into_iter().take(count));
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
            transport: Transport::Api.as_str().into(),
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
                    tracing::warn!(
                        error = &e as &dyn std::error::Error,
                        "cannot look up whose approval this is"
                    );
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
    pub(crate) fn release_parked(self: &Arc<Self>, chat_id: &str) {
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
                tracing::error!(session = %chat_id, error = &e as &dyn std::error::Error, "cannot load the chat to interrupt");
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

    pub(crate) fn model_request(
        &self,
        session_id: &str,
        history: Vec<HistoryItem>,
    ) -> ModelRequest {
        ModelRequest {
            session_id: session_id.to_owned(),
            system: self.settings.system_prompt.clone(),
            history,
            tools: self.tools.declarations(),
        }
    }
}
