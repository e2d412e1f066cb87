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
