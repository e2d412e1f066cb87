//! The turn's commits: the audit events it gathered since its last commit, written with the
//! record through the one commit of a chat ([`crate::agent::commit`]), and whether another
//! instance committed the chat first (then nothing of this turn can be written any more).

use crate::agent::{
    runtime::Runtime,
    session::{Session, TurnEntry},
    store::AuditEvent,
};

/// What a turn has to commit, and whether it still can.
#[derive(Default)]
pub(crate) struct TurnCommits {
    /// Audit events not yet committed (they go with the next commit).
    audit: Vec<AuditEvent>,
    /// Another instance committed this chat first (a shared database, ADR 0025): nothing this
    /// turn does can be committed any more, so it stops.
    overtaken: bool,
}

impl TurnCommits {
    /// Records `event` for the next commit.
    pub(crate) fn record(&mut self, event: AuditEvent) {
        self.audit.push(event);
    }

    /// Records `events` for the next commit.
    pub(crate) fn record_all(&mut self, events: impl IntoIterator<Item = AuditEvent>) {
        self.audit.extend(events);
    }

    /// Whether an audit event waits for the next commit.
    pub(crate) fn has_uncommitted(&self) -> bool {
        !self.audit.is_empty()
    }

    /// Whether another instance committed the chat first.
    pub(crate) fn overtaken(&self) -> bool {
        self.overtaken
    }

    /// Commits `session`'s record with the events gathered (`log`: the turn's log, kept with
    /// it). True when it was committed; the events of a failed commit wait for the next one.
    pub(crate) async fn commit(
        &mut self,
        rt: &Runtime,
        session: &Session,
        log: Option<&[TurnEntry]>,
    ) -> bool {
        let events = std::mem::take(&mut self.audit);
        match rt.commits.commit(session, events, log).await {
            Ok(_) => true,
            Err(failed) if failed.is_conflict() => {
                // Another instance committed this chat first: what this copy holds can never be
                // written (its audit events describe what did not happen on disk) — nor can
                // the answers handed to this turn, so grants made with them go too.
                tracing::warn!(session = %session.id, "another instance committed this chat first; this turn stops");
                self.overtaken = true;
                rt.grants().withdraw_of(&failed.all_events()).await;
                false
            }
            Err(failed) => {
                tracing::error!(session = %session.id, error = &failed.error as &dyn std::error::Error, "cannot save the session");
                // Keep the events for the next commit rather than lose them.
                self.audit.splice(0..0, failed.all_events());
                false
            }
        }
    }
}
