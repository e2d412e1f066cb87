//! Sessions: one per chat id, owning the conversation, the wallet, the current turn with its
//! pending approvals and browser calls, and the log of the chunks that turn emitted.
//!
//! The serialisable part is [`SessionRecord`] (what a [`SessionStore`] keeps); the live part is
//! [`Session`] (the record behind a mutex, the running turn's task, its chunk log and a wake-up
//! signal). Person input — approval answers and browser-tool results — is validated and applied
//! under the session lock, all or nothing, before the turn task is woken: a caller learns at once
//! whether its answer was accepted, and a rejected answer changes nothing.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::journal::{Entries, Keyed};
pub(crate) use super::lock;
use super::{
    clock::Millis,
    gate::{
        Against, Answered, ApprovalDecision, ApprovalResolution, CallPhase, Gate, InputError,
        PersonInput, Signer, StepCall, stale,
    },
    history::HistoryItem,
    model::Usage,
    policy::Policy,
    runtime::TextTiming,
    tools::{ToolEffects, ToolLocation, ToolRegistry, Wallet},
};
use crate::protocol::{UiMessage, audit::AuditEvent};

mod input;
mod log;
pub use input::{AppliedInput, EndedMeanwhile, Undo};
pub use log::{LogReader, Read, TurnEntry, TurnLog};

/// Where a turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// The model is generating or tools are running.
    Running,
    /// Nothing can happen until the person answers an approval or the browser sends a result.
    AwaitingPerson,
    Finished,
    Interrupted,
    Failed,
}

impl TurnStatus {
    pub fn is_over(self) -> bool {
        matches!(
            self,
            TurnStatus::Finished | TurnStatus::Interrupted | TurnStatus::Failed
        )
    }
}

/// Text generated in a step that was not the last one, held back until the final response
/// (ADR 0004: a response that ends waiting for the person carries no text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldText {
    pub id: String,
    pub text: String,
}

/// The current (or last) turn of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub id: String,
    /// The assistant UI message this turn writes (reused by every continuation).
    pub message_id: String,
    pub status: TurnStatus,
    /// Model steps completed so far.
    pub steps: u32,
    /// The tool calls of the latest step, until their results are in the history.
    pub calls: Vec<StepCall>,
    /// Text held back in hold mode (ADR 0004).
    pub held_text: Vec<HeldText>,
    pub usage: Usage,
    /// Bumped by every change made to the waiting turn from outside its task (an accepted
    /// person input, signatures a change of people dropped), so the turn knows a waiting
    /// response must end and does not park on what it read before the change.
    pub inputs: u64,
    /// The transport that started the turn: kept so a turn resumed after a restart answers with
    /// the same model and is logged the same.
    #[serde(default)]
    pub transport: super::Transport,
    /// The text timing the turn was started with (ADR 0004), kept for a resumed turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<TextTiming>,
}

impl TurnRecord {
    pub fn call(&self, tool_call_id: &str) -> Option<&StepCall> {
        self.calls.iter().find(|c| c.call.id == tool_call_id)
    }

    /// The approval ids still waiting for an answer.
    pub fn pending_approvals(&self) -> Vec<&str> {
        self.calls
            .iter()
            .filter_map(|c| match &c.phase {
                CallPhase::AwaitingApproval { approval_id, .. } => Some(approval_id.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Everything a session is, in a form a store can keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub created_at_ms: Millis,
    pub updated_at_ms: Millis,
    /// The conversation as the model sees it.
    pub history: Entries<HistoryItem>,
    /// The conversation as the person sees it (the server's own reduction of what it sent).
    pub messages: Entries<UiMessage>,
    pub wallet: Wallet,
    /// What tools keep between calls, by tool name, as the tool encoded it
    /// ([`ToolContext::with_state`](super::tools::ToolContext::with_state)).
    #[serde(default)]
    pub tool_state: BTreeMap<String, Value>,
    pub turn: Option<TurnRecord>,
    /// Approvals already answered (or expired), so a late or repeated answer gets a precise error.
    pub resolved_approvals: Keyed<String, ApprovalResolution>,
    /// Whose chat it is: the person who started it (`None`: the one local person). They ask
    /// for its calls; a rule may want someone else to countersign them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl SessionRecord {
    pub fn new(id: impl Into<String>, now_ms: Millis) -> Self {
        SessionRecord {
            id: id.into(),
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            history: Entries::default(),
            messages: Entries::default(),
            wallet: Wallet::default(),
            tool_state: BTreeMap::new(),
            turn: None,
            resolved_approvals: Keyed::default(),
            owner: None,
        }
    }

    /// The growing parts count as written (see [`Session::to_commit`]).
    pub(crate) fn mark_committed(&mut self) {
        self.history.mark_committed();
        self.messages.mark_committed();
        self.wallet.transactions.entries_mut().mark_committed();
        self.resolved_approvals.mark_committed();
    }

    /// What `failed` (a copy of this record whose commit failed) changed is still to be written.
    pub(crate) fn mark_uncommitted(&mut self, failed: &SessionRecord) {
        self.history.mark_uncommitted(&failed.history);
        self.messages.mark_uncommitted(&failed.messages);
        self.wallet
            .transactions
            .entries_mut()
            .mark_uncommitted(failed.wallet.transactions.entries());
        self.resolved_approvals
            .mark_uncommitted(&failed.resolved_approvals);
    }

    /// Every growing part counts as changed: the next commit writes the whole record.
    pub(crate) fn mark_all_changed(&mut self) {
        self.history.mark_all_changed();
        self.messages.mark_all_changed();
        self.wallet.transactions.entries_mut().mark_all_changed();
        self.resolved_approvals.mark_all_changed();
    }

    /// Whose chat it is (`local` for the one local person).
    pub fn owner(&self) -> &str {
        Self::owner_of(self.owner.as_deref())
    }

    /// Whose chat it is, from its stored owner (`None`: a chat from before chats had owners, or
    /// one nobody used yet: the local person's).
    fn owner_of(owner: Option<&str>) -> &str {
        owner.unwrap_or(crate::protocol::countersign::LOCAL_PERSON)
    }

    /// What a client's resent answers are judged against ([`crate::agent::gate::Held`]).
    pub fn held(&self) -> crate::agent::gate::Held<'_> {
        crate::agent::gate::Held {
            turn: self
                .turn
                .as_ref()
                .map(|t| (t.message_id.as_str(), t.calls.as_slice())),
            resolved: &self.resolved_approvals,
            messages: &self.messages,
        }
    }

    /// Whether nobody has used the chat yet: no owner, nothing said, no turn. The first person
    /// to start a turn in it owns it; until then it is, to everyone, a chat that does not exist.
    pub fn is_untouched(&self) -> bool {
        self.owner.is_none()
            && self.messages.is_empty()
            && self.history.is_empty()
            && self.turn.is_none()
    }

    /// Who may touch this chat (read it, continue it, stop it, answer in it): its owner, and
    /// nobody else (ADR 0024). A chat from before chats had owners is the local person's.
    /// `principal` is a principal's id ([`crate::agent::people::Principal::id`]). The one home of
    /// this rule: every route and the runtime ask it.
    pub fn owned_by(&self, principal: &str) -> bool {
        Self::stored_owner_is(self.owner.as_deref(), principal)
    }

    /// [`SessionRecord::owned_by`] from the chat's stored owner alone
    /// ([`crate::agent::store::SessionStore::chat_owner`]): the check without reading the chat.
    pub fn stored_owner_is(owner: Option<&str>, principal: &str) -> bool {
        Self::owner_of(owner) == principal
    }

    /// Whether `principal` may start a turn in this chat: theirs, or one nobody used yet
    /// (which the turn makes theirs).
    pub fn open_to(&self, principal: &str) -> bool {
        self.is_untouched() || self.owned_by(principal)
    }
}

/// The running turn of a live session.
pub(crate) struct LiveTurn {
    pub log: Arc<TurnLog>,
    pub cancel: CancellationToken,
    pub interrupt_reason: Arc<Mutex<Option<String>>>,
    /// The task driving the turn; `None` while the turn is parked.
    pub task: Option<tokio::task::JoinHandle<()>>,
    /// Set while the turn waits for the person with no task at all (ADR 0010): the record and
    /// the log are the whole turn; person input, an interrupt or the next deadline start a
    /// task again where this one stopped.
    pub parked: Option<Parked>,
    /// How many entries of `log` the store has (committed with the record at the last pause):
    /// a parked turn whose whole log is stored can leave memory (ADR 0011).
    pub saved: usize,
    /// The turn runs on another instance sharing the database (ADR 0025): this is a copy to
    /// follow, as of its last commit there; nothing here drives it.
    pub elsewhere: bool,
    /// What the person said while the turn waited for them, to be answered inside it (ADR
    /// 0035's asides): the driver takes them in order, under this lock.
    pub asides: std::collections::VecDeque<crate::agent::turn::Aside>,
}

/// Where a parked turn stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parked {
    /// The record's input count when the turn paused: input since then is news to it.
    pub inputs: u64,
}

/// A live session: its state behind one lock ([`Session::state`]), the signal that wakes its
/// turn, and whether memory is ahead of the store.
pub struct Session {
    pub id: String,
    state: Mutex<SessionState>,
    /// Wakes the turn task: person input arrived.
    wake: Notify,
    /// The last commit of this session failed: memory is ahead of the store, so the session
    /// must stay in memory.
    dirty: std::sync::atomic::AtomicBool,
    /// True once this copy left memory because it was out of date (another instance committed
    /// the chat, ADR 0025): a newer copy is read next, and the store's version of the chat on
    /// this instance becomes the newer copy's — so this copy must never commit again (it would
    /// write over what it never saw). Commits hold it shared while they write; the runtime
    /// sets it holding it alone, so no commit of this copy is on its way when the newer copy
    /// is read ([`Session::overtaken`]).
    overtaken: tokio::sync::RwLock<bool>,
    /// One write at a time ([`Session::writes`]): a commit of the record, or an outside change
    /// from its apply to its commit (an answer, signatures a change of people dropped).
    writes: Arc<tokio::sync::Mutex<()>>,
    /// Told whenever an answer in flight settles ([`Session::state_without_answer_in_flight`]).
    settled: Notify,
}

/// The right to write a session, held from an outside change's apply to its commit: no other
/// commit of the session takes the change while it may still be taken back
/// ([`Session::writes`]).
pub(crate) struct Writing {
    _held: tokio::sync::OwnedMutexGuard<()>,
}

/// What a live session holds, all under its one lock.
pub(crate) struct SessionState {
    pub(crate) record: SessionRecord,
    /// The current turn's task, log and cancellation, once one was started or revived.
    pub(crate) live: Option<LiveTurn>,
    /// Audit events of changes applied but not committed yet (an answer the turn commits with
    /// the result of the tool it approved, see [`ToolEffects::InRecord`]; events a failed
    /// commit gave back): the next commit carries them first ([`crate::agent::commit`]).
    unsaved_audit: Vec<AuditEvent>,
    /// Answers applied ([`Session::apply`]) whose commit, or hand-over to the turn, is not done
    /// yet. The turn starts no call while there is one: a call an answer cleared runs only once
    /// that answer is recorded (or its audit is with the turn's own commit), never in between,
    /// where a failed commit would take back an approval whose call already ran.
    answers_in_flight: usize,
}

impl SessionState {
    /// Whether an applied answer is not yet committed or handed over (its calls wait).
    pub(crate) fn answer_in_flight(&self) -> bool {
        self.answers_in_flight > 0
    }
}

/// Where a caller should read the turn's output after submitting input.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub log: Arc<TurnLog>,
    /// The log position at the moment the input was applied: everything the input causes comes
    /// after it.
    pub from: usize,
    pub message_id: String,
    /// The turn the input went to.
    pub turn_id: String,
}

impl Session {
    pub fn new(record: SessionRecord) -> Self {
        Session {
            id: record.id.clone(),
            state: Mutex::new(SessionState {
                record,
                live: None,
                unsaved_audit: Vec::new(),
                answers_in_flight: 0,
            }),
            wake: Notify::new(),
            dirty: std::sync::atomic::AtomicBool::new(false),
            overtaken: tokio::sync::RwLock::new(false),
            writes: Arc::new(tokio::sync::Mutex::new(())),
            settled: Notify::new(),
        }
    }

    /// The session's state, locked once no answer is in flight: for an outside change (dropped
    /// signatures) that must not touch calls an answer may still take back. Answers applied
    /// after it see the change.
    pub(crate) async fn state_without_answer_in_flight(
        &self,
    ) -> std::sync::MutexGuard<'_, SessionState> {
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            {
                let state = self.state();
                if !state.answer_in_flight() {
                    return state;
                }
            }
            settled.await;
        }
    }

    /// One answer in flight less: the turn may act on the calls again.
    fn answer_settled(&self, state: &mut SessionState) {
        state.answers_in_flight = state.answers_in_flight.saturating_sub(1);
        self.settled.notify_waiters();
    }

    /// Waits for the right to write this session: every commit holds it while it reads and
    /// writes the record ([`crate::agent::commit`]), and an outside change (an answer, dropped
    /// signatures) holds it from its apply to its commit. So a commit never writes a change
    /// that may still be taken back: the turn committing while an answer's commit is out would
    /// otherwise put the answer on disk without its audit, and keep it there if the answer's own
    /// commit then failed (the answer taken back in memory only).
    pub(crate) async fn writes(&self) -> Writing {
        Writing {
            _held: self.writes.clone().lock_owned().await,
        }
    }

    /// Marks this copy out of date for good, once the commits of it on their way are done (see
    /// the field `overtaken`).
    pub(crate) async fn overtaken(&self) {
        *self.overtaken.write().await = true;
    }

    /// While the guard lives, this copy is not marked out of date; `None` when it is.
    pub(crate) async fn current(&self) -> Option<tokio::sync::RwLockReadGuard<'_, bool>> {
        let guard = self.overtaken.read().await;
        (!*guard).then_some(guard)
    }

    /// The session's state, locked. Hold the guard briefly and never across an `.await`; the
    /// one lock means there is no order to keep.
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        lock(&self.state)
    }

    /// A future that completes when person input wakes the turn.
    pub(crate) fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.wake.notified()
    }

    /// Records whether the last commit of this session failed.
    pub(crate) fn set_dirty(&self, dirty: bool) {
        self.dirty.store(dirty, std::sync::atomic::Ordering::SeqCst);
    }

    /// Hands an applied answer to the turn: its `events` go with the turn's next commit (after
    /// those already waiting), in the same step as the answer stops holding the turn's calls
    /// back, so no call it cleared can be committed without them.
    pub(crate) fn hand_over_answer(&self, events: Vec<AuditEvent>) {
        let mut state = self.state();
        state.unsaved_audit.extend(events);
        self.answer_settled(&mut state);
    }

    /// An applied answer is committed (or its session is given up): the calls it cleared may
    /// run. The caller wakes the turn.
    pub(crate) fn settle_answer(&self) {
        let mut state = self.state();
        self.answer_settled(&mut state);
    }

    /// Puts `events` back before those waiting for the next commit (a commit that failed).
    pub(crate) fn give_back_audit(&self, events: Vec<AuditEvent>) {
        self.state().unsaved_audit.splice(0..0, events);
    }

    /// The record to commit and the audit events waiting for a commit (taken), read together.
    /// The copy shares the record's growing parts ([`Entries`], [`Keyed`]) and carries what
    /// changed in them since the last commit; the record itself counts as committed from here
    /// on, until [`Session::commit_failed`] gives the copy's changes back. After a failed commit
    /// the next one writes everything again.
    pub(crate) fn to_commit(&self) -> (SessionRecord, Vec<AuditEvent>) {
        let mut state = self.state();
        let waiting = std::mem::take(&mut state.unsaved_audit);
        let record = &mut state.record;
        if self.dirty.load(std::sync::atomic::Ordering::SeqCst) {
            record.mark_all_changed();
        }
        let copy = record.clone();
        record.mark_committed();
        (copy, waiting)
    }

    /// The commit of `record` (from [`Session::to_commit`]) failed: what it changed is still to
    /// be written.
    pub(crate) fn commit_failed(&self, record: &SessionRecord) {
        self.state().record.mark_uncommitted(record);
    }

    /// Whether nothing happens in this session and memory holds nothing the store lacks: no
    /// turn running or waiting, no turn task alive, no answer waiting for its commit, and the
    /// last commit succeeded. Returns the identity of the last turn's log (`0`: none), so a
    /// caller can tell a session that stayed idle from one that ran a turn meanwhile.
    pub(crate) fn idle_turn(&self) -> Option<usize> {
        let state = self.state();
        if self.dirty.load(std::sync::atomic::Ordering::SeqCst) || !state.unsaved_audit.is_empty() {
            return None;
        }
        if state
            .record
            .turn
            .as_ref()
            .is_some_and(|t| !t.status.is_over())
        {
            return None;
        }
        match state.live.as_ref() {
            None => Some(0),
            Some(turn)
                if turn.log.is_ended()
                    && turn.task.as_ref().is_none_or(|task| task.is_finished()) =>
            {
                Some(Arc::as_ptr(&turn.log) as usize)
            }
            Some(_) => None,
        }
    }

    /// [`SessionRecord::owned_by`], on the record as it is now.
    pub fn owned_by(&self, principal: &str) -> bool {
        self.state().record.owned_by(principal)
    }

    /// A copy of the record, for the store and for `load_session`.
    pub fn snapshot(&self) -> SessionRecord {
        self.state().record.clone()
    }

    /// Whether every one of `resolutions` approved a server call that is now ready to run and
    /// whose effects stay in this record ([`ToolEffects::InRecord`]): such answers need no
    /// commit of their own, the turn commits them with the call's result.
    pub fn runs_in_record(
        &self,
        resolutions: &[(String, ApprovalResolution)],
        tools: &ToolRegistry,
    ) -> bool {
        let state = self.state();
        let Some(turn) = state.record.turn.as_ref() else {
            return false;
        };
        !resolutions.is_empty()
            && resolutions.iter().all(|(approval_id, resolution)| {
                matches!(resolution, ApprovalResolution::Approved { .. })
                    && turn.calls.iter().any(|call| {
                        call.gated_by.as_deref() == Some(approval_id.as_str())
                            && call.location == ToolLocation::Server
                            && matches!(call.phase, CallPhase::Ready { .. })
                            && tools
                                .get(&call.call.name)
                                .is_some_and(|t| t.spec.effects == ToolEffects::InRecord)
                    })
            })
    }

    /// Runs `f` on the wallet under the session lock.
    pub fn with_wallet<R>(&self, f: impl FnOnce(&mut Wallet) -> R) -> R {
        f(&mut self.state().record.wallet)
    }

    /// Runs `f` on what `tool` keeps in this session (`None` before its first call; leaving
    /// `None` forgets it), under the session lock.
    pub fn with_tool_state<R>(&self, tool: &str, f: impl FnOnce(&mut Option<Value>) -> R) -> R {
        let mut state = self.state();
        let kept = &mut state.record.tool_state;
        let mut slot = kept.remove(tool);
        let result = f(&mut slot);
        if let Some(value) = slot {
            kept.insert(tool.to_owned(), value);
        }
        result
    }

    /// Whether a task drives the current turn now (it is running, not parked or over).
    pub fn has_task(&self) -> bool {
        self.state()
            .live
            .as_ref()
            .and_then(|t| t.task.as_ref())
            .is_some_and(|task| !task.is_finished())
    }

    /// Whether the current turn runs on another instance (this copy only follows it).
    pub fn runs_elsewhere(&self) -> bool {
        self.state().live.as_ref().is_some_and(|t| t.elsewhere)
    }

    /// Whether the current turn waits for the person with no task driving it (ADR 0010).
    pub fn is_parked(&self) -> bool {
        self.state()
            .live
            .as_ref()
            .is_some_and(|t| t.parked.is_some() && t.task.is_none())
    }

    /// The log of the current turn, if one was started since this session went live.
    pub fn current_log(&self) -> Option<Arc<TurnLog>> {
        self.state().live.as_ref().map(|t| t.log.clone())
    }

    /// The current turn's id and log, if the session has a live turn.
    pub fn current_turn(&self) -> Option<(String, Arc<TurnLog>)> {
        let state = self.state();
        Some((
            state.record.turn.as_ref()?.id.clone(),
            state.live.as_ref()?.log.clone(),
        ))
    }

    /// Whether memory holds nothing of this session that the store lacks while its turn waits
    /// for the person: parked (no task), its whole log committed with the record, no answer
    /// waiting for a commit, and the last commit succeeded (ADR 0011).
    pub(crate) fn parked_and_stored(&self) -> bool {
        let state = self.state();
        if self.dirty.load(std::sync::atomic::Ordering::SeqCst) || !state.unsaved_audit.is_empty() {
            return false;
        }
        state.live.as_ref().is_some_and(|turn| {
            turn.parked.is_some() && turn.task.is_none() && turn.saved == turn.log.len()
        })
    }

    /// The current (or last) turn's token usage so far.
    pub fn turn_usage(&self) -> Option<Usage> {
        self.state().record.turn.as_ref().map(|t| t.usage)
    }

    /// Whether a turn is generating right now (not waiting for the person, not over).
    pub fn turn_status(&self) -> Option<TurnStatus> {
        self.state().record.turn.as_ref().map(|t| t.status)
    }

    /// Applies approval answers and browser results, all or nothing, judged by the gate with
    /// the policy as it is now, for `signer` (who answers) in the chat of `requester`. The
    /// caller commits the record, then wakes the turn ([`Session::wake`]) — or undoes the input
    /// when the commit fails ([`Session::undo`]).
    pub fn apply(
        &self,
        inputs: &[PersonInput],
        tools: &ToolRegistry,
        policy: &Policy,
        now_ms: Millis,
        signer: &Signer,
        requester: &crate::agent::policy::Requester,
    ) -> Result<AppliedInput, InputError> {
        let mut state = self.state();
        let SessionState {
            record,
            live,
            answers_in_flight,
            ..
        } = &mut *state;
        let wallet = crate::agent::policy::ChatWallet::of(&record.wallet);
        let SessionRecord {
            turn,
            resolved_approvals,
            ..
        } = record;
        let (Some(log), Some(turn)) = (
            live.as_ref().map(|t| t.log.clone()),
            turn.as_mut().filter(|t| !t.status.is_over()),
        ) else {
            return Err(stale(inputs, resolved_approvals));
        };

        // Decided on a copy; applied only if every input is acceptable.
        let mut decider = policy.decider(tools, &self.id, requester, wallet);
        let Answered {
            calls,
            resolutions,
            grants,
            signed,
            proposed,
        } = Gate::new(tools).answer(
            Some(&turn.calls),
            inputs,
            Against {
                resolved: resolved_approvals,
                now: now_ms,
                policy: &mut decider,
                signer,
                requester: &requester.id,
            },
        )?;
        drop(decider);
        let undo = Undo {
            turn_id: turn.id.clone(),
            calls: std::mem::replace(&mut turn.calls, calls.clone()),
            applied_calls: calls,
            inputs: turn.inputs,
            resolved: resolutions.clone(),
        };
        turn.inputs += 1;
        let message_id = turn.message_id.clone();
        let turn_id = turn.id.clone();
        for (id, resolution) in &resolutions {
            resolved_approvals.insert(id.clone(), resolution.clone());
        }
        record.updated_at_ms = now_ms;
        let from = log.len();
        *answers_in_flight += 1;
        Ok(AppliedInput {
            receipt: Receipt {
                log,
                from,
                message_id,
                turn_id,
            },
            resolutions,
            grants,
            signed,
            proposed,
            undo,
        })
    }

    /// Takes back input applied by [`Session::apply`] whose commit failed. Each call the input
    /// changed goes back to how it was, unless the turn changed it since (a withdrawal or an
    /// interrupt ended it: that stands; the turn starts no call the input cleared, and neither
    /// expires nor rechecks calls, while the input is in flight). Each approval it resolved is
    /// open again unless the turn resolved it otherwise since.
    ///
    /// Returns the approvals whose calls the turn ended meanwhile (seeing them cleared, it
    /// recorded nothing of their approval): the caller records how each ended.
    pub fn undo(&self, undo: Undo) -> Vec<EndedMeanwhile> {
        let mut state = self.state();
        self.answer_settled(&mut state);
        undo.take_back_from(&self.id, &mut state.record)
    }

    /// Wakes the turn task: person input was applied (and committed).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Whether this session has a pending approval with this id (used to tell a forged id from
    /// another chat's).
    pub fn has_pending_approval(&self, approval_id: &str) -> bool {
        self.state()
            .record
            .turn
            .as_ref()
            .is_some_and(|t| t.pending_approvals().contains(&approval_id))
    }

    /// Cancels the running turn (Stop / Esc / interrupt frame). Returns false when no turn was
    /// running or waiting.
    pub fn interrupt(&self, reason: impl Into<String>) -> bool {
        let state = self.state();
        match state.live.as_ref() {
            Some(turn) if !turn.cancel.is_cancelled() && !turn.log.is_ended() => {
                *lock(&turn.interrupt_reason) = Some(reason.into());
                turn.cancel.cancel();
                true
            }
            _ => false,
        }
    }
}

/// Turns an approval decision into the answer the AI SDK wire carries (for tests and logs).
pub fn decision_summary(decision: &ApprovalDecision) -> (bool, Option<&Value>) {
    match decision {
        ApprovalDecision::Approve => (true, None),
        ApprovalDecision::ApproveWithEdits { args } => (true, Some(args)),
        ApprovalDecision::ApproveAndGrant { args, .. } => (true, args.as_ref()),
        ApprovalDecision::Deny { .. } | ApprovalDecision::Dismiss => (false, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(owner: Option<&str>) -> SessionRecord {
        let mut record = SessionRecord::new("c", 0);
        record.owner = owner.map(str::to_owned);
        record
    }

    #[test]
    fn a_chat_is_its_owners_only() {
        use crate::protocol::countersign::LOCAL_PERSON as LOCAL;
        assert!(
            owned(None).owned_by(LOCAL),
            "chats from before owners are the local person's"
        );
        assert!(owned(Some(LOCAL)).owned_by(LOCAL));
        assert!(!owned(Some("p1")).owned_by(LOCAL));
        assert!(owned(Some("p1")).owned_by("p1"));
        assert!(!owned(None).owned_by("p1"));
        assert!(!owned(Some("p2")).owned_by("p1"));
    }

    #[test]
    fn a_turn_may_start_in_ones_own_chat_or_an_untouched_one() {
        let untouched = SessionRecord::new("c", 0);
        assert!(untouched.open_to("p1") && untouched.open_to("local"));
        let mut used = owned(None);
        used.history.push(HistoryItem::User {
            text: "hi".into(),
            attachments: Vec::new(),
        });
        assert!(used.open_to("local"));
        assert!(!used.open_to("p1"));
        assert!(!owned(Some("p2")).open_to("p1"));
    }

    #[test]
    fn submitting_without_a_turn_is_rejected() {
        let session = Session::new(SessionRecord::new("s", 0));
        let err = session
            .apply(
                &[PersonInput::Approval {
                    approval_id: "x".into(),
                    decision: ApprovalDecision::Approve,
                    step_up: None,
                }],
                &ToolRegistry::default(),
                &Policy::default(),
                0,
                &Signer::local(),
                &crate::agent::policy::Requester::local(),
            )
            .unwrap_err();
        assert_eq!(err, InputError::NoActiveTurn);
    }
}
