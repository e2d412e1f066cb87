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

use crate::agent::lock;
use std::{
    collections::HashMap,
    fmt,
    fs::{DirBuilder, File, OpenOptions},
    io::{self, BufWriter, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use serde::Deserialize;

use crate::protocol::{Chunk, Dialect};

/// The environment variable that names the directory.
pub const ENV_VAR: &str = "COUNTERSIGN_CHUNK_LOG";

/// How many session files stay open at once before the least recently used is closed.
pub const DEFAULT_MAX_OPEN_FILES: usize = 256;

/// The `chunk` of the line that ends a turn (the SSE terminator's text).
pub const DONE: &str = "[DONE]";

/// The extension of every session file.
const EXTENSION: &str = ".jsonl";

/// Names whose encoding is longer than this are shortened and hashed (well under the 255 bytes
/// most file systems allow, leaving room for the extension).
const MAX_STEM: usize = 120;

/// How much of a too-long encoding a hashed name keeps.
const KEPT_BEFORE_HASH: usize = 96;

/// Per-session write buffer.
const BUFFER_BYTES: usize = 16 * 1024;

/// First tail read when reopening a file; grows ×8 while the last line is longer.
const TAIL_WINDOW: u64 = 64 * 1024;

/// Past this, give up on finding the last line and count lines instead (streaming, so a huge
/// last line costs time once, not memory).
const MAX_TAIL_WINDOW: u64 = 16 * 1024 * 1024;

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

/// The bytes a file name keeps: lower-case letters, digits, `-` and `_`; upper-case letters are
/// escaped so that ids differing only in case stay apart on case-insensitive file systems.
const FILE_NAME: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .add(b'A')
    .add(b'B')
    .add(b'C')
    .add(b'D')
    .add(b'E')
    .add(b'F')
    .add(b'G')
    .add(b'H')
    .add(b'I')
    .add(b'J')
    .add(b'K')
    .add(b'L')
    .add(b'M')
    .add(b'N')
    .add(b'O')
    .add(b'P')
    .add(b'Q')
    .add(b'R')
    .add(b'S')
    .add(b'T')
    .add(b'U')
    .add(b'V')
    .add(b'W')
    .add(b'X')
    .add(b'Y')
    .add(b'Z')
    .remove(b'-')
    .remove(b'_');

/// The file name of `session`'s log: see "Where the file of a session is" in the module docs.
pub fn file_name(session: &str) -> String {
    if session.is_empty() {
        return format!("~empty{EXTENSION}");
    }
    let mut stem = percent_encoding::percent_encode(session.as_bytes(), FILE_NAME).to_string();
    if stem.len() > MAX_STEM {
        // Cut on an escape boundary, never inside `%XX`.
        let bytes = stem.as_bytes();
        let mut end = 0;
        while end < bytes.len() {
            let width = if bytes[end] == b'%' { 3 } else { 1 };
            if end + width > KEPT_BEFORE_HASH {
                break;
            }
            end += width;
        }
        stem = format!("{}~{:016x}", &stem[..end], fnv1a64(session.as_bytes()));
    }
    stem.push_str(EXTENSION);
    stem
}

/// 64-bit FNV-1a: stable across Rust versions (unlike `DefaultHasher`), so a long id maps to
/// the same file after an upgrade. Not collision-resistant against a crafted id; the worst a
/// collision does is put two debug logs in one file.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Opens (or creates) a session file for appending; returns the writer and the next number.
fn open(path: &Path) -> io::Result<(BufWriter<File>, u64)> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    let tail = read_tail(&mut file)?;
    let mut out = BufWriter::with_capacity(BUFFER_BYTES, file);
    if !tail.ends_with_newline {
        out.write_all(b"\n")?;
    }
    Ok((out, tail.last_sequence.saturating_add(1)))
}

/// What the end of an existing file says.
struct Tail {
    /// The number of the last line (0 for an empty file).
    last_sequence: u64,
    /// False when the last line was cut short (or the file is not ours).
    ends_with_newline: bool,
}

/// Just the number of a line; serde skips the rest (the chunk) without building it.
#[derive(Deserialize)]
struct Numbered {
    sequence_number: u64,
}

/// Reads backwards from the end until the last complete line with a `sequence_number`.
fn read_tail(file: &mut File) -> io::Result<Tail> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Tail {
            last_sequence: 0,
            ends_with_newline: true,
        });
    }
    let mut window = TAIL_WINDOW;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        Read::by_ref(file).take(len - start).read_to_end(&mut buf)?;
        let ends_with_newline = buf.last() == Some(&b'\n');
        // Complete lines end with a newline; when the window starts mid-file its first line may
        // be cut, so it does not count.
        let mut lines: Vec<&[u8]> = match buf.iter().rposition(|&b| b == b'\n') {
            Some(last) => buf[..last].split(|&b| b == b'\n').collect(),
            None => Vec::new(),
        };
        if start > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        if let Some(found) = lines
            .iter()
            .rev()
            .find_map(|line| serde_json::from_slice::<Numbered>(line).ok())
        {
            return Ok(Tail {
                last_sequence: found.sequence_number,
                ends_with_newline,
            });
        }
        if start == 0 || window >= MAX_TAIL_WINDOW {
            return Ok(Tail {
                last_sequence: count_lines(file)?,
                ends_with_newline,
            });
        }
        window = window.saturating_mul(8).min(MAX_TAIL_WINDOW);
    }
}

/// The number of newline-terminated lines (the fallback numbering).
fn count_lines(file: &mut File) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0; 64 * 1024];
    let mut lines = 0u64;
    loop {
        let read = match file.read(&mut buf) {
            Ok(0) => return Ok(lines),
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        lines += buf[..read].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    // Serializing a `str` cannot fail (serde_json only fails on I/O and non-string map keys).
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashSet,
        fs,
        sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    };

    use serde_json::{Value, json};

    use super::*;
    use crate::protocol::FinishReason;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!(
                "countersign-chunk-log-{name}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&path);
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
            let _ = fs::remove_file(&self.0);
        }
    }

    fn lines(path: &Path) -> Vec<Value> {
        fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn numbers(path: &Path) -> Vec<u64> {
        lines(path)
            .iter()
            .map(|l| l["sequence_number"].as_u64().unwrap())
            .collect()
    }

    #[test]
    fn lines_have_the_browser_log_shape_and_a_done_line_ends_the_turn() {
        let dir = TempDir::new("shape");
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        log.record("chat-1", "sse", &Chunk::start("m-1"), 1_000);
        log.record(
            "chat-1",
            "sse",
            &Chunk::text_delta("t", "Hi \"you\""),
            1_001,
        );
        log.record("chat-1", "sse", &Chunk::finish(FinishReason::Stop), 1_002);
        log.record_done("chat-1", "sse", 1_003);

        let text = fs::read_to_string(log.path_for("chat-1")).unwrap();
        let expected = [
            r#"{"timestamp":1000,"session":"chat-1","mode":"sse","direction":"out","sequence_number":1,"chunk":{"type":"start","messageId":"m-1"}}"#,
            r#"{"timestamp":1001,"session":"chat-1","mode":"sse","direction":"out","sequence_number":2,"chunk":{"type":"text-delta","id":"t","delta":"Hi \"you\""}}"#,
            r#"{"timestamp":1002,"session":"chat-1","mode":"sse","direction":"out","sequence_number":3,"chunk":{"type":"finish","finishReason":"stop"}}"#,
            r#"{"timestamp":1003,"session":"chat-1","mode":"sse","direction":"out","sequence_number":4,"chunk":"[DONE]"}"#,
        ];
        assert_eq!(text, expected.join("\n") + "\n");
    }

    #[test]
    fn the_chunk_is_recorded_in_the_full_dialect() {
        let dir = TempDir::new("dialect");
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        // `signature` and unknown types are dropped by V6Strict, kept by Full.
        let request = Chunk::from_value(json!({
            "type": "tool-approval-request", "approvalId": "a", "toolCallId": "c", "signature": "s"
        }))
        .unwrap();
        let unknown = Chunk::from_value(json!({"type": "reasoning-file", "url": "u"})).unwrap();
        log.record("s", "bidi", &request, 1);
        log.record("s", "bidi", &unknown, 2);
        log.flush("s");
        let lines = lines(&log.path_for("s"));
        assert_eq!(lines[0]["chunk"]["signature"], "s");
        assert_eq!(lines[0]["mode"], "bidi");
        assert_eq!(
            lines[1]["chunk"],
            json!({"type": "reasoning-file", "url": "u"})
        );
    }

    #[test]
    fn numbers_continue_across_turns_and_restarts() {
        let dir = TempDir::new("restart");
        {
            let log = ChunkLog::new(dir.0.clone()).unwrap();
            for turn in 0..2 {
                log.record("c", "sse", &Chunk::start(format!("m{turn}")), 10);
                log.record("c", "sse", &Chunk::start_step(), 11);
                log.record("c", "sse", &Chunk::finish_step(), 12);
                log.record_done("c", "sse", 13);
            }
            log.record("other", "bidi", &Chunk::start("x"), 14);
            log.record_done("other", "bidi", 15);
        }
        let path = dir.0.join(file_name("c"));
        assert_eq!(numbers(&path), (1..=8).collect::<Vec<_>>());

        // A new process: numbering goes on from the file.
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        log.record("c", "bidi", &Chunk::start("m2"), 20);
        log.record_done("c", "bidi", 21);
        assert_eq!(numbers(&path), (1..=10).collect::<Vec<_>>());
        assert_eq!(numbers(&log.path_for("other")), vec![1, 2]);
    }

    #[test]
    fn a_torn_last_line_stays_apart_and_numbering_goes_on_from_the_last_complete_one() {
        let dir = TempDir::new("torn");
        let path = {
            let log = ChunkLog::new(dir.0.clone()).unwrap();
            log.record("c", "sse", &Chunk::start("m"), 1);
            log.record_done("c", "sse", 2);
            log.path_for("c")
        };
        // The process died in the middle of line 3.
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(br#"{"timestamp":3,"session":"c","mo"#)
            .unwrap();

        let log = ChunkLog::new(dir.0.clone()).unwrap();
        log.record("c", "sse", &Chunk::start("n"), 4);
        log.flush("c");
        let text = fs::read_to_string(&path).unwrap();
        let all: Vec<&str> = text.lines().collect();
        assert_eq!(all.len(), 4, "{text}");
        assert_eq!(all[2], r#"{"timestamp":3,"session":"c","mo"#);
        let last: Value = serde_json::from_str(all[3]).unwrap();
        assert_eq!(last["sequence_number"], 3);
    }

    #[test]
    fn a_foreign_file_is_numbered_after_its_lines() {
        let dir = TempDir::new("foreign");
        fs::create_dir_all(&dir.0).unwrap();
        fs::write(dir.0.join(file_name("c")), "not json\nnor this\n").unwrap();
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        log.record("c", "sse", &Chunk::start("m"), 1);
        log.flush("c");
        let text = fs::read_to_string(log.path_for("c")).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["sequence_number"], 3);
    }

    #[test]
    fn a_long_last_line_is_found_beyond_the_first_tail_window() {
        let dir = TempDir::new("long-line");
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        let big = "x".repeat(200 * 1024);
        log.record("c", "sse", &Chunk::start("m"), 1);
        log.record("c", "sse", &Chunk::text_delta("t", big), 2);
        log.record_done("c", "sse", 3);
        log.record(
            "c",
            "sse",
            &Chunk::text_delta("t", "y".repeat(300 * 1024)),
            4,
        );
        drop(log);
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        log.record("c", "sse", &Chunk::start("n"), 5);
        log.flush("c");
        assert_eq!(numbers(&log.path_for("c")), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn hostile_session_ids_map_to_distinct_safe_files_inside_the_dir() {
        let dir = TempDir::new("hostile");
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        let long_a = "a".repeat(5_000);
        let long_b = format!("{}b", "a".repeat(4_999));
        let accents = "é".repeat(200);
        let ids: Vec<String> = [
            "../../etc/passwd",
            "..",
            ".",
            "a/b",
            "a\\b",
            "a%2Fb",
            "",
            "~empty",
            "%7Eempty",
            "Chat",
            "chat",
            "CHAT",
            "日本語のチャット",
            "emoji 🙂 id",
            "nul\0byte",
            "line\nbreak",
            "con",
            ".hidden",
            long_a.as_str(),
            long_b.as_str(),
            accents.as_str(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();

        let mut names = HashSet::new();
        for id in &ids {
            let name = file_name(id);
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_%~.".contains(&b)),
                "{name}"
            );
            assert!(!name.starts_with('.'), "{name}");
            assert!(name.ends_with(".jsonl") && name.len() <= 130, "{name}");
            // Distinct even on a case-insensitive file system.
            assert!(names.insert(name.to_ascii_lowercase()), "{id:?} collides");
            log.record(id, "sse", &Chunk::start("m"), 1);
            log.record_done(id, "sse", 2);
        }
        assert_eq!(
            file_name("../../etc/passwd"),
            "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd.jsonl"
        );
        assert_eq!(file_name("Chat"), "%43hat.jsonl");
        assert_eq!(file_name("chat-1_a"), "chat-1_a.jsonl");

        let entries: Vec<PathBuf> = fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(entries.len(), ids.len());
        for entry in &entries {
            assert_eq!(entry.parent(), Some(dir.0.as_path()));
            assert!(entry.is_file());
        }
        // Each file holds its own session, which is recorded verbatim in the lines.
        for id in &ids {
            let lines = lines(&log.path_for(id));
            assert_eq!(lines.len(), 2);
            assert_eq!(lines[0]["session"], id.as_str());
        }
        // Nothing escaped the directory.
        assert!(!dir.0.parent().unwrap().join("etc").exists());
    }

    /// Counts `warn` events (the only thing these tests need from a subscriber).
    struct CountWarnings(Arc<AtomicUsize>);

    impl tracing::Subscriber for CountWarnings {
        fn register_callsite(
            &self,
            _: &'static tracing::Metadata<'static>,
        ) -> tracing::subscriber::Interest {
            tracing::subscriber::Interest::sometimes()
        }
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if *event.metadata().level() == tracing::Level::WARN {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn an_unwritable_dir_warns_once_per_session_and_recovers_at_the_next_turn() {
        let dir = TempDir::new("unwritable");
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        // Tests may run as root, where permissions do not stop writes: put a plain file where
        // the directory should be instead.
        fs::remove_dir_all(&dir.0).unwrap();
        fs::write(&dir.0, "in the way").unwrap();

        let warnings = Arc::new(AtomicUsize::new(0));
        tracing::subscriber::with_default(CountWarnings(warnings.clone()), || {
            for _ in 0..3 {
                log.record("a", "sse", &Chunk::start("m"), 1);
                log.record("b", "sse", &Chunk::start("m"), 1);
            }
            log.flush("a");
            log.flush_all();
        });
        assert_eq!(warnings.load(Ordering::SeqCst), 2);

        // The directory comes back; the next turn is recorded.
        tracing::subscriber::with_default(CountWarnings(warnings.clone()), || {
            log.record_done("a", "sse", 2);
            fs::remove_file(&dir.0).unwrap();
            fs::create_dir(&dir.0).unwrap();
            log.record("a", "sse", &Chunk::start("n"), 3);
            log.record_done("a", "sse", 4);
        });
        assert_eq!(warnings.load(Ordering::SeqCst), 2);
        assert_eq!(numbers(&log.path_for("a")), vec![1, 2]);
    }

    #[test]
    fn a_missing_dir_is_created_and_a_file_in_its_place_is_an_error() {
        let dir = TempDir::new("create");
        let nested = dir.0.join("a/b");
        ChunkLog::new(nested.clone()).unwrap();
        assert!(nested.is_dir());

        let file = dir.0.join("file");
        fs::write(&file, "").unwrap();
        let error = ChunkLog::new(file.clone()).unwrap_err();
        assert!(matches!(error, ChunkLogError::CreateDir { ref dir, .. } if *dir == file));
        assert!(error.to_string().contains("chunk log directory"), "{error}");
    }

    #[test]
    fn the_least_recently_used_handle_is_closed_and_flushed_and_reopens_in_sequence() {
        let dir = TempDir::new("lru");
        let log = ChunkLog::new(dir.0.clone()).unwrap().with_max_open_files(2);
        log.record("a", "sse", &Chunk::start("m"), 1);
        log.record("b", "sse", &Chunk::start("m"), 1);
        log.record("a", "sse", &Chunk::start_step(), 2);
        // "b" is the oldest now; "c" evicts it, which flushes its buffer.
        log.record("c", "sse", &Chunk::start("m"), 3);
        assert_eq!(numbers(&log.path_for("b")), vec![1]);
        assert_eq!(lock(&log.registry).slots.len(), 2);
        log.record("b", "sse", &Chunk::start_step(), 4);
        log.flush_all();
        assert_eq!(numbers(&log.path_for("b")), vec![1, 2]);
        assert_eq!(numbers(&log.path_for("a")), vec![1, 2]);
    }

    #[test]
    fn lines_are_buffered_until_a_flush() {
        let dir = TempDir::new("buffered");
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        log.record("c", "sse", &Chunk::start("m"), 1);
        assert_eq!(fs::read_to_string(log.path_for("c")).unwrap(), "");
        log.flush("c");
        assert_eq!(numbers(&log.path_for("c")), vec![1]);
        // Flushing a session that never wrote is a no-op.
        log.flush("nobody");
        assert!(!log.path_for("nobody").exists());
    }

    #[test]
    fn concurrent_writers_of_one_session_never_share_a_number() {
        let dir = TempDir::new("threads");
        let log = Arc::new(ChunkLog::new(dir.0.clone()).unwrap().with_max_open_files(3));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        log.record("shared", "sse", &Chunk::start_step(), i);
                        // Churn other sessions so "shared" is evicted and reopened now and then.
                        log.record(
                            &format!("own-{t}-{}", i % 5),
                            "sse",
                            &Chunk::start_step(),
                            i,
                        );
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        log.flush_all();
        // In file order: a line is numbered and written under the same lock.
        assert_eq!(
            numbers(&log.path_for("shared")),
            (1..=800).collect::<Vec<_>>()
        );
    }
}
