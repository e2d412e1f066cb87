//! How a model tells the runtime about a chat outside a step, losing nothing: the voice
//! notices (an utterance heard, talk while a card waits: [`VoiceNotice`]) and the call notices
//! (a call the provider withdrew: [`CallNotice`]). One queue type for both (ADR 0035, "Voice
//! notices lose nothing" and "Withdrawn calls lose nothing either").
//!
//! Every subscriber gets every notice meant for it, in the order they were sent, and none is
//! ever dropped. A notice is something a person said, or a call that must never run, so a full
//! queue cannot be an excuse to lose one: each subscriber has a queue of its own without a
//! bound, whose real bound is how fast people speak and models cancel (the per-connection
//! limits), and that its reader empties at once. A subscriber follows every chat (the runtime,
//! which sorts voice notices by chat) or one chat (a turn, which only acts on its own chat's
//! withdrawn calls and so is never handed other chats' notices at all).
//!
//! [`VoiceNotice`]: super::voice::VoiceNotice
//! [`CallNotice`]: super::model::CallNotice

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// A notice about one chat.
pub trait ChatNotice: Clone + Send + 'static {
    /// The chat it is about.
    fn session_id(&self) -> &str;
}

/// Where a model announces its notices of kind `T` (see the module).
pub struct Notices<T> {
    shared: Arc<Queues<T>>,
}

struct Queues<T> {
    subscribers: Mutex<Vec<Subscriber<T>>>,
    /// Notices sent and not yet read (all subscribers together).
    unread: Arc<AtomicUsize>,
}

struct Subscriber<T> {
    /// `None`: every chat's notices.
    chat: Option<String>,
    queue: UnboundedSender<T>,
}

/// A subscriber's end of [`Notices`]: every notice for it sent after it subscribed, in order.
pub struct Subscription<T> {
    queue: UnboundedReceiver<T>,
    unread: Arc<AtomicUsize>,
}

impl<T> Default for Notices<T> {
    fn default() -> Self {
        Notices {
            shared: Arc::new(Queues {
                subscribers: Mutex::new(Vec::new()),
                unread: Arc::new(AtomicUsize::new(0)),
            }),
        }
    }
}

impl<T> Clone for Notices<T> {
    fn clone(&self) -> Self {
        Notices {
            shared: self.shared.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Notices<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("subscribers", &super::lock(&self.shared.subscribers).len())
            .field("unread", &self.shared.unread.load(Ordering::SeqCst))
            .finish()
    }
}

impl<T> std::fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("queued", &self.queue.len())
            .finish()
    }
}

impl<T: ChatNotice> Notices<T> {
    /// A new subscriber to every chat's notices, from now on.
    pub fn subscribe(&self) -> Subscription<T> {
        self.add(None)
    }

    /// A new subscriber to chat `session_id`'s notices only, from now on.
    pub fn subscribe_chat(&self, session_id: &str) -> Subscription<T> {
        self.add(Some(session_id.to_owned()))
    }

    fn add(&self, chat: Option<String>) -> Subscription<T> {
        let (tx, queue) = unbounded_channel();
        let mut subscribers = super::lock(&self.shared.subscribers);
        // Subscribers that are gone leave here too, not only when a notice is sent: turns
        // subscribe one after another and withdrawn calls are rare.
        subscribers.retain(|s| !s.queue.is_closed());
        subscribers.push(Subscriber { chat, queue: tx });
        Subscription {
            queue,
            unread: self.shared.unread.clone(),
        }
    }

    /// Sends `notice` to every subscriber it is for; how many got it (0: nobody listens, as
    /// before the runtime's first voice, or no turn of that chat is running).
    pub fn send(&self, notice: T) -> usize {
        let mut subscribers = super::lock(&self.shared.subscribers);
        let mut got = 0;
        subscribers.retain(|s| {
            if s.chat
                .as_deref()
                .is_some_and(|chat| chat != notice.session_id())
            {
                return !s.queue.is_closed();
            }
            // Counted before it is queued, so a reader never counts below zero.
            self.shared.unread.fetch_add(1, Ordering::SeqCst);
            let sent = s.queue.send(notice.clone()).is_ok();
            if sent {
                got += 1;
            } else {
                self.shared.unread.fetch_sub(1, Ordering::SeqCst);
            }
            sent
        });
        got
    }

    /// Whether every notice sent has been read by every subscriber.
    pub fn is_empty(&self) -> bool {
        self.shared.unread.load(Ordering::SeqCst) == 0
    }
}

impl<T> Subscription<T> {
    /// The next notice; `None` once every [`Notices`] it came from is gone.
    pub async fn recv(&mut self) -> Option<T> {
        let notice = self.queue.recv().await;
        if notice.is_some() {
            self.unread.fetch_sub(1, Ordering::SeqCst);
        }
        notice
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        // Nothing more is queued once it is closed: what it holds is never read.
        self.queue.close();
        while self.queue.try_recv().is_ok() {
            self.unread.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Note(&'static str, u32);

    impl ChatNotice for Note {
        fn session_id(&self) -> &str {
            self.0
        }
    }

    #[tokio::test]
    async fn a_flood_for_other_chats_loses_nothing_and_reaches_only_their_subscribers() {
        let notices = Notices::<Note>::default();
        let mut everything = notices.subscribe();
        let mut mine = notices.subscribe_chat("mine");
        // Far more than any bounded channel held before (a broadcast of 64 dropped the oldest).
        for n in 0..10_000 {
            assert_eq!(
                notices.send(Note("theirs", n)),
                1,
                "only the all-chats subscriber"
            );
        }
        assert_eq!(notices.send(Note("mine", 1)), 2);
        assert_eq!(
            mine.recv().await,
            Some(Note("mine", 1)),
            "none of theirs, ours kept"
        );
        for n in 0..10_000 {
            assert_eq!(everything.recv().await, Some(Note("theirs", n)), "in order");
        }
        assert_eq!(everything.recv().await, Some(Note("mine", 1)));
        assert!(notices.is_empty());
    }

    #[tokio::test]
    async fn subscribers_that_are_gone_leave_and_their_unread_notices_with_them() {
        let notices = Notices::<Note>::default();
        for _ in 0..100 {
            drop(notices.subscribe_chat("a"));
        }
        let kept = notices.subscribe_chat("a");
        assert_eq!(super::super::lock(&notices.shared.subscribers).len(), 1);
        assert_eq!(notices.send(Note("a", 1)), 1);
        assert!(!notices.is_empty());
        drop(kept);
        assert!(
            notices.is_empty(),
            "what a dropped subscriber held is not waited for"
        );
        assert_eq!(notices.send(Note("a", 2)), 0);
    }

    #[tokio::test]
    async fn a_subscription_ends_when_every_sender_is_gone() {
        let notices = Notices::<Note>::default();
        let mut sub = notices.subscribe();
        notices.send(Note("a", 1));
        drop(notices);
        assert_eq!(sub.recv().await, Some(Note("a", 1)));
        assert_eq!(sub.recv().await, None);
    }
}
