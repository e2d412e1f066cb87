//! A running turn's log, relayed to the other instances sharing the database (ADR 0043), so a
//! reader there (a socket, an SSE resume) shows its text per token:
//! * every entry as the turn logs it, as news ([`StoreNews::Text`]) numbered by its place in
//!   the log; what piled up while the last news was on its way goes out as one;
//! * the whole log stored every [`KEEPING`] while it grows ([`SessionStore::keep_log`]), and at
//!   once after an entry too large to say: what a reader elsewhere reads when news was lost or
//!   not said, or when it came in the middle of the turn.
//!
//! One task per drive of a turn, on a shared database only; it ends with the drive (the driver
//! holds its sender), at the turn's pause or end, or when the log is gone.
//!
//! [`SessionStore::keep_log`]: crate::agent::store::SessionStore::keep_log

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use tokio::sync::mpsc;

use crate::agent::{
    runtime::Runtime,
    session::{TurnEntry, TurnLog},
    store::{LIVE_NEWS_BYTES, StoreNews},
};

/// How often a running turn's log is stored for other instances to read (between commits).
const KEEPING: Duration = Duration::from_millis(250);

/// Where a driver tells its relay what it logged.
pub(crate) struct Relay {
    logged: mpsc::UnboundedSender<(usize, TurnEntry)>,
}

impl Relay {
    /// Starts relaying the log of `chat`'s turn `turn`.
    pub(super) fn spawn(rt: Arc<Runtime>, chat: String, turn: String, log: Weak<TurnLog>) -> Self {
        let (logged, heard) = mpsc::unbounded_channel();
        let task = RelayTask {
            rt,
            chat,
            turn,
            log,
            kept: 0,
        };
        tokio::spawn(task.run(heard));
        Relay { logged }
    }

    /// The turn logged `entry` as its entry number `at`.
    pub(super) fn logged(&self, at: usize, entry: &TurnEntry) {
        // The task is gone only when the log paused, ended or is gone: nobody to tell.
        let _ = self.logged.send((at, entry.clone()));
    }
}

struct RelayTask {
    rt: Arc<Runtime>,
    chat: String,
    turn: String,
    log: Weak<TurnLog>,
    /// How many entries the stored log has (as far as this task wrote it).
    kept: usize,
}

impl RelayTask {
    async fn run(mut self, mut heard: mpsc::UnboundedReceiver<(usize, TurnEntry)>) {
        let mut keeping = tokio::time::interval_at(tokio::time::Instant::now() + KEEPING, KEEPING);
        keeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                first = heard.recv() => {
                    let Some(first) = first else {
                        return;
                    };
                    let mut logged = vec![first];
                    while let Ok(next) = heard.try_recv() {
                        logged.push(next);
                    }
                    let settled = logged
                        .last()
                        .is_some_and(|(_, e)| matches!(e, TurnEntry::Pause | TurnEntry::End));
                    if self.say(logged).await {
                        self.keep().await;
                    }
                    if settled {
                        // The pause and the end come after a commit with the whole log.
                        return;
                    }
                }
                _ = keeping.tick() => {
                    if !self.keep().await {
                        return;
                    }
                }
            }
        }
    }

    /// Tells the other instances what was `logged`, in order, in as few news as fit. True when
    /// an entry was too large to say (the stored log must say it).
    async fn say(&self, logged: Vec<(usize, TurnEntry)>) -> bool {
        let mut unsaid = false;
        let mut news = Pending::default();
        for (at, entry) in logged {
            let bytes = serde_json::to_string(&entry).map_or(usize::MAX, |json| json.len());
            if bytes > LIVE_NEWS_BYTES {
                unsaid = true;
                self.send(news.take()).await;
                continue;
            }
            if news.bytes + bytes > LIVE_NEWS_BYTES || news.next() != Some(at) {
                self.send(news.take()).await;
            }
            if news.entries.is_empty() {
                news.at = at;
            }
            news.entries.push(entry);
            news.bytes += bytes;
        }
        self.send(news.take()).await;
        unsaid
    }

    async fn send(&self, news: Pending) {
        if news.entries.is_empty() {
            return;
        }
        let text = StoreNews::Text {
            chat: self.chat.clone(),
            turn: self.turn.clone(),
            at: news.at,
            entries: news.entries,
        };
        if let Err(e) = self.rt.store.announce(text).await {
            // Readers elsewhere read it from the stored log.
            tracing::debug!(session = %self.chat, error = %e.report(), "cannot tell a turn's text to the other instances");
        }
    }

    /// Stores the log if it grew since it was last stored. False when there is nothing more to
    /// keep: the log paused, ended or is gone.
    async fn keep(&mut self) -> bool {
        let Some(log) = self.log.upgrade() else {
            return false;
        };
        let entries = log.entries_from(0);
        drop(log);
        if matches!(entries.last(), Some(TurnEntry::Pause | TurnEntry::End)) {
            return false;
        }
        if entries.len() > self.kept {
            if let Err(e) = self
                .rt
                .store
                .keep_log(&self.chat, &self.turn, &entries)
                .await
            {
                tracing::warn!(session = %self.chat, error = %e.report(), "cannot write a running turn's log");
            }
            self.kept = entries.len();
        }
        true
    }
}

/// Entries gathered for one news.
#[derive(Default)]
struct Pending {
    at: usize,
    entries: Vec<TurnEntry>,
    bytes: usize,
}

impl Pending {
    /// The number of the entry that would come next in this news.
    fn next(&self) -> Option<usize> {
        (!self.entries.is_empty()).then(|| self.at + self.entries.len())
    }

    fn take(&mut self) -> Pending {
        std::mem::take(self)
    }
}
