//! The sessions in memory: at most one per chat, each shared by whoever works on the chat
//! (a request, a turn's task, a socket). A session leaves when nobody else holds it
//! ([`LiveSessions::sweep`], [`LiveSessions::take_unheld`]) or when a newer copy of its chat
//! replaces it ([`LiveSessions::remove_if_current`]).
//!
//! The map is private: every holder of a session got it from here, cloned under this lock,
//! so a session whose only holder is the map cannot gain one while the lock is held — which
//! is what lets a session leave memory safely.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use super::lock;
use crate::agent::session::{Session, SessionRecord};

#[derive(Default)]
pub(super) struct LiveSessions {
    by_chat: Mutex<HashMap<String, Arc<Session>>>,
}

/// What [`LiveSessions::take_unheld`] did.
pub(super) enum Taken {
    /// The session left memory.
    Gone(Arc<Session>),
    /// Someone else holds it: it stays.
    Held,
    /// No such session, or one that did not qualify.
    No,
}

impl LiveSessions {
    /// The session of `chat` if it is in memory.
    pub(super) fn get(&self, chat: &str) -> Option<Arc<Session>> {
        lock(&self.by_chat).get(chat).cloned()
    }

    /// The session of `record`'s chat: the one in memory if there is one (false), else a new
    /// one made of `record` (true).
    pub(super) fn get_or_insert(&self, record: SessionRecord) -> (Arc<Session>, bool) {
        let mut by_chat = lock(&self.by_chat);
        if let Some(session) = by_chat.get(&record.id) {
            return (session.clone(), false);
        }
        let session = Arc::new(Session::new(record));
        by_chat.insert(session.id.clone(), session.clone());
        (session, true)
    }

    /// Takes `session` out of memory if it is still its chat's live one.
    pub(super) fn remove_if_current(&self, session: &Arc<Session>) -> Option<Arc<Session>> {
        let mut by_chat = lock(&self.by_chat);
        match by_chat.get(&session.id) {
            Some(current) if Arc::ptr_eq(current, session) => by_chat.remove(&session.id),
            _ => None,
        }
    }

    /// Takes `chat`'s session out of memory if `qualifies` says so and nobody else holds it.
    pub(super) fn take_unheld(
        &self,
        chat: &str,
        qualifies: impl FnOnce(&Session) -> bool,
    ) -> Taken {
        let mut by_chat = lock(&self.by_chat);
        let Some(session) = by_chat.get(chat).filter(|s| qualifies(s)) else {
            return Taken::No;
        };
        if Arc::strong_count(session) != 1 {
            return Taken::Held;
        }
        by_chat.remove(chat).map_or(Taken::No, Taken::Gone)
    }

    /// Lets go of the sessions nobody else holds and `leaves` picks (it is told each such
    /// session's chat, and may act on the session as it goes). How many left.
    pub(super) fn sweep(&self, mut leaves: impl FnMut(&str, &Arc<Session>) -> bool) -> usize {
        let mut by_chat = lock(&self.by_chat);
        let before = by_chat.len();
        by_chat.retain(|chat, session| Arc::strong_count(session) != 1 || !leaves(chat, session));
        before - by_chat.len()
    }

    /// Every session in memory now.
    pub(super) fn all(&self) -> Vec<Arc<Session>> {
        lock(&self.by_chat).values().cloned().collect()
    }

    /// The chats in memory now.
    pub(super) fn chats(&self) -> Vec<String> {
        lock(&self.by_chat).keys().cloned().collect()
    }

    /// Whether a session in memory other than `chat`'s is one `matches` picks.
    pub(super) fn any_other(&self, chat: &str, matches: impl Fn(&Session) -> bool) -> bool {
        lock(&self.by_chat)
            .iter()
            .any(|(id, session)| id != chat && matches(session))
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.by_chat).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session another holder has never leaves memory, by a sweep or a take; one nobody
    /// holds does, and a copy a newer one replaced is not taken for the newer.
    #[test]
    fn a_session_leaves_memory_only_when_nobody_else_holds_it() {
        let live = LiveSessions::default();
        let (held, fresh) = live.get_or_insert(SessionRecord::new("held", 0));
        assert!(fresh);
        let (again, fresh) = live.get_or_insert(SessionRecord::new("held", 1));
        assert!(!fresh && Arc::ptr_eq(&held, &again));
        drop(again);
        drop(live.get_or_insert(SessionRecord::new("free", 0)));

        assert!(matches!(live.take_unheld("held", |_| true), Taken::Held));
        assert!(matches!(live.take_unheld("free", |_| false), Taken::No));
        let mut seen = Vec::new();
        assert_eq!(
            live.sweep(|chat, _| {
                seen.push(chat.to_owned());
                true
            }),
            1
        );
        assert_eq!(seen, ["free"], "a held session is not even offered");
        assert_eq!(live.chats(), ["held"]);

        let stale = held.clone();
        assert!(live.remove_if_current(&stale).is_some());
        drop(live.get_or_insert(SessionRecord::new("held", 2)));
        assert!(
            live.remove_if_current(&stale).is_none(),
            "the newer copy stays"
        );
        assert_eq!(live.len(), 1);
        assert!(matches!(live.take_unheld("held", |_| true), Taken::Gone(_)));
        assert_eq!(live.len(), 0);
    }
}
