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
//!
//! This file holds the runtime and its registry of live sessions; `turns` the entry points of
//! the transports (start a turn, interrupt) and how a turn gets its task (the person's answers
//! are [`super::answer`]'s);
//! `lifecycle` how sessions come and go from memory (revive, park deadlines, release, evict);
//! `voice`, `people` and `news` what a person's voice, a change of people and another
//! instance's news do. What is not an entry point is a type of its own the runtime holds:
//! `models` ([`Models`]), `grants` ([`Grants`]), `live` (the registry's map), `held_logs`.

#[cfg(test)]
mod aside_tests;
mod grants;
#[cfg(test)]
mod guarantee_tests;
mod held_logs;
mod lifecycle;
mod live;
mod models;
mod news;
mod people;
mod turns;
mod voice;

pub use grants::{GrantChange, Grants};
pub use models::Models;
pub(crate) use people::{Telling, dropped_events};

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use super::{
    Transport,
    attachments::Attachments,
    chunk_log::ChunkLog,
    clock::{Clock, IdGen},
    commit::Commits,
    followers::Followers,
    history::Attachment,
    model::Model,
    policy::Policy,
    questions::Questions,
    session::{Session, SessionRecord, TurnLog, lock},
    store::{SessionStore, StoreError, StoredSession},
    tools::ToolRegistry,
};
use held_logs::HeldLogs;
use lifecycle::{Deadlines, ReleaseLater};
use live::LiveSessions;

/// `load_gates` is cleaned of gates nobody holds beyond this size.
const LOAD_GATES_CLEANUP: usize = 1_024;

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
    /// The instruction every model gets; `None`: written from the tool registry
    /// ([`ToolRegistry::system_prompt`]).
    pub system_prompt: Option<String>,
    pub text_timing: TextTiming,
    /// A turn stops after this many model steps (a model that keeps calling tools).
    pub max_steps: u32,
    /// The largest attachment a message may carry, decoded (`COUNTERSIGN_MAX_ATTACHMENT_BYTES`).
    pub max_attachment_bytes: usize,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            system_prompt: None,
            text_timing: TextTiming::Hold,
            max_steps: 16,
            max_attachment_bytes: super::attachments::DEFAULT_MAX_ATTACHMENT_BYTES,
        }
    }
}

/// Why a turn could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TurnError {
    #[error("a turn is already running in this chat; stop it or wait for it to finish")]
    Busy,
    #[error("the message is empty")]
    EmptyMessage,
    /// The chat exists and is someone else's.
    #[error("there is no chat with this id that is yours")]
    NotYourChat,
    /// "Ask again" for a call that cannot be asked again (unknown, or decided).
    #[error("call {call_id} cannot be asked again: {why}")]
    CannotAskAgain { call_id: String, why: String },
    /// An attachment that cannot be kept (too large, not a data: URL, unknown).
    #[error(transparent)]
    Attachment(#[from] super::attachments::AttachmentError),
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
    /// "Ask again": the id of an earlier call of this chat that expired or was set aside; the
    /// turn puts the same call before the person again before the model says anything.
    pub ask_again: Option<String>,
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
    /// The models turns and voice are answered by.
    models: Models,
    /// The tools the model may call (MCP servers' tools come and go while it runs).
    pub tools: Arc<ToolRegistry>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGen>,
    pub store: Arc<dyn SessionStore>,
    pub settings: RuntimeSettings,
    /// Questions running tools wait on the person for (MCP elicitation).
    pub questions: Arc<Questions>,
    /// The approvals waiting for people, as the store finds them, and news of them (the
    /// inbox's pages follow it).
    pub inbox: Arc<super::inbox::Inbox>,
    /// Writes chats' records (every commit, a turn's or an answer's).
    pub(crate) commits: Commits,
    /// What `/metrics` shows (`store` is metered through it).
    pub metrics: Arc<super::metrics::Metrics>,
    /// Where every emitted chunk is recorded (`COUNTERSIGN_CHUNK_LOG`), if anywhere.
    chunk_log: Option<Arc<ChunkLog>>,
    /// The policy (rules, grants, running totals): the file's, or each tool's own setting.
    policy: Arc<Policy>,
    /// Grants revoked and withdrawn, kept and audited.
    grants: Grants,
    /// The people who sign in, their roles and passkeys (a passkeys server's are built once it
    /// knows the address it listens on, WebAuthn's relying party, before its runtime); on a
    /// server without sign-in, the one local person.
    people: Arc<crate::agent::people::People>,
    /// The sessions in memory, one per chat.
    live: LiveSessions,
    /// When parked turns must wake up to expire what they wait for.
    deadlines: Arc<Deadlines>,
    /// Who follows each chat's turns as they happen (a BIDI socket).
    pub followers: Followers,
    /// Logs of parked turns that left memory while a reader still held them.
    held_logs: HeldLogs,
    /// One load at a time per chat ([`Runtime::load_gate`]).
    load_gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Sessions that left memory so far (the server gives freed memory back after a wave).
    released: AtomicU64,
    /// Parked sessions that could not leave memory when their task parked them because a
    /// request still held them: tried again shortly (ADR 0011).
    release_later: Arc<ReleaseLater>,
    /// Who speaks in which chat ([`Runtime::voice`]).
    voices: voice::Voices,
    /// Attachments checked, kept once and inlined again ([`Runtime::attachments`]).
    attachments: Attachments,
}

/// Builds a [`Runtime`] whole: what it needs, then what it may have (a BIDI model, a chunk log,
/// a policy, people), then [`RuntimeBuilder::build`]. Nothing is set on a runtime afterwards.
pub struct RuntimeBuilder {
    model: Arc<dyn Model>,
    tools: ToolRegistry,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGen>,
    store: Arc<dyn SessionStore>,
    settings: RuntimeSettings,
    live_model: Option<Arc<dyn Model>>,
    chunk_log: Option<Arc<ChunkLog>>,
    policy: Option<Arc<Policy>>,
    people: Option<Arc<crate::agent::people::People>>,
}

impl RuntimeBuilder {
    /// The tools the runtime will have (a policy file is checked against them).
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The runtime's clock (a policy loaded now is stamped with it).
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// BIDI turns use `model` (Gemini Live) instead of the runtime's model.
    pub fn live_model(mut self, model: Arc<dyn Model>) -> Self {
        self.live_model = Some(model);
        self
    }

    /// Every chunk of every session is recorded in `log`.
    pub fn chunk_log(mut self, log: Arc<ChunkLog>) -> Self {
        self.chunk_log = Some(log);
        self
    }

    /// Calls are decided with `policy` (without one: each tool's own setting).
    pub fn policy(mut self, policy: Arc<Policy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// People sign in from `people` (without: the one local person of a server without
    /// sign-in).
    pub fn people(mut self, people: Arc<crate::agent::people::People>) -> Self {
        self.people = Some(people);
        self
    }

    pub fn build(self) -> Arc<Runtime> {
        let RuntimeBuilder {
            model,
            tools,
            clock,
            ids,
            store,
            settings,
            live_model,
            chunk_log,
            policy,
            people,
        } = self;
        let tools = Arc::new(tools);
        let policy = policy.unwrap_or_else(|| Arc::new(Policy::tool_defaults()));
        let models = Models::new(
            model,
            live_model,
            settings.system_prompt.clone(),
            tools.clone(),
        );
        let metrics = Arc::new(super::metrics::Metrics::new(store.database()));
        let store = super::metrics::Metered::wrap(store, metrics.clone());
        let inbox = Arc::new(super::inbox::Inbox::new(
            store.clone(),
            clock.clone(),
            Some(metrics.clone()),
        ));
        let attachments =
            Attachments::new(store.clone(), clock.clone(), settings.max_attachment_bytes);
        let grants = Grants::new(policy.clone(), clock.clone(), store.shared());
        Arc::new(Runtime {
            commits: Commits::new(store.clone(), inbox.clone()),
            models,
            tools,
            clock,
            ids,
            store,
            settings,
            questions: Arc::default(),
            inbox,
            metrics,
            chunk_log,
            grants,
            policy,
            people: people.unwrap_or_else(|| {
                Arc::new(crate::agent::people::People::local(
                    crate::agent::people::SignInMode::Open,
                ))
            }),
            live: LiveSessions::default(),
            deadlines: Arc::default(),
            followers: Followers::default(),
            held_logs: HeldLogs::default(),
            load_gates: Mutex::new(HashMap::new()),
            released: AtomicU64::new(0),
            release_later: Arc::default(),
            voices: voice::Voices::default(),
            attachments,
        })
    }
}

impl Runtime {
    /// A runtime with nothing optional (no BIDI model of its own, no chunk log, each tool's
    /// own approval setting, the one local person): [`Runtime::builder`] for more.
    pub fn new(
        model: Arc<dyn Model>,
        tools: ToolRegistry,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGen>,
        store: Arc<dyn SessionStore>,
        settings: RuntimeSettings,
    ) -> Arc<Self> {
        Self::builder(model, tools, clock, ids, store, settings).build()
    }

    /// What a runtime needs; the rest is the builder's.
    pub fn builder(
        model: Arc<dyn Model>,
        tools: ToolRegistry,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGen>,
        store: Arc<dyn SessionStore>,
        settings: RuntimeSettings,
    ) -> RuntimeBuilder {
        RuntimeBuilder {
            model,
            tools,
            clock,
            ids,
            store,
            settings,
            live_model: None,
            chunk_log: None,
            policy: None,
            people: None,
        }
    }

    /// The policy calls are decided with.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Grants revoked by their grantor, with their person's removal, or with an answer never
    /// recorded.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The people directory.
    pub fn people(&self) -> &Arc<crate::agent::people::People> {
        &self.people
    }

    /// The chats' attachments: checked, kept once, inlined again for a model.
    pub fn attachments(&self) -> &Attachments {
        &self.attachments
    }

    /// The person a chat owned by `owner` asks for its calls, as the policy sees them now.
    pub fn requester(&self, owner: &str) -> super::policy::Requester {
        let people = self.people();
        match people.person(owner) {
            Some(person) => super::policy::Requester {
                id: person.id.clone(),
                name: person.name.clone(),
                roles: if person.is_active() {
                    person.roles
                } else {
                    Default::default()
                },
            },
            None => super::policy::Requester {
                id: owner.to_owned(),
                name: people.name_of(owner),
                roles: Default::default(),
            },
        }
    }

    /// The models turns and voice are answered by.
    pub fn models(&self) -> &Models {
        &self.models
    }

    /// The chunk log, if one is configured.
    pub fn chunk_log(&self) -> Option<&Arc<ChunkLog>> {
        self.chunk_log.as_ref()
    }

    /// The live session of `chat_id`, loaded from the store or created.
    /// A turn the store kept unfinished (a restart) is resumed here; a turn that waited for the
    /// person comes back parked, with its log (ADR 0011).
    pub async fn session(self: &Arc<Self>, chat_id: &str) -> Result<Arc<Session>, StoreError> {
        let _one_load = self.load_gate(chat_id).await;
        if let Some(session) = self.whole_session(chat_id).await? {
            return Ok(session);
        }
        let stored = StoredSession::new(SessionRecord::new(chat_id, self.clock.now_ms()), None);
        Ok(self.make_live(stored))
    }

    /// The live session of `chat_id` if it exists (never creates one), whole: a copy loaded with
    /// its head only ([`Runtime::session_head`]) reads the rest of its entries first.
    pub async fn existing_session(
        self: &Arc<Self>,
        chat_id: &str,
    ) -> Result<Option<Arc<Session>>, StoreError> {
        let _one_load = self.load_gate(chat_id).await;
        self.whole_session(chat_id).await
    }

    /// [`Runtime::existing_session`], its load gate held.
    async fn whole_session(
        self: &Arc<Self>,
        chat_id: &str,
    ) -> Result<Option<Arc<Session>>, StoreError> {
        let session = match self.current_live_session(chat_id).await? {
            Some(session) => session,
            None => match self.store.load(chat_id).await? {
                Some(stored) => self.make_live(stored),
                None => return Ok(None),
            },
        };
        match self.read_entries(&session).await {
            Ok(()) => Ok(Some(session)),
            // Another instance committed the chat since this copy's head was read: the copy
            // is out of date; the database's is read whole (unless a task here still drives
            // it: then its commits are refused, and the next request reads again).
            Err(e) if e.is_conflict() && !session.has_task() => {
                self.forget_overtaken(&session).await;
                Ok(self
                    .store
                    .load(chat_id)
                    .await?
                    .map(|stored| self.make_live(stored)))
            }
            Err(e) => Err(e),
        }
    }

    /// The live session of `chat_id` if it exists, for a reader of its head only (a person's
    /// answer, the turn and its log): a chat not in memory is loaded with its head only
    /// ([`SessionStore::load_head`]: its row, its last message, the lengths of its lists), so an
    /// answer costs the same after a thousand turns as after one (ADR 0045, amendment).
    /// Whatever reads a whole list of it later reads the rest first ([`Runtime::read_entries`]).
    pub async fn session_head(
        self: &Arc<Self>,
        chat_id: &str,
    ) -> Result<Option<Arc<Session>>, StoreError> {
        let _one_load = self.load_gate(chat_id).await;
        if let Some(session) = self.current_live_session(chat_id).await? {
            return Ok(Some(session));
        }
        Ok(self
            .store
            .load_head(chat_id)
            .await?
            .map(|stored| self.make_live(stored)))
    }

    /// Reads the entries `session`'s copy did not read yet (loaded with its head only), if any,
    /// and its answered approvals: what every reader of a whole list of it (the model's step, a
    /// page, the start of a turn) does first, so the copy is whole afterwards. The rows read are exactly the ones the copy left (positions before its
    /// first entry read), in one snapshot; on a shared database only if no other instance
    /// committed the chat since this one last read or wrote it (else a conflict).
    pub async fn read_entries(&self, session: &Session) -> Result<(), StoreError> {
        let lens = {
            let state = session.state();
            [
                state.record.history.unread(),
                state.record.messages.unread(),
            ]
        };
        if lens != [0, 0] {
            let [history, messages] = self.store.read_entries(&session.id, lens).await?;
            let mut state = session.state();
            let record = &mut state.record;
            let missing = |e: crate::agent::journal::MissingEntries| {
                StoreError::caused_by(
                    format!("chat {}: its stored entries changed", session.id),
                    e,
                )
            };
            // Another reader may have filled them meanwhile (then this changes nothing), and a
            // list may have been shortened since (then the rows before its new end are its own).
            record.history.fill(history).map_err(missing)?;
            record.messages.fill(messages).map_err(missing)?;
        }
        // A whole copy has all its answered approvals too.
        self.read_resolutions(session, None).await
    }

    /// Reads the answered approvals of `approvals` (`None`: all) that `session`'s copy (loaded
    /// with its head only, [`crate::agent::journal::Keyed::by_key`]) does not know yet: what an
    /// answer does before the gate judges it, with the ids it names, so a late, repeated or
    /// echoed answer is judged against how each was resolved. Nothing when the copy has them
    /// all. On a shared database only if no other instance committed the chat since this one
    /// last read or wrote it (else a conflict).
    pub async fn read_resolutions(
        &self,
        session: &Session,
        approvals: Option<&[String]>,
    ) -> Result<(), StoreError> {
        let unread = {
            let state = session.state();
            let resolved = &state.record.resolved_approvals;
            if resolved.is_whole() {
                return Ok(());
            }
            match approvals {
                Some(ids) => Some(resolved.unread_of(ids)).filter(|ids| !ids.is_empty()),
                None => None,
            }
        };
        if approvals.is_some() && unread.is_none() {
            return Ok(());
        }
        let json = self
            .store
            .read_resolutions(&session.id, unread.as_deref())
            .await?;
        let found = crate::agent::store::encode::decode_resolutions(&session.id, &json)?;
        session
            .state()
            .record
            .resolved_approvals
            .fill(unread, found);
        Ok(())
    }

    /// Whether chat `chat_id` exists (`None`: not) and whose it is: from its copy in memory,
    /// else from the store's one row, without loading the chat (its entries grow with it, ADR
    /// 0038). An owner, once set, never changes, so any copy that has one knows it; a copy
    /// without one asks the store (another instance may have given it one).
    pub async fn chat_owner(&self, chat_id: &str) -> Result<Option<Option<String>>, StoreError> {
        if let Some(session) = self.live_session(chat_id) {
            let owner = session.state().record.owner.clone();
            if owner.is_some() || !self.store.shared() {
                return Ok(Some(owner));
            }
            return Ok(Some(self.store.chat_owner(chat_id).await?.flatten()));
        }
        self.store.chat_owner(chat_id).await
    }

    /// Loads of one chat go one at a time, so a load that read an older record never replaces
    /// the copy of one that read a newer: each reads after the previous copy is live, and a
    /// copy leaves memory only once the store has it (a parked turn's, [`Runtime::release_parked`])
    /// or once it is out of date (a shared database). Alone on its database an instance needs
    /// the gate too: a read on its way while a copy is loaded, changed, committed and let go
    /// would otherwise go live after it. One uncontended lock per load.
    async fn load_gate(&self, chat_id: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let gate = {
            let mut gates = lock(&self.load_gates);
            if gates.len() >= LOAD_GATES_CLEANUP {
                gates.retain(|_, gate| Arc::strong_count(gate) > 1);
            }
            gates.entry(chat_id.to_owned()).or_default().clone()
        };
        gate.lock_owned().await
    }

    /// Whether a load of `chat_id` is under way (its copy here may be between two).
    fn loading(&self, chat_id: &str) -> bool {
        lock(&self.load_gates)
            .get(chat_id)
            .is_some_and(|gate| Arc::strong_count(gate) > 1)
    }

    /// The session of `chat_id` in memory, unless another instance sharing the database has
    /// committed it since (ADR 0025): then this instance's copy leaves memory — when no task
    /// drives a turn of it here — and the caller loads the database's. A copy a task still
    /// drives stays; its commits are refused as conflicts, and the next request reads again.
    async fn current_live_session(
        self: &Arc<Self>,
        chat_id: &str,
    ) -> Result<Option<Arc<Session>>, StoreError> {
        let Some(session) = self.live_session(chat_id) else {
            return Ok(None);
        };
        if !self.store.shared() || session.has_task() {
            return Ok(Some(session));
        }
        // A turn running elsewhere is read again every time (its instance may have stopped:
        // then this one takes it over).
        if !session.runs_elsewhere() && !self.store.stale(chat_id).await? {
            return Ok(Some(session));
        }
        tracing::debug!(session = %chat_id, "changed by another instance: reading it again");
        self.forget_overtaken(&session).await;
        Ok(None)
    }

    /// Lets `session`, out of date, leave memory ([`Runtime::forget_live`]) for good: once the
    /// commits of it on their way are done, it never commits again — the copy read next makes
    /// the store expect the newer version, which this one would write over.
    pub(crate) async fn forget_overtaken(&self, session: &Arc<Session>) {
        session.overtaken().await;
        self.forget_live(session);
    }

    /// Lets `session` leave memory if it is still the live one of its chat (a copy another
    /// instance overtook: the next request loads the database's).
    pub(crate) fn forget_live(&self, session: &Arc<Session>) {
        if let Some(old) = self.live.remove_if_current(session) {
            self.let_go(&old);
        }
    }

    /// The session of `chat_id` if it is in memory (never loads one).
    pub fn live_session(&self, chat_id: &str) -> Option<Arc<Session>> {
        self.live.get(chat_id)
    }

    /// Makes a loaded session live — unless another request made it live meanwhile: that one
    /// is kept.
    fn make_live(self: &Arc<Self>, stored: StoredSession) -> Arc<Session> {
        let StoredSession {
            record,
            paused_log,
            elsewhere,
            followed_log,
        } = stored;
        let (session, fresh) = self.live.get_or_insert(record);
        if fresh {
            self.revive(&session, paused_log, elsewhere, followed_log);
            self.inbox.sync_loaded(&session.state().record);
        }
        session
    }

    /// The approval `approval_id` of `chat` as it stands right after an answer given here: the
    /// chat's record in memory when this instance holds it (an answer that lets a call run is
    /// committed with the call's result, a moment later), else the store's.
    pub async fn waiting_after_answer(
        &self,
        chat: &str,
        approval_id: &str,
    ) -> Result<Option<super::inbox::Waiting>, StoreError> {
        if let Some(session) = self.live_session(chat) {
            return Ok(super::inbox::waiting_of(&session.state().record)
                .into_iter()
                .find(|w| w.approval_id == approval_id));
        }
        self.inbox.waiting(approval_id).await
    }

    /// Whether a chat in memory other than `chat_id` waits for approval `approval_id`.
    pub(crate) fn live_chat_waits_for(&self, approval_id: &str, chat_id: &str) -> bool {
        self.live
            .any_other(chat_id, |s| s.has_pending_approval(approval_id))
    }

    /// How many sessions are in memory.
    pub fn live_sessions(&self) -> usize {
        self.live.len()
    }

    /// How many turns a task of this instance drives now (`/metrics`).
    pub fn turns_running(&self) -> usize {
        self.live
            .all()
            .iter()
            .filter(|session| session.has_task())
            .count()
    }

    /// How many times a session left memory since the runtime started.
    pub fn released_sessions(&self) -> u64 {
        self.released.load(Ordering::Relaxed)
    }

    /// Ids of the stored chats, most recent first.
    pub async fn list_sessions(&self) -> Result<Vec<String>, StoreError> {
        self.store.list().await
    }
}
