//! A turn's log: the numbered, append-only entries (chunks, the pause, the end) every transport
//! reads from a position, and how an entry is stored with a paused or followed turn.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

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
    /// Of a log that follows a turn another instance runs (ADR 0043): entries heard past a gap
    /// (a notification lost or too large), by number, until the gap is filled. Locked after
    /// `entries`. Empty for a log this instance writes.
    ahead: Mutex<BTreeMap<usize, TurnEntry>>,
    /// Wakes the readers waiting for a new entry.
    grew: Notify,
    /// Of a log that follows a turn another instance runs: while the log lives (in the copy of
    /// the chat, or in the hands of a reader), this instance hears the turn's text (ADR 0043).
    hearing: std::sync::OnceLock<crate::agent::store::TextInterest>,
}

/// The most entries a followed log keeps past a gap (ADR 0043); the farthest go first.
const AHEAD_KEPT: usize = 1_024;

impl TurnLog {
    /// A log that goes on from `entries` (a paused turn coming back from the store).
    pub fn restored(entries: Vec<TurnEntry>) -> Self {
        TurnLog {
            entries: Mutex::new(entries),
            ahead: Mutex::default(),
            grew: Notify::new(),
            hearing: std::sync::OnceLock::new(),
        }
    }

    /// Makes this log hear the text of the turn it follows for as long as it lives, with the
    /// interest `hear` makes (once: a log kept across reads of its chat keeps the first).
    pub(crate) fn hear_with(&self, hear: impl FnOnce() -> crate::agent::store::TextInterest) {
        self.hearing.get_or_init(hear);
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
    /// instance that goes on with the turn): appends what it lacks, then what was heard past it
    /// ([`TurnLog::heard`]). True, changing nothing, when the log already has them (it heard
    /// them one by one, ADR 0043); false, changing nothing, when `entries` is not this log's
    /// continuation or beginning (another turn's, or one that went another way).
    pub fn catch_up_with(&self, entries: &[TurnEntry]) -> bool {
        let mut current = lock(&self.entries);
        let shared = current.len().min(entries.len());
        if current.first() != entries.first()
            || current.get(shared.wrapping_sub(1)) != entries.get(shared.wrapping_sub(1))
        {
            return false;
        }
        if current.len() >= entries.len() {
            return true;
        }
        current.extend_from_slice(&entries[shared..]);
        self.take_ahead(&mut current);
        drop(current);
        self.grew.notify_waiters();
        true
    }

    /// Follows the log of a turn another instance runs with `entries` heard from it, the first
    /// being entry number `at` (ADR 0043): appends those that come next, skips those it has,
    /// and keeps those past a gap until the gap is filled (by news heard later or the stored
    /// log). An ended log takes nothing. How many entries the log gained.
    pub fn heard(&self, at: usize, entries: Vec<TurnEntry>) -> usize {
        let mut current = lock(&self.entries);
        if matches!(current.last(), Some(TurnEntry::End)) {
            return 0;
        }
        let had = current.len();
        {
            let mut ahead = lock(&self.ahead);
            for (n, entry) in (at..).zip(entries) {
                if n >= had {
                    ahead.entry(n).or_insert(entry);
                }
            }
            while ahead.len() > AHEAD_KEPT {
                ahead.pop_last();
            }
        }
        self.take_ahead(&mut current);
        let gained = current.len() - had;
        drop(current);
        if gained > 0 {
            self.grew.notify_waiters();
        }
        gained
    }

    /// Moves the entries heard ahead that now come next into `current` (this log's entries,
    /// locked), and forgets those it has.
    fn take_ahead(&self, current: &mut Vec<TurnEntry>) {
        let mut ahead = lock(&self.ahead);
        if ahead.is_empty() {
            return;
        }
        while let Some(entry) = ahead.remove(&current.len()) {
            let end = matches!(entry, TurnEntry::End);
            current.push(entry);
            if end {
                ahead.clear();
                return;
            }
        }
        let next = current.len();
        ahead.retain(|n, _| *n > next);
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
        // Its beginning only (stored before this log heard the rest, ADR 0043): kept as it is.
        assert!(log.catch_up_with(&later[..2]));
        assert_eq!(log.len(), 4);
        // Another turn's log, or one that went another way: left alone.
        let other = TurnLog::restored(vec![start.clone(), TurnEntry::Pause]);
        assert!(!other.catch_up_with(&[TurnEntry::Chunk(Chunk::start("n")), TurnEntry::Pause]));
        assert!(!other.catch_up_with(&[start.clone(), TurnEntry::End]));
        assert!(!other.catch_up_with(&[
            start,
            TurnEntry::Chunk(Chunk::finish_step()),
            TurnEntry::End
        ]));
        assert_eq!(other.len(), 2);
    }

    fn delta(n: usize) -> TurnEntry {
        TurnEntry::Chunk(Chunk::text_delta("t", format!("w{n} ")))
    }

    /// What a reader of `log` from the start has read so far, without waiting.
    fn read_all(reader: &mut LogReader) -> Vec<TurnEntry> {
        let mut read = Vec::new();
        while let Read::Entry(entry) = reader.try_next() {
            read.push(entry);
        }
        read
    }

    #[test]
    fn a_followed_log_takes_heard_entries_in_order_once_and_waits_at_a_gap() {
        let log = Arc::new(TurnLog::restored(vec![delta(0)]));
        let mut reader = log.subscribe(0);
        assert_eq!(log.heard(1, vec![delta(1), delta(2)]), 2);
        // Heard twice (a batch that overlaps): nothing twice.
        assert_eq!(
            log.heard(0, vec![delta(0), delta(1), delta(2), delta(3)]),
            1
        );
        // Entry 4 lost: 5 and 6 wait for it, unseen.
        assert_eq!(log.heard(5, vec![delta(5)]), 0);
        assert_eq!(log.heard(6, vec![delta(6)]), 0);
        assert_eq!(read_all(&mut reader), (0..4).map(delta).collect::<Vec<_>>());
        // The stored log, written later, fills the gap; what was heard past it follows.
        let stored: Vec<TurnEntry> = (0..5).map(delta).collect();
        assert!(log.catch_up_with(&stored));
        assert_eq!(read_all(&mut reader), (4..7).map(delta).collect::<Vec<_>>());
        // A stored log older than what was heard changes nothing.
        assert!(log.catch_up_with(&stored[..2]));
        assert_eq!(log.len(), 7);
        // Nothing after the end.
        assert_eq!(log.heard(7, vec![TurnEntry::End]), 1);
        assert_eq!(log.heard(8, vec![delta(8)]), 0);
        assert_eq!(read_all(&mut reader), vec![TurnEntry::End]);
    }

    #[test]
    fn a_followed_log_fills_a_gap_from_news_heard_late_and_keeps_a_bounded_backlog() {
        let log = TurnLog::default();
        assert_eq!(log.heard(1, vec![delta(1)]), 0);
        assert_eq!(log.heard(0, vec![delta(0)]), 2);
        // Past a gap, at most AHEAD_KEPT entries wait (the nearest).
        let far: Vec<TurnEntry> = (3..3 + 2 * AHEAD_KEPT).map(delta).collect();
        assert_eq!(log.heard(3, far), 0);
        assert_eq!(lock(&log.ahead).len(), AHEAD_KEPT);
        // The gap filled, the log goes on as far as the backlog holds (the farthest waiting
        // entry made room for the one that filled it).
        assert_eq!(log.heard(2, vec![delta(2)]), AHEAD_KEPT);
        assert_eq!(
            log.entries_from(0),
            (0..2 + AHEAD_KEPT).map(delta).collect::<Vec<_>>()
        );
        assert!(lock(&log.ahead).is_empty());
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
