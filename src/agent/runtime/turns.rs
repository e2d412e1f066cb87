//! The transports' entry points — start a turn, interrupt — and how a turn gets its task (a new
//! driver, or a parked turn unparked). The person's answers have their own home:
//! [`crate::agent::answer`].

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{Runtime, TextTiming, TurnError, TurnStarted, UserTurn};
use crate::agent::{
    attachments::CheckedAttachments,
    clock::IdKind,
    history::{AssistantPart, HistoryItem, Outcome, ToolCall},
    journal::UnreadableEntry,
    model::Usage,
    session::{
        LiveTurn, Session, SessionRecord, SessionState, TurnEntry, TurnLog, TurnRecord, TurnStatus,
        lock,
    },
    store::StoreNews,
    turn::SUPERSEDED_BY_MESSAGE,
    turn::{Aside, DriveFrom, TurnDriver, TurnPlan},
};
use crate::protocol::{Chunk, MessageReducer, UiMessage, UiPart, message::FilePart};

/// The call a message asks again (`ask_again`), checked by [`call_to_ask_again`]: `None` for a
/// message that asks nothing again.
fn reissue_of(
    record: &SessionRecord,
    ask_again: Option<&str>,
    tools: &crate::agent::tools::ToolRegistry,
) -> Result<Option<ToolCall>, TurnError> {
    let Some(call_id) = ask_again else {
        return Ok(None);
    };
    call_to_ask_again(record, call_id, tools)
        .map(Some)
        .map_err(|why| TurnError::CannotAskAgain {
            call_id: call_id.to_owned(),
            why,
        })
}

/// The call `call_id` of `record`'s history, for "ask again": only a call nobody decided (its
/// approval expired, or the person set it aside) of a tool still offered; else why not.
fn call_to_ask_again(
    record: &SessionRecord,
    call_id: &str,
    tools: &crate::agent::tools::ToolRegistry,
) -> Result<ToolCall, String> {
    // A call is put before the person again at most once: its re-proposal is the call to
    // ask again from then on (a call asked again twice would run twice).
    let unreadable =
        |e: UnreadableEntry| format!("this chat's stored entries cannot be read ({e})");
    for message in record.messages.iter() {
        let message = message.map_err(unreadable)?;
        if asked_again(&message) == Some(call_id) {
            return Err(format!(
                "it was asked again already (message {}); answer or ask again that call instead",
                message.id
            ));
        }
    }
    let mut result = None;
    for item in record.history.iter().rev() {
        if let HistoryItem::ToolResults { results } = &*item.map_err(unreadable)?
            && let Some(r) = results.iter().find(|r| r.call_id == call_id)
        {
            result = Some(r.outcome.clone());
            break;
        }
    }
    let outcome = result
        // A call of the turn still waiting for another (its results go to history together).
        .or_else(|| {
            record
                .turn
                .as_ref()?
                .calls
                .iter()
                .find_map(|c| match &c.phase {
                    crate::agent::gate::CallPhase::Done { outcome, .. } if c.call.id == call_id => {
                        Some(outcome.clone())
                    }
                    _ => None,
                })
        });
    match outcome {
        None => return Err("this chat has no such finished call".into()),
        Some(Outcome::Expired | Outcome::Dismissed) => {}
        Some(Outcome::Output { .. } | Outcome::Error { .. }) => {
            return Err("it ran already; ask for it in a new message".into());
        }
        Some(Outcome::Denied { .. } | Outcome::DeniedByRule { .. }) => {
            return Err("it was refused; ask for it in a new message".into());
        }
        Some(Outcome::Interrupted | Outcome::Superseded) => {
            return Err("it ended with its turn; ask for it in a new message".into());
        }
    }
    let mut found = None;
    for item in record.history.iter() {
        if let HistoryItem::Assistant { parts } = &*item.map_err(unreadable)?
            && let Some(call) = parts.iter().find_map(|p| match p {
                AssistantPart::ToolCall { call } if call.id == call_id => Some(call.clone()),
                _ => None,
            })
        {
            found = Some(call);
            break;
        }
    }
    let call = found.ok_or_else(|| "this chat has no such call".to_owned())?;
    if tools.get(&call.name).is_none() {
        return Err(format!("{} is no longer offered", call.name));
    }
    Ok(call)
}

/// The call a person's message asked again (`metadata.countersign.askAgain`), if any: the
/// record keeps it, so a call is asked again at most once.
fn asked_again(message: &UiMessage) -> Option<&str> {
    message.ask_again()?.as_str()
}

/// Puts a client's earlier conversation at the start of `record`'s history if the chat is
/// empty (nothing said, no turn): only `Context` items, which are text and nothing else.
fn adopt_context(record: &mut SessionRecord, context: Vec<HistoryItem>) {
    if context.is_empty() {
        return;
    }
    let empty = record.history.is_empty() && record.messages.is_empty() && record.turn.is_none();
    if !empty {
        return;
    }
    let before = record.history.len();
    record.history.extend(
        context
            .into_iter()
            .filter(|item| matches!(item, HistoryItem::Context { .. })),
    );
    tracing::info!(
        chat = %record.id,
        items = record.history.len() - before,
        "a new chat adopted the client's earlier messages as context"
    );
}

/// How a turn begins, besides the person's message: its text timing, a call it puts before the
/// person again first ("ask again"), and whether the message was said or typed.
struct Beginning {
    timing: Option<TextTiming>,
    reissue: Option<ToolCall>,
    said: Said,
}

/// How the person's message came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    Typed,
    /// Spoken: the message is the model's transcript of the person's speech.
    Spoken,
}

/// What a spoken utterance became ([`Runtime::start_spoken_turn`]).
pub(crate) enum Spoken {
    /// A turn of its own.
    Turn(TurnStarted),
    /// An aside of the turn that waits for the person: that turn answers it.
    Aside,
}

/// What a message waits for before its turn can begin.
enum Admission {
    /// The chat's model is answering (a step of the running turn streams): an utterance waits
    /// for the turn's next stop (a step's end, a pause, its end) and is admitted again.
    TurnStops(crate::agent::session::LogReader),
    /// The turn waiting for the person is being ended (its task, if it has one).
    Superseded(Option<tokio::task::JoinHandle<()>>),
    /// Everything else is accepted: its files are to be kept first.
    KeepFiles(CheckedAttachments),
}

impl Runtime {
    /// Starts a turn for a new user message. A turn that is waiting for the person is
    /// superseded (its open calls end as interrupted, so the history stays valid); a turn that is
    /// generating makes this fail with [`TurnError::Busy`].
    pub async fn start_turn(
        self: &Arc<Self>,
        chat_id: &str,
        user: UserTurn,
        timing: Option<TextTiming>,
    ) -> Result<TurnStarted, TurnError> {
        self.start_turn_with_context(chat_id, user, Vec::new(), timing)
            .await
    }

    /// [`Runtime::start_turn`], where the client also sent its copy of the earlier
    /// conversation, as [`HistoryItem::Context`] items (ADR 0020). They are adopted only by a
    /// chat that is still empty, before the person's message; any other chat already has its
    /// history and the client's copy is an echo. Items other than `Context` are never adopted.
    pub async fn start_turn_with_context(
        self: &Arc<Self>,
        chat_id: &str,
        user: UserTurn,
        context: Vec<HistoryItem>,
        timing: Option<TextTiming>,
    ) -> Result<TurnStarted, TurnError> {
        self.start_turn_as(chat_id, user, context, timing, crate::agent::people::LOCAL)
            .await
    }

    /// [`Runtime::start_turn_with_context`] by `owner` (the local person, or a person's id): a
    /// new chat becomes theirs; a chat of someone else's is refused ([`TurnError::NotYourChat`]).
    pub async fn start_turn_as(
        self: &Arc<Self>,
        chat_id: &str,
        user: UserTurn,
        context: Vec<HistoryItem>,
        timing: Option<TextTiming>,
        owner: &str,
    ) -> Result<TurnStarted, TurnError> {
        match self
            .admit_turn(chat_id, user, context, timing, owner, Said::Typed)
            .await?
        {
            Spoken::Turn(started) => Ok(started),
            // Never for a typed message: only words said become asides.
            Spoken::Aside => Err(TurnError::Busy),
        }
    }

    /// What `speaker` said, as the model's transcript of it: a turn of its own, whose message
    /// is the transcript, as a typed message is — except while the chat's turn waits for the
    /// person (a card, ADR 0035). Then the conversation goes on around the waiting call: the
    /// words are an *aside* of that turn, answered inside it, and the call stays decidable
    /// (only its card or the inbox decide it; the words are kept in its audit as what was
    /// said). The same while tools of the turn run; while the model answers, the words wait
    /// for the turn to stop ([`Runtime::words_while_live`]): words are never refused as "a turn
    /// is already running". A typed message still supersedes the waiting turn: typing is a new
    /// request.
    pub(crate) async fn start_spoken_turn(
        self: &Arc<Self>,
        chat_id: &str,
        user: UserTurn,
        speaker: &str,
    ) -> Result<Spoken, TurnError> {
        self.admit_turn(chat_id, user, Vec::new(), None, speaker, Said::Spoken)
            .await
    }

    async fn admit_turn(
        self: &Arc<Self>,
        chat_id: &str,
        mut user: UserTurn,
        context: Vec<HistoryItem>,
        timing: Option<TextTiming>,
        owner: &str,
        said: Said,
    ) -> Result<Spoken, TurnError> {
        if user.text.trim().is_empty() && user.attachments.is_empty() {
            return Err(TurnError::EmptyMessage);
        }
        let session = self.session(chat_id).await?;
        let mut files = self
            .check_attachments(chat_id, &session, owner, &mut user)
            .await?;
        loop {
            let next = {
                let mut state = session.state();
                let SessionState { record, live, .. } = &mut *state;
                if !record.open_to(owner) {
                    return Err(TurnError::NotYourChat);
                }
                // The first turn in an untouched chat makes it a person's (the local person's
                // chats need no owner recorded).
                let claim = record.is_untouched() && owner != crate::agent::people::LOCAL;
                // Refused before anything changes: a turn it would supersede stays.
                let reissue = reissue_of(record, user.ask_again.as_deref(), &self.tools)?;
                match live.as_mut() {
                    Some(turn) if !turn.log.is_ended() => {
                        if said == Said::Spoken && !turn.elsewhere {
                            match self.words_while_live(&session, record, turn, owner, &user.text) {
                                None => return Ok(Spoken::Aside),
                                Some(wait) => wait,
                            }
                        } else {
                            self.supersede_waiting(&session, record, turn, said, &user.text)?
                        }
                    }
                    _ => {
                        if let Some(checked) = files.take() {
                            Admission::KeepFiles(checked)
                        } else {
                            if claim {
                                record.owner = Some(owner.to_owned());
                            }
                            adopt_context(record, context);
                            let started = self.begin_turn(
                                &session,
                                record,
                                live,
                                user,
                                Beginning {
                                    timing,
                                    reissue,
                                    said,
                                },
                            );
                            return Ok(Spoken::Turn(started));
                        }
                    }
                }
            };
            self.await_admission(chat_id, next, &mut user).await?;
        }
    }

    /// The attachments of `user`, checked before anything changes (by the owner only: a
    /// reference to a file says whether the chat has it); they are kept once the message is
    /// otherwise accepted, before its commit: a refused message keeps none of them.
    async fn check_attachments(
        &self,
        chat_id: &str,
        session: &Arc<Session>,
        owner: &str,
        user: &mut UserTurn,
    ) -> Result<Option<CheckedAttachments>, TurnError> {
        if user.attachments.is_empty() {
            return Ok(None);
        }
        if !session.state().record.open_to(owner) {
            return Err(TurnError::NotYourChat);
        }
        let attachments = std::mem::take(&mut user.attachments);
        Ok(Some(self.attachments.check(chat_id, attachments).await?))
    }

    /// A message (typed, or said while the turn runs elsewhere) while `turn` is live: only a
    /// turn waiting for the person gives way to it ([`TurnError::Busy`] otherwise); its open
    /// calls end as interrupted, with the reason kept.
    fn supersede_waiting(
        self: &Arc<Self>,
        session: &Arc<Session>,
        record: &SessionRecord,
        turn: &mut LiveTurn,
        said: Said,
        text: &str,
    ) -> Result<Admission, TurnError> {
        let status = record.turn.as_ref().map(|t| t.status);
        if status != Some(TurnStatus::AwaitingPerson) {
            return Err(TurnError::Busy);
        }
        let reason = match said {
            Said::Typed => SUPERSEDED_BY_MESSAGE.to_owned(),
            Said::Spoken => format!(
                "{SUPERSEDED_BY_MESSAGE}, spoken: {text:?} (what was said; words decide nothing)"
            ),
        };
        *lock(&turn.interrupt_reason) = Some(reason);
        turn.cancel.cancel();
        // A parked turn needs a task to end itself.
        self.unpark_locked(session, record, turn);
        Ok(Admission::Superseded(turn.task.take()))
    }

    /// Waits for what `next` said must happen before the message is admitted again, outside
    /// the chat's lock.
    async fn await_admission(
        &self,
        chat_id: &str,
        next: Admission,
        user: &mut UserTurn,
    ) -> Result<(), TurnError> {
        match next {
            Admission::TurnStops(mut log) => {
                while let Some(entry) = log.next().await {
                    if matches!(
                        entry,
                        TurnEntry::Pause | TurnEntry::End | TurnEntry::Chunk(Chunk::FinishStep)
                    ) {
                        break;
                    }
                }
            }
            Admission::Superseded(Some(task)) => {
                let _ = task.await;
            }
            Admission::Superseded(None) => tokio::task::yield_now().await,
            // Then everything is checked again: the chat may have changed meanwhile.
            Admission::KeepFiles(checked) => {
                user.attachments = self.attachments.keep(chat_id, checked).await?;
            }
        }
        Ok(())
    }

    /// What `speaker` said while `turn` is live here: never refused (ADR 0035, "Speaking while
    /// a turn runs"). While the turn's calls are out — a card waits, or tools run — the words
    /// are an aside of it, answered inside it, and nothing of the turn ends (`None`). While the
    /// model is answering (a step streams, or the turn is ending), the provider has cut that
    /// answer when the person spoke over it (barge-in); the words wait for the turn's next stop
    /// and are admitted again then: a turn of their own once it ended, or an aside once its
    /// calls are out.
    fn words_while_live(
        self: &Arc<Self>,
        session: &Arc<Session>,
        record: &SessionRecord,
        turn: &mut LiveTurn,
        speaker: &str,
        text: &str,
    ) -> Option<Admission> {
        let calls_out = record.turn.as_ref().is_some_and(|t| {
            t.status == TurnStatus::AwaitingPerson
                || (t.status == TurnStatus::Running && !t.calls.is_empty())
        });
        if !calls_out {
            return Some(Admission::TurnStops(turn.log.subscribe(turn.log.len())));
        }
        turn.asides.push_back(Aside::Spoken {
            speaker: speaker.to_owned(),
            text: text.to_owned(),
        });
        if turn.parked.is_some() {
            self.unpark_locked(session, record, turn);
        } else {
            session.wake();
        }
        None
    }

    /// The model speaks on its own while chat `chat_id`'s call waits
    /// ([`VoiceNotice::WhileWaiting`]): its answer is an aside of the chat's live turn, which
    /// answers it while its calls are out; with no turn here to take it (it ended, or runs on
    /// another instance), the answer is declined and the model discards it.
    ///
    /// [`VoiceNotice::WhileWaiting`]: crate::agent::voice::VoiceNotice::WhileWaiting
    pub(crate) fn model_aside(self: &Arc<Self>, chat_id: &str) {
        let queued = self.live_session(chat_id).is_some_and(|session| {
            let mut state = session.state();
            let SessionState { record, live, .. } = &mut *state;
            match live.as_mut() {
                Some(turn) if !turn.log.is_ended() && !turn.elsewhere => {
                    turn.asides.push_back(Aside::Model);
                    if turn.parked.is_some() {
                        self.unpark_locked(&session, record, turn);
                    } else {
                        session.wake();
                    }
                    true
                }
                _ => false,
            }
        });
        if !queued {
            tracing::debug!(session = %chat_id, "the model spoke with no turn to take it; discarded");
            drop(self.models().voice().aside(chat_id));
        }
    }

    /// Creates the turn record and spawns its task (the caller holds both locks). `reissue`: a
    /// call the turn puts before the person again before the model's first step.
    fn begin_turn(
        self: &Arc<Self>,
        session: &Arc<Session>,
        record: &mut SessionRecord,
        live: &mut Option<LiveTurn>,
        user: UserTurn,
        beginning: Beginning,
    ) -> TurnStarted {
        let Beginning {
            timing,
            reissue,
            said,
        } = beginning;
        let now = self.clock.now_ms();
        let turn_id = self.ids.next_id(IdKind::Turn);
        let message_id = self.ids.next_id(IdKind::Message);
        let transport = user.transport;
        let heard;
        {
            let user_id = user
                .message_id
                .clone()
                .unwrap_or_else(|| self.ids.next_id(IdKind::Message));
            // The page did not send a spoken message: the stream brings it first.
            heard = (said == Said::Spoken)
                .then(|| crate::protocol::voice::heard_chunk(&user_id, &user.text));
            let mut message = UiMessage::user_text(user_id, user.text.clone());
            if let Some(call) = &reissue {
                message.metadata =
                    Some(serde_json::json!({ "countersign": { "askAgain": call.id } }));
            }
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
        let plan = TurnPlan {
            reducer: MessageReducer::new(message_id.clone()),
            turn_id,
            message_id,
            timing,
            transport,
            heard,
        };
        let started = self.spawn_driver(session, live, plan, reissue);
        self.followers.notify(&session.id);
        started
    }

    /// Spawns the task that drives a turn (new or resumed) and makes it the session's live turn.
    pub(super) fn spawn_driver(
        self: &Arc<Self>,
        session: &Arc<Session>,
        live: &mut Option<LiveTurn>,
        plan: TurnPlan,
        reissue: Option<ToolCall>,
    ) -> TurnStarted {
        let mut turn = LiveTurn {
            log: Arc::new(TurnLog::default()),
            cancel: CancellationToken::new(),
            interrupt_reason: Arc::new(Mutex::new(None)),
            task: None,
            parked: None,
            saved: 0,
            elsewhere: false,
            asides: Default::default(),
        };
        let (turn_id, message_id) = (plan.turn_id.clone(), plan.message_id.clone());
        let driver = TurnDriver::new(self, session, &turn, plan, reissue);
        turn.task = Some(driver.spawn(DriveFrom::Start));
        self.metrics.turn_started();
        let log = turn.log.clone();
        *live = Some(turn);
        TurnStarted {
            turn_id,
            message_id,
            log,
        }
    }

    /// Gives a parked turn a task again, continuing its log where it paused (the caller holds
    /// both locks of `session`, the record's first). Nothing happens if the turn is not parked.
    pub(super) fn unpark_locked(
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
        let driver = TurnDriver::new(
            self,
            session,
            turn,
            TurnPlan::continuing(record, current),
            None,
        );
        turn.task = Some(driver.spawn(DriveFrom::Pause(parked)));
    }

    /// [`Runtime::unpark_locked`], taking the locks.
    pub(super) fn unpark(self: &Arc<Self>, session: &Arc<Session>) {
        let mut state = session.state();
        let SessionState { record, live, .. } = &mut *state;
        if let Some(turn) = live.as_mut() {
            self.unpark_locked(session, record, turn);
        }
    }

    /// Tells `session`'s turn that person input was applied: a parked turn gets a task again,
    /// a waiting one is woken.
    pub(crate) fn wake(self: &Arc<Self>, session: &Arc<Session>) {
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

    /// Interrupts `chat_id`'s turn. False when nothing was running or waiting. A turn running
    /// on another instance sharing the database is asked to stop there (true: asked).
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
        if session.runs_elsewhere() {
            let chat = chat_id.to_owned();
            return match self.store.announce(StoreNews::Stop { chat }).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::error!(session = %chat_id, error = %e.report(), "cannot ask the instance running the turn to stop it");
                    false
                }
            };
        }
        let interrupted = session.interrupt(reason);
        if interrupted {
            // A parked turn needs a task to end itself.
            self.unpark(&session);
        }
        interrupted
    }
}
