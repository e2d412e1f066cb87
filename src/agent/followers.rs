//! Who follows a chat's turns as they happen: at most one follower per chat (a BIDI socket), and
//! a signal for it.
//!
//! A follower does not hold the turn's log while the turn waits for the person: the turn may
//! leave memory then (ADR 0011). Instead the runtime signals the follower when the chat has news
//! — a turn began, or a paused turn produced output again (an answer from anywhere, a deadline,
//! an interrupt) — and the follower picks the log up again where it stopped. A newer follower of
//! the same chat replaces the older, whose signal then says so.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use tokio::sync::Notify;

use super::lock;

/// What a follower waits on.
#[derive(Debug, Default)]
pub struct Signal {
    notify: Notify,
    replaced: AtomicBool,
}

impl Signal {
    /// Waits for news or for the follower's replacement. News that came while nobody waited is
    /// kept (one wake-up), so nothing between two waits is missed.
    pub async fn wait(&self) {
        self.notify.notified().await;
    }

    /// Whether a newer follower took the chat over.
    pub fn is_replaced(&self) -> bool {
        self.replaced.load(Ordering::SeqCst)
    }
}

/// The followers of every chat that has one.
#[derive(Debug, Default)]
pub struct Followers {
    next_id: AtomicU64,
    /// Chat → its follower's id and signal.
    by_chat: Mutex<HashMap<Arc<str>, Registered>>,
}

type Registered = (u64, Arc<Signal>);

/// A follower's registration: its id (to leave without removing a successor) and its signal.
#[derive(Debug, Clone)]
pub struct Following {
    pub id: u64,
    pub signal: Arc<Signal>,
}

impl Followers {
    /// Makes a new follower of `chat`; the previous one, if any, is told it was replaced. (The
    /// id is shared with the caller, who keeps it anyway.)
    pub fn follow(&self, chat: &Arc<str>) -> Following {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let signal = Arc::new(Signal::default());
        let previous = lock(&self.by_chat).insert(chat.clone(), (id, signal.clone()));
        if let Some((_, previous)) = previous {
            previous.replaced.store(true, Ordering::SeqCst);
            previous.notify.notify_one();
        }
        Following { id, signal }
    }

    /// `id` stops following `chat` (a successor stays registered).
    pub fn leave(&self, chat: &str, id: u64) {
        let mut by_chat = lock(&self.by_chat);
        if by_chat.get(chat).is_some_and(|(current, _)| *current == id) {
            by_chat.remove(chat);
        }
    }

    /// Whether `chat` has a follower.
    pub fn is_followed(&self, chat: &str) -> bool {
        lock(&self.by_chat).contains_key(chat)
    }

    /// Tells `chat`'s follower, if any, that the chat has news.
    pub fn notify(&self, chat: &str) {
        if let Some((_, signal)) = lock(&self.by_chat).get(chat) {
            signal.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn news_reaches_the_follower_even_when_it_was_not_waiting_yet() {
        let followers = Followers::default();
        let following = followers.follow(&Arc::from("c"));
        followers.notify("c");
        followers.notify("other");
        tokio::time::timeout(std::time::Duration::from_secs(1), following.signal.wait())
            .await
            .expect("the kept wake-up");
        assert!(!following.signal.is_replaced());
    }

    #[tokio::test]
    async fn a_newer_follower_replaces_the_older_which_leaves_without_removing_it() {
        let followers = Followers::default();
        let chat: Arc<str> = Arc::from("c");
        let old = followers.follow(&chat);
        let new = followers.follow(&chat);
        old.signal.wait().await;
        assert!(old.signal.is_replaced());
        followers.leave("c", old.id);
        assert!(followers.is_followed("c"));
        followers.leave("c", new.id);
        assert!(!followers.is_followed("c"));
    }
}
