//! One commit of a chat, whoever makes it (a turn, an answer, signatures dropped when someone
//! may no longer sign): the record as it is now, with the audit events waiting for a commit
//! first (an answer a turn commits with its result, events a failed commit gave back) and then
//! the committer's, in one store transaction; then the inbox learns the record, and the session
//! whether memory is ahead of the store. One commit of a chat at a time, and none while an
//! answer applied to it may still be taken back ([`Session::writes`]).

use std::sync::Arc;

use super::{
    inbox::Inbox,
    session::{Session, SessionRecord, TurnEntry, Writing},
    store::{AuditEvent, SessionStore, StoreError},
};

/// Writes chats' records to the store.
pub(crate) struct Commits {
    store: Arc<dyn SessionStore>,
    inbox: Arc<Inbox>,
}

/// A commit that failed: nothing of it was written.
pub(crate) struct Uncommitted {
    pub error: StoreError,
    /// The events that were waiting for a commit before this one (others' to keep).
    pub waiting: Vec<AuditEvent>,
    /// The committer's own events.
    pub events: Vec<AuditEvent>,
}

impl Uncommitted {
    /// Another instance sharing the database committed the chat first: this copy is out of
    /// date and can never be written.
    pub fn is_conflict(&self) -> bool {
        self.error.is_conflict()
    }

    /// Every event of the failed commit, in order.
    pub fn all_events(self) -> Vec<AuditEvent> {
        [self.waiting, self.events].concat()
    }
}

impl Commits {
    pub(crate) fn new(store: Arc<dyn SessionStore>, inbox: Arc<Inbox>) -> Self {
        Commits { store, inbox }
    }

    /// Commits `session`'s record with the events waiting for a commit and `events`; `log`:
    /// the turn's log so far, kept with the record (a pause, or every commit on a shared
    /// database). Returns the record written. Waits while an outside change to the session
    /// (an answer) is on its way to its own commit ([`Session::writes`]).
    pub(crate) async fn commit(
        &self,
        session: &Session,
        events: Vec<AuditEvent>,
        log: Option<&[TurnEntry]>,
    ) -> Result<SessionRecord, Uncommitted> {
        let writing = session.writes().await;
        self.commit_held(session, &writing, events, log).await
    }

    /// [`Commits::commit`] by the holder of the right to write `session` (an outside change
    /// committing what it applied).
    #[tracing::instrument(name = "commit", skip_all, fields(chat = %session.id, paused = log.is_some()))]
    pub(crate) async fn commit_held(
        &self,
        session: &Session,
        _writing: &Writing,
        events: Vec<AuditEvent>,
        log: Option<&[TurnEntry]>,
    ) -> Result<SessionRecord, Uncommitted> {
        // A copy that left memory out of date never writes: the store would take it over the
        // newer copy read since (the version it expects is this instance's, not the copy's).
        let Some(_current) = session.current().await else {
            return Err(Uncommitted {
                error: StoreError::conflict("this copy of the chat was read again since"),
                waiting: Vec::new(),
                events,
            });
        };
        let (record, waiting) = session.to_commit();
        let audit = [waiting.as_slice(), events.as_slice()].concat();
        let result = match log {
            Some(log) => self.store.commit_paused(&record, &audit, log).await,
            None => self.store.commit(&record, &audit).await,
        };
        session.set_dirty(result.is_err());
        match result {
            Ok(()) => {
                self.inbox.sync(&record);
                Ok(record)
            }
            Err(error) => {
                session.commit_failed(&record);
                Err(Uncommitted {
                    error,
                    waiting,
                    events,
                })
            }
        }
    }
}
