//! A turn's log: the numbered, append-only entries (chunks, the pause, the end) every transport
//! reads from a position, and how an entry is stored with a paused or followed turn.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::lock;
use crate::protocol::Chunk;

/// One entry of a turn's log.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEntry {
    Chunk(Chunk),
    /// The turn now waits for the person (logged after the commit of its record and log): an
    /// SSE response ends here.
    Pause,
    /// The turn is over (logged after its last commit): `[DONE]`.
    End,
}

/// How a log entry is stored (the log of a paused turn is committed with its record): a chunk
/// as its wire JSON, the markers as the strings `"pause"` and `"end"`.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum StoredEntry<C> {
    Marker(Marker),
    Chunk(C),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Marker {
    Pause,
    End,
}

impl Serialize for TurnEntry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            // Speech is kept by reference (ADR 0035): stored logs carry no sound.
            TurnEntry::Chunk(chunk) => StoredEntry::Chunk(crate::agent::voice::stored_form(chunk)),
            TurnEntry::Pause => StoredEntry::Marker(Marker::Pause),
            TurnEntry::End => StoredEntry::Marker(Marker::End),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TurnEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match StoredEntry::<Chunk>::deserialize(deserializer)? {
            StoredEntry::Chunk(chunk) => TurnEntry::Chunk(chunk),
            StoredEntry::Marker(Marker::Pause) => TurnEntry::Pause,
            StoredEntry::Marker(Marker::End) => TurnEntry::End,
        })
    }
}

/// The numbered, append-only log of one turn's output. Every transport reads it from a position,
/// so a reconnecting client gets exactly the entries it missed.
#[derive(Debug, Default)]
pub struct TurnLog {
    entries: Mutex<Vec<TurnEntry>>,
    /// Wakes the readers waiting for a new entry.
    grew: Notify,
}

impl TurnLog {
    /// A log that goes on from `entries` (a paused turn coming back from the store).
    pub fn restored(entries: Vec<TurnEntry>) -> Self {
        TurnLog {
            entries: Mutex::new(entries),
            grew: Notify::new(),
        }
    }

    /// Appends `entry`. True when the log had paused: the turn is back after waiting for the
    /// person, and whoever stopped reading at the pause wants to know.
    pub fn push(&self, entry: TurnEntry) -> bool {
        let mut entries = lock(&self.entries);
        let resumed = matches!(entries.last(), Some(TurnEntry::Pause));
        // A pause or the end is where a log stops growing, often for long (a turn waiting for
        // a person, a finished turn kept for resume): give back the doubling's spare capacity
        // (up to half of it; measured 6.4 KiB per finished demo turn).
        let settles = !matches!(entry, TurnEntry::Chunk(_));
        entries.push(entry);
        if settles {
            entries.shrink_to_fit();
        }
        drop(entries);
        self.grew.notify_waiters();
        resumed
    }

    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Catches this log up with `entries`, the same turn's log as stored later (by another
    /// instance that goes on with the turn): appends what it lacks. False, changing nothing,
    /// when `entries` is not this log's continuation (another turn's, or shorter).
    pub fn catch_up_with(&self, entries: &[TurnEntry]) -> bool {
        let mut current = lock(&self.entries);
        if current.len() > entries.len()
            || current.first() != entries.first()
            || current.last() != entries.get(current.len().wrapping_sub(1))
        {
            return false;
        }
        if current.len() == entries.len() {
            return true;
        }
        let have = current.len();
        current.extend_from_slice(&entries[have..]);
        drop(current);
        self.grew.notify_waiters();
        true
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn entries_from(&self, from: usize) -> Vec<TurnEntry> {
        lock(&self.entries)
            .get(from..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    pub fn is_ended(&self) -> bool {
        matches!(lock(&self.entries).last(), Some(TurnEntry::End))
    }

    /// A reader that starts at entry `from`.
    pub fn subscribe(self: &Arc<Self>, from: usize) -> LogReader {
        LogReader {
            log: self.clone(),
            next: from,
        }
    }
}

/// What a [`LogReader`] finds without waiting.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    Entry(TurnEntry),
    /// The log ended and every entry was read.
    End,
    /// Nothing new yet.
    Nothing,
}

/// Reads a [`TurnLog`] in order, waiting for new entries.
#[derive(Debug)]
pub struct LogReader {
    log: Arc<TurnLog>,
    next: usize,
}

impl LogReader {
    /// The next entry, waiting for it if needed. `None` once the log has ended and every entry
    /// was read.
    pub async fn next(&mut self) -> Option<TurnEntry> {
        loop {
            match self.try_next() {
                Read::Entry(entry) => return Some(entry),
                Read::End => return None,
                Read::Nothing => self.ready().await,
            }
        }
    }

    /// The next entry if there is one, without waiting.
    pub fn try_next(&mut self) -> Read {
        let entries = lock(&self.log.entries);
        match entries.get(self.next) {
            Some(entry) => {
                self.next += 1;
                Read::Entry(entry.clone())
            }
            None if matches!(entries.last(), Some(TurnEntry::End)) => Read::End,
            None => Read::Nothing,
        }
    }

    /// Waits until [`LogReader::try_next`] has something to say: an entry, or the end. A small
    /// future (a connection waits on it while idle).
    pub async fn ready(&self) {
        loop {
            let grew = self.log.grew.notified();
            let mut grew = std::pin::pin!(grew);
            // Registered before looking, so a push in between is not missed.
            grew.as_mut().enable();
            {
                let entries = lock(&self.log.entries);
                if self.next < entries.len() || matches!(entries.last(), Some(TurnEntry::End)) {
                    return;
                }
            }
            grew.await;
        }
    }

    /// How many entries were read (the position of the next one).
    pub fn position(&self) -> usize {
        self.next
    }

    /// Whether every entry the log has now was read.
    pub fn at_end(&self) -> bool {
        self.next >= self.log.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_log_catches_up_with_its_continuation_stored_elsewhere_and_nothing_else() {
        let start = TurnEntry::Chunk(Chunk::start("m"));
        let log = Arc::new(TurnLog::restored(vec![start.clone(), TurnEntry::Pause]));
        let mut reader = log.subscribe(2);
        let later = vec![
            start.clone(),
            TurnEntry::Pause,
            TurnEntry::Chunk(Chunk::finish_step()),
            TurnEntry::End,
        ];
        assert!(log.catch_up_with(&later));
        assert_eq!(
            reader.next().await,
            Some(TurnEntry::Chunk(Chunk::finish_step()))
        );
        assert_eq!(reader.next().await, Some(TurnEntry::End));
        assert!(log.catch_up_with(&later), "already there");
        // Another turn's log, a shorter one, or one that went another way: left alone.
        let other = TurnLog::restored(vec![start.clone(), TurnEntry::Pause]);
        assert!(!other.catch_up_with(&[TurnEntry::Chunk(Chunk::start("n")), TurnEntry::Pause]));
        assert!(!other.catch_up_with(std::slice::from_ref(&start)));
        assert!(!other.catch_up_with(&[
            start,
            TurnEntry::Chunk(Chunk::finish_step()),
            TurnEntry::End
        ]));
        assert_eq!(other.len(), 2);
    }

    #[tokio::test]
    async fn a_log_reader_sees_every_entry_once_then_ends() {
        let log = Arc::new(TurnLog::default());
        log.push(TurnEntry::Chunk(Chunk::start("m")));
        let mut reader = log.subscribe(0);
        assert_eq!(
            reader.next().await,
            Some(TurnEntry::Chunk(Chunk::start("m")))
        );
        let writer = log.clone();
        let task = tokio::spawn(async move {
            writer.push(TurnEntry::Pause);
            writer.push(TurnEntry::End);
        });
        assert_eq!(reader.next().await, Some(TurnEntry::Pause));
        assert_eq!(reader.next().await, Some(TurnEntry::End));
        assert_eq!(reader.next().await, None);
        task.await.unwrap();
        // A late reader from position 1 gets exactly the missed entries.
        let mut late = log.subscribe(1);
        assert_eq!(late.next().await, Some(TurnEntry::Pause));
        assert_eq!(late.position(), 2);
    }

    #[test]
    fn a_log_gives_back_spare_capacity_when_it_pauses_or_ends() {
        let log = TurnLog::default();
        for i in 0..33 {
            log.push(TurnEntry::Chunk(Chunk::start(format!("m{i}"))));
        }
        assert!(lock(&log.entries).capacity() >= 64);
        log.push(TurnEntry::Pause);
        // `shrink_to_fit` may keep a little; the doubling's 30 spare slots must be gone.
        assert!(lock(&log.entries).capacity() < 40);
        log.push(TurnEntry::Chunk(Chunk::start("after")));
        log.push(TurnEntry::End);
        assert!(lock(&log.entries).capacity() < 40);
        assert_eq!(log.len(), 36);
    }
}
