//! Logs of parked turns that left memory while a reader still held the log (a reader that did
//! not stop at the pause): the turn takes the same log back when it returns, so such a reader
//! sees what follows. Usually empty (a socket lets go at the pause).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicUsize, Ordering},
    },
};

use crate::agent::session::{TurnLog, lock};

/// The held logs are not cleaned below this size.
const HELD_LOGS_CLEANUP: usize = 64;

/// The held logs, by chat.
#[derive(Default)]
pub(super) struct HeldLogs {
    logs: Mutex<HashMap<String, Weak<TurnLog>>>,
    /// How many held logs were alive at the last clean-up.
    kept: AtomicUsize,
}

impl HeldLogs {
    /// Remembers `log`, of chat `chat` leaving memory, if a reader still holds it (beyond the
    /// session's turn and the caller). Logs nobody reads are dropped at every sweep, and
    /// whenever the map has doubled since it was last cleaned.
    pub(super) fn hold(&self, chat: &str, log: &Arc<TurnLog>) {
        if Arc::strong_count(log) <= 2 {
            return;
        }
        let mut held = lock(&self.logs);
        if held.len() >= HELD_LOGS_CLEANUP.max(2 * self.kept.load(Ordering::Relaxed)) {
            self.prune_locked(&mut held);
        }
        held.insert(chat.to_owned(), Arc::downgrade(log));
    }

    /// The log held for `chat`, taken out, if a reader still holds it.
    pub(super) fn take(&self, chat: &str) -> Option<Arc<TurnLog>> {
        lock(&self.logs).remove(chat).and_then(|log| log.upgrade())
    }

    /// Drops the held logs no reader holds any more.
    pub(super) fn prune(&self) {
        self.prune_locked(&mut lock(&self.logs));
    }

    fn prune_locked(&self, held: &mut HashMap<String, Weak<TurnLog>>) {
        held.retain(|_, log| log.strong_count() > 0);
        self.kept.store(held.len(), Ordering::Relaxed);
    }
}
