//! `COUNTERSIGN_CHUNK_LOG=<dir>`: every chunk the server sends, as JSONL, one file per session.
//!
//! The point is a bug report that can be replayed: the file this writes is what
//! the replay model (`models::replay`) plays back, and its lines have the shape of the browser's
//! "Download JSONL" chunk log (`ui::controller::LoggedChunk`), so either file reproduces a chat:
//!
//! ```text
//! {"timestamp":1767225600000,"session":"chat-1","mode":"sse","direction":"out","sequence_number":1,"chunk":{"type":"start","messageId":"m-1"}}
//! {"timestamp":1767225600004,"session":"chat-1","mode":"sse","direction":"out","sequence_number":2,"chunk":{"type":"start-step"}}
//! …
//! {"timestamp":1767225600950,"session":"chat-1","mode":"sse","direction":"out","sequence_number":9,"chunk":"[DONE]"}
//! ```
//!
//! * `chunk` is the chunk in [`Dialect::Full`] (every key we model, whatever the client's
//!   dialect was), or the string `"[DONE]"` at the end of each turn.
//! * `sequence_number` counts the lines of one session from 1, across turns and across server
//!   restarts: when a session's file is (re)opened, numbering continues after the
//!   `sequence_number` of the file's last complete line that has one. Reading the tail is
//!   O(length of the last line), where counting lines would be O(file) — and audio sessions
//!   make long files. Only when no line of the tail parses (a file we did not write) are the
//!   lines counted instead, so numbers still grow.
//! * A last line without its newline (the process died mid-write) is left as it is and closed
//!   with a newline, so the torn fragment stays a line of its own (the replay reports it with
//!   its line number) instead of corrupting the next one.
//!
//! # Where the file of a session is
//!
//! Session ids come from clients, so they never reach the file system as they are. The file is
//! `<dir>/<file_name(session)>`, see [`file_name`]: ASCII lower-case letters, digits, `-` and `_`
//! are kept; every other byte of the id's UTF-8 is written `%XX` (upper-case hex), so
//! `../../etc/passwd` becomes `%2E%2E%2F%2E%2E%2Fetc%2Fpasswd.jsonl`. Upper-case letters are
//! escaped too (`Chat` → `%43hat`) so that two ids differing only in case stay two files on a
//! case-insensitive file system (macOS, Windows). The mapping is injective and reversible
//! (percent-decoding), except in two marked cases: the empty id is `~empty`, and an id whose
//! encoding is longer than 120 bytes keeps its first ≤ 96 encoded bytes followed by `~` and the
//! 64-bit FNV-1a hash of the whole id, in hex. `~` never appears in any other name. The
//! original id is also in every line's `session`.
//!
//! # Cost on the turn loop
//!
//! The runner calls [`ChunkLog::record`] synchronously for every chunk, so it must stay cheap
//! and never stall the runtime. The chunk is serialized before any lock is taken; each session
//! has one buffered, append-only handle behind its own `std::sync::Mutex`, held for a
//! `write!` into a 16 KiB buffer (a `write` syscall when it fills). The registry of open
//! handles is another mutex, held only to look a session up, and to close the least recently
//! used handle when more than [`DEFAULT_MAX_OPEN_FILES`] are open. Opening a file (reading its
//! tail for the sequence number) happens under the session's lock only, so other sessions keep
//! writing. Buffers are flushed at the end of each turn ([`ChunkLog::record_done`]), when a
//! turn pauses for the person ([`ChunkLog::flush`]), when a handle is evicted, and on drop.
//!
//! # Failures
//!
//! An I/O error never fails or panics the turn: it is logged with `tracing::warn!` once per
//! session (while the session's handle stays registered), the session's chunks are dropped
//! until the end of the turn, and the next turn tries to open the file again.

mod file_name;
mod reopen;

#[cfg(test)]
mod tests;

use std::{
    collections::HashMap,
    fmt,
    fs::{DirBuilder, File},
    io::{self, BufWriter, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use crate::agent::lock;
use crate::protocol::{Chunk, Dialect};

pub use file_name::file_name;
use reopen::open;

/// The environment variable that names the directory.
pub const ENV_VAR: &str = "COUNTERSIGN_CHUNK_LOG";

/// How many session files stay open at once before the least recently used is closed.
pub const DEFAULT_MAX_OPEN_FILES: usize = 256;

/// The `chunk` of the line that ends a turn (the SSE terminator's text).
pub const DONE: &str = "[DONE]";

/// Per-session write buffer.
const BUFFER_BYTES: usize = 16 * 1024;

/// Why the chunk log could not be set up. (Once it runs, errors are logged, never returned.)
#[derive(Debug, thiserror::Error)]
pub enum ChunkLogError {
    #[error("cannot create the chunk log directory {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The recorder of every session's chunks (module docs). Share it as `Arc<ChunkLog>`.
///
/// # Wiring
///
/// The turn loop records what it emits, once, in order — not the transports, which may send a
/// turn's log twice (an SSE resume replays it) and add per-response framing:
///
/// * every emitted chunk: [`ChunkLog::record`] next to the push onto the turn's log;
/// * when the turn pauses for the person: [`ChunkLog::flush`];
/// * when the turn ends (finished, interrupted or failed): [`ChunkLog::record_done`];
/// * at shutdown: [`ChunkLog::flush_all`].
pub struct ChunkLog {
    dir: PathBuf,
    max_open: usize,
    registry: Mutex<Registry>,
}

/// The open handles, by session id.
#[derive(Default)]
struct Registry {
    slots: HashMap<String, Registered>,
    /// A logical clock for least-recently-used eviction.
    tick: u64,
}

struct Registered {
    slot: Arc<Mutex<Slot>>,
    last_used: u64,
}

/// One session's file.
struct Slot {
    path: PathBuf,
    state: State,
    /// Whether this session's failure was already logged.
    warned: bool,
}

enum State {
    /// Registered; the file is opened by the first write.
    Unopened,
    Open {
        out: BufWriter<File>,
        next_sequence: u64,
    },
    /// An I/O error: drop this session's lines until the turn ends.
    Failed,
    /// Evicted from the registry: a writer that still holds this slot looks the session up again.
    Closed,
}

/// What a write into a session's slot did.
enum SlotWrite {
    Done,
    /// The slot was evicted between lookup and lock.
    Retry,
}

impl ChunkLog {
    /// A log writing into `dir`, which is created (with its parents) if missing. On Unix a new
    /// directory is `0700` and new files are `0600`: the lines hold whole conversations.
    pub fn new(dir: PathBuf) -> Result<Self, ChunkLogError> {
        let mut builder = DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder
            .create(&dir)
            .map_err(|source| ChunkLogError::CreateDir {
                dir: dir.clone(),
                source,
            })?;
        tracing::info!(dir = %dir.display(), "recording every session's chunks");
        Ok(ChunkLog {
            dir,
            max_open: DEFAULT_MAX_OPEN_FILES,
            registry: Mutex::new(Registry::default()),
        })
    }

    /// Caps the open handles at `max` (at least 1) instead of [`DEFAULT_MAX_OPEN_FILES`].
    pub fn with_max_open_files(mut self, max: usize) -> Self {
        self.max_open = max.max(1);
        self
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file `session`'s lines go to.
    pub fn path_for(&self, session: &str) -> PathBuf {
        self.dir.join(file_name(session))
    }

    /// Appends one chunk the server sent in `session` (`mode`: `"sse"`, `"bidi"`, …).
    pub fn record(&self, session: &str, mode: &str, chunk: &Chunk, now_ms: i64) {
        // `Full` sends every chunk, so this is always `Some`.
        let Some(json) = chunk.to_json(Dialect::Full) else {
            return;
        };
        self.append(session, mode, &json, now_ms, false);
    }

    /// Appends the `"[DONE]"` line that ends a turn, and flushes the session's file.
    pub fn record_done(&self, session: &str, mode: &str, now_ms: i64) {
        self.append(session, mode, &json_string(DONE), now_ms, true);
    }

    /// Writes out what `session` has buffered (the turn pauses for the person: the file should
    /// be complete for whoever reads it now).
    pub fn flush(&self, session: &str) {
        let slot = lock(&self.registry)
            .slots
            .get(session)
            .map(|r| r.slot.clone());
        if let Some(slot) = slot {
            lock(&slot).flush(session);
        }
    }

    /// Writes out every buffer (graceful shutdown).
    pub fn flush_all(&self) {
        let slots: Vec<(String, Arc<Mutex<Slot>>)> = lock(&self.registry)
            .slots
            .iter()
            .map(|(id, r)| (id.clone(), r.slot.clone()))
            .collect();
        for (session, slot) in slots {
            lock(&slot).flush(&session);
        }
    }

    fn append(&self, session: &str, mode: &str, chunk_json: &str, now_ms: i64, end_of_turn: bool) {
        // Everything but the sequence number is formatted outside the locks.
        let head = format!(
            "{{\"timestamp\":{now_ms},\"session\":{},\"mode\":{},\"direction\":\"out\",\"sequence_number\":",
            json_string(session),
            json_string(mode),
        );
        // A retry only happens when the slot was evicted between lookup and lock; the fresh
        // slot cannot be evicted again before we lock it unless hundreds of sessions start in
        // between, so a few rounds are plenty.
        for _ in 0..4 {
            let slot = self.slot(session);
            let mut slot = lock(&slot);
            match slot.write(session, &head, chunk_json) {
                SlotWrite::Retry => continue,
                SlotWrite::Done => {
                    if end_of_turn {
                        slot.end_turn(session);
                    }
                    return;
                }
            }
        }
    }

    /// The session's slot, registered (and the least recently used one evicted) if need be.
    fn slot(&self, session: &str) -> Arc<Mutex<Slot>> {
        let mut registry = lock(&self.registry);
        registry.tick += 1;
        let tick = registry.tick;
        if let Some(registered) = registry.slots.get_mut(session) {
            registered.last_used = tick;
            return registered.slot.clone();
        }
        while registry.slots.len() >= self.max_open {
            registry.evict_oldest();
        }
        let slot = Arc::new(Mutex::new(Slot {
            path: self.path_for(session),
            state: State::Unopened,
            warned: false,
        }));
        registry.slots.insert(
            session.to_owned(),
            Registered {
                slot: slot.clone(),
                last_used: tick,
            },
        );
        slot
    }
}

impl Registry {
    /// Closes the least recently used handle. Its buffer is flushed while the registry is still
    /// locked, so a writer that reopens the same session afterwards reads a complete tail (and
    /// continues the numbering). The scan is linear: at most a few hundred entries, and only
    /// when a new session arrives at the cap.
    fn evict_oldest(&mut self) {
        let oldest = self
            .slots
            .iter()
            .min_by_key(|(_, r)| r.last_used)
            .map(|(id, _)| id.clone());
        if let Some((session, registered)) = oldest.and_then(|id| self.slots.remove_entry(&id)) {
            let mut slot = lock(&registered.slot);
            slot.flush(&session);
            slot.state = State::Closed;
        }
    }
}

impl Slot {
    fn write(&mut self, session: &str, head: &str, chunk_json: &str) -> SlotWrite {
        if matches!(self.state, State::Unopened) {
            match open(&self.path) {
                Ok((out, next_sequence)) => {
                    self.state = State::Open { out, next_sequence };
                }
                Err(error) => {
                    self.fail(session, "open", error);
                    return SlotWrite::Done;
                }
            }
        }
        let result = match &mut self.state {
            State::Closed => return SlotWrite::Retry,
            State::Unopened | State::Failed => return SlotWrite::Done,
            State::Open { out, next_sequence } => {
                let sequence = *next_sequence;
                *next_sequence = sequence.saturating_add(1);
                writeln!(out, "{head}{sequence},\"chunk\":{chunk_json}}}")
            }
        };
        if let Err(error) = result {
            self.fail(session, "write", error);
        }
        SlotWrite::Done
    }

    fn flush(&mut self, session: &str) {
        if let State::Open { out, .. } = &mut self.state
            && let Err(error) = out.flush()
        {
            self.fail(session, "flush", error);
        }
    }

    /// The turn is over: flush, and give a failed file another chance next turn.
    fn end_turn(&mut self, session: &str) {
        self.flush(session);
        if matches!(self.state, State::Failed) {
            self.state = State::Unopened;
        }
    }

    fn fail(&mut self, session: &str, action: &'static str, error: io::Error) {
        if let State::Open { out, .. } = std::mem::replace(&mut self.state, State::Failed) {
            // Dropping a `BufWriter` retries the write that just failed; take the file out
            // without that (the buffered lines are lost either way).
            let _ = out.into_parts();
        }
        if !self.warned {
            self.warned = true;
            tracing::warn!(
                session,
                path = %self.path.display(),
                action,
                %error,
                "cannot write the chunk log; this session's chunks are not recorded until its turn ends"
            );
        }
    }
}

impl fmt::Debug for ChunkLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkLog")
            .field("dir", &self.dir)
            .field("max_open", &self.max_open)
            .finish_non_exhaustive()
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    // Serializing a `str` cannot fail (serde_json only fails on I/O and non-string map keys).
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}
