//! How sessions come and go from memory: a loaded session's turn revived (ADR 0011), parked
//! turns woken at their deadlines (ADR 0010), parked sessions released, idle ones evicted, the
//! logs a reader still holds kept.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex, OnceLock, atomic::Ordering},
    time::Duration,
};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Runtime;
use crate::agent::turn::TurnPlan;
use crate::agent::{
    clock::{Millis, until},
    gate::{CallPhase, next_deadline},
    history::Outcome,
    questions,
    session::{
        LiveTurn, Parked, Session, SessionRecord, SessionState, TurnEntry, TurnLog, TurnStatus,
        lock,
    },
    store::StoreError,
    tools::ToolEffects,
};

/// See [`Runtime::release_parked`].
#[derive(Default)]
pub(super) struct ReleaseLater {
    chats: Mutex<BTreeSet<String>>,
    added: Notify,
    task: OnceLock<()>,
}

/// How long after a deadline another instance takes up the turn (its own instance's timer
/// fires first when that instance is alive).
pub const OVERDUE_GRACE_MS: Millis = 2_000;

/// What a reader following a turn another instance ran is told when that instance stopped and
/// this one takes the turn over.
pub const TAKEN_OVER: &str = "The server that was running this turn stopped; another server \
    goes on with it from its last saved step. Reload the chat to follow it.";

/// How long a parked session that something still held waits before it is tried again.
const RELEASE_RETRY: Duration = Duration::from_millis(200);

/// The deadlines of parked turns (ADR 0010): one timer task for the runtime instead of a
/// sleeping task per turn waiting for a person. By chat id: a parked session may have left
/// memory (ADR 0011), and the timer brings it back.
#[derive(Default)]
pub(super) struct Deadlines {
    /// (deadline, chat) for every parked turn that must wake then.
    queue: Mutex<BTreeSet<(Millis, String)>>,
    /// An earlier deadline was added: the timer sleeps too long.
    earlier: Notify,
    timer: OnceLock<()>,
}

impl Runtime {
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
    ///
    /// On a database several instances share (ADR 0025), a turn another live instance runs
    /// (`elsewhere`) is not resumed: the session gets a copy of its log as of its last commit
    /// there (`followed_log`) for readers here to follow; so does a turn that is over.
    pub(super) fn revive(
        self: &Arc<Self>,
        session: &Arc<Session>,
        paused_log: Option<Vec<TurnEntry>>,
        elsewhere: bool,
        followed_log: Option<Vec<TurnEntry>>,
    ) {
        let mut state = session.state();
        let SessionState { record, live, .. } = &mut *state;
        if live.is_some() {
            return;
        }
        let over = record.turn.as_ref().is_some_and(|t| t.status.is_over());
        if elsewhere || (over && followed_log.is_some()) {
            *live = Some(self.followed_turn(&session.id, followed_log, over, elsewhere));
            return;
        }
        self.restart_cut_short(&session.id, record);
        if self.revive_parked(session, record, live, paused_log) {
            return;
        }
        self.resume_revived(session, record, live);
    }

    /// A turn no task here drives, for readers here to follow: one another instance runs
    /// (`elsewhere`), or one that is `over`; its log as of its last commit (`followed_log`).
    fn followed_turn(
        &self,
        chat: &str,
        followed_log: Option<Vec<TurnEntry>>,
        over: bool,
        elsewhere: bool,
    ) -> LiveTurn {
        let mut entries = followed_log.unwrap_or_default();
        if over {
            // The end is logged after the last commit.
            entries.push(TurnEntry::End);
        }
        let log = self.adopt_log(chat, entries);
        if elsewhere {
            // Its text, token by token, for as long as the log is followed here.
            log.hear_with(|| self.store.hear_text(chat));
        }
        LiveTurn {
            saved: log.len(),
            log,
            cancel: CancellationToken::new(),
            interrupt_reason: Arc::new(Mutex::new(None)),
            task: None,
            parked: None,
            elsewhere,
            asides: Default::default(),
        }
    }

    /// What the server's stop cut short in an unfinished turn: its running calls and the
    /// questions they asked.
    fn restart_cut_short(&self, chat: &str, record: &mut SessionRecord) {
        if let Some(turn) = record.turn.as_mut().filter(|t| !t.status.is_over()) {
            // A call that was running when the server stopped runs again (idempotent tools),
            // unless its tool may not be repeated: that one ends saying so.
            for call in &mut turn.calls {
                if let CallPhase::Running { args, edited } = &call.phase {
                    let once = self
                        .tools
                        .get(&call.call.name)
                        .is_some_and(|t| t.spec.effects == ToolEffects::ExternalOnce);
                    call.phase = if once {
                        tracing::warn!(session = %chat, call = %call.call.id, tool = %call.call.name, "a call cut short by the restart is not repeated");
                        CallPhase::Done {
                            outcome: Outcome::Error {
                                message: format!(
                                    "The server restarted while {} was running; it may or may \
                                     not have taken effect, and it was not run again.",
                                    call.call.name
                                ),
                            },
                            edited_args: edited.then(|| args.clone()),
                        }
                    } else {
                        CallPhase::Ready {
                            args: args.clone(),
                            edited: *edited,
                        }
                    };
                }
            }
            // Questions those calls asked died with the server (the calls ask again).
            let message_id = turn.message_id.clone();
            match record.messages.rfind_mut(|m| m.id == message_id) {
                Ok(Some(message)) => {
                    questions::close_stale(message);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(session = %chat, error = %e, "the turn's stored message does not decode")
                }
            }
        }
    }

    /// A turn that waited for the person, with the log the store kept (`paused_log`), comes
    /// back parked; it gets a task at once only if it has something to do. Whether it did.
    fn revive_parked(
        self: &Arc<Self>,
        session: &Arc<Session>,
        record: &SessionRecord,
        live: &mut Option<LiveTurn>,
        paused_log: Option<Vec<TurnEntry>>,
    ) -> bool {
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
            let saved = entries.len();
            let turn_state = live.insert(LiveTurn {
                saved,
                log: self.adopt_log(&session.id, entries),
                cancel: CancellationToken::new(),
                interrupt_reason: Arc::new(Mutex::new(None)),
                task: None,
                parked: Some(Parked {
                    inputs: turn.inputs,
                }),
                elsewhere: false,
                asides: Default::default(),
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
            return true;
        }
        false
    }

    /// An unfinished turn that did not wait for the person gets a task again: it starts its
    /// step again.
    fn resume_revived(
        self: &Arc<Self>,
        session: &Arc<Session>,
        record: &SessionRecord,
        live: &mut Option<LiveTurn>,
    ) {
        let plan = {
            let Some(turn) = record.turn.as_ref().filter(|t| !t.status.is_over()) else {
                return;
            };
            TurnPlan::continuing(record, turn)
        };
        let turn_id = plan.turn_id().to_owned();
        tracing::info!(session = %session.id, turn = %turn_id, "resuming a turn after a restart");
        // Readers here that followed the turn while another instance ran it (ADR 0025) hold a
        // log the resumed turn does not continue (it starts its step again): they are told.
        if let Some(followed) = self
            .held_logs
            .take(&session.id)
            .filter(|log| !log.is_ended())
        {
            followed.push(TurnEntry::Chunk(crate::protocol::Chunk::error(
                TAKEN_OVER.to_owned(),
            )));
            followed.push(TurnEntry::End);
        }
        self.spawn_driver(session, live, plan, None);
    }

    /// The log for a turn coming back from the store with `entries`: the very log a reader may
    /// still hold, caught up with the stored one (output another instance produced meanwhile,
    /// ADR 0025), or a new one.
    fn adopt_log(&self, chat: &str, entries: Vec<TurnEntry>) -> Arc<TurnLog> {
        let held = self.held_logs.take(chat);
        match held {
            Some(log) if log.catch_up_with(&entries) => log,
            _ => Arc::new(TurnLog::restored(entries)),
        }
    }

    /// Resumes the turns the store says this instance takes up (at start-up: every unfinished
    /// one, or on a shared database the orphaned ones). Returns how many. First,
    /// the chats whose waiting approvals were written before the inbox's columns (a migrated
    /// database) are committed again, so the inbox finds them (ADR 0039).
    pub async fn resume_unfinished(self: &Arc<Self>) -> Result<usize, StoreError> {
        for id in self.store.unindexed().await? {
            let session = self.session(&id).await?;
            if let Err(failed) = self.commits.commit(&session, Vec::new(), None).await {
                tracing::warn!(session = %id, error = %failed.error.report(), "cannot index a chat's waiting approvals for the inbox");
            }
            drop(session);
            self.release_parked(&id);
        }
        let ids = self.store.resumable().await?;
        for id in &ids {
            drop(self.session(id).await?);
            // A turn that came back parked waits in the store, not in memory.
            self.release_parked(id);
        }
        Ok(ids.len())
    }

    /// On a database other instances share, every `every` (ADR 0025): takes up turns waiting
    /// for the person whose deadline passed [`OVERDUE_GRACE_MS`] ago — their instance may have
    /// died — so an approval still expires (loading one revives it, and a deadline that passed
    /// wakes it at once; several instances may take the same one: one commit wins), and takes
    /// over running turns whose instance stopped answering (one instance claims each).
    pub fn spawn_overdue_sweeper(self: &Arc<Self>, every: Duration) {
        if !self.store.shared() {
            return;
        }
        let runtime = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                // What other instances paid today counts towards daily limits here too.
                runtime
                    .policy()
                    .catch_up_spending(runtime.clock.now_ms())
                    .await;
                let before = runtime.clock.now_ms() - OVERDUE_GRACE_MS;
                let ids = match runtime.store.overdue(before).await {
                    Ok(ids) => ids,
                    Err(e) => {
                        tracing::warn!(error = %e.report(), "cannot look for overdue turns");
                        continue;
                    }
                };
                // Running turns whose instance stopped answering: loading one takes it over.
                let orphaned = match runtime.store.orphaned().await {
                    Ok(ids) => ids,
                    Err(e) => {
                        tracing::warn!(error = %e.report(), "cannot look for turns whose instance stopped");
                        Vec::new()
                    }
                };
                for id in ids.into_iter().chain(orphaned) {
                    // A copy this instance holds and that is current has its own timer; an
                    // out-of-date one is read again (see `Runtime::session`).
                    tracing::debug!(session = %id, "a turn whose deadline passed or whose instance stopped");
                    match runtime.session(&id).await {
                        Ok(session) => drop(session),
                        Err(e) => {
                            tracing::warn!(session = %id, error = %e.report(), "cannot take up an overdue turn");
                        }
                    }
                }
            }
        });
    }

    /// Lets idle sessions leave memory (the store has them; the next request loads them
    /// again). A session goes when it was idle — no turn running or waiting, nobody holding
    /// it, nothing uncommitted — at this sweep and at the previous one, with the same last
    /// turn: so a finished turn stays replayable (SSE resume, a BIDI reconnect) for at least
    /// one sweep interval. `marked` carries the candidates from one sweep to the next.
    /// Returns how many sessions left.
    pub fn evict_idle(&self, marked: &mut HashMap<String, usize>) -> usize {
        let mut next = HashMap::new();
        let gone = self.live.sweep(|chat, session| {
            // A parked turn whose log is stored comes back exactly, and a copy of a turn
            // running elsewhere is read again anyway: no need to wait a sweep.
            if session.parked_and_stored() || session.runs_elsewhere() {
                self.let_go(session);
                return true;
            }
            let Some(turn) = session.idle_turn() else {
                return false;
            };
            if marked.get(chat) == Some(&turn) {
                return true;
            }
            next.insert(chat.to_owned(), turn);
            false
        });
        *marked = next;
        self.held_logs.prune();
        gone
    }

    /// Lets `chat_id`'s session leave memory if its turn is parked with its whole log stored and
    /// nobody holds the session (ADR 0011). Called when a turn's task parks it.
    /// A request that still holds the session (it answered, or looked) makes it wait: it is
    /// tried again a moment later.
    pub(crate) fn release_parked(self: &Arc<Self>, chat_id: &str) {
        match self.live.take_unheld(chat_id, Session::parked_and_stored) {
            super::live::Taken::Gone(session) => self.let_go(&session),
            super::live::Taken::Held => self.release_soon(chat_id),
            super::live::Taken::No => {}
        }
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
    pub(super) fn let_go(&self, session: &Session) {
        // What it waits for is the store's alone now (ADR 0039).
        self.inbox.forget(&session.id);
        if let Some(log) = session.current_log() {
            self.held_logs.hold(&session.id, &log);
        }
        self.released.fetch_add(1, Ordering::Relaxed);
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
}
