//! Memory proportional to the body (issue #33): the real binary reads a chat request without
//! building what it does not need, caps the messages a request may carry and the body bytes one
//! address may have in flight, so its peak resident memory grows by at most three times the
//! bodies it holds at once — whatever those bodies hold. Measured from outside, on the process:
//! the peak (`VmHWM` of `/proc/<pid>/status`, reset through `clear_refs` before each case) less
//! the resident memory before it. No timing is involved: the peak is a high-water mark.
#![cfg(all(feature = "ssr", target_os = "linux"))]

use crate::common;

use common::binary::Binary;
use serde_json::{Value, json};

/// The default `COUNTERSIGN_MAX_BODY_BYTES` (20 MiB); each body here stays just under it.
const MAX_BODY: usize = 20 * 1024 * 1024;
const BODY: usize = MAX_BODY - 512 * 1024;

/// A field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
fn status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the status");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in {text}"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number of kB");
    kib * 1024
}

/// Resets the process's peak resident memory to what it holds now (`clear_refs` 5).
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("clear_refs");
}

/// An AI SDK body for `chat`: `count` messages of about `bytes` bytes in all, alternating
/// person and assistant, the last one the person's new message.
fn conversation(chat: &str, count: usize, bytes: usize) -> Vec<u8> {
    let text_len = (bytes / count).saturating_sub(70).max(1);
    let text = "x".repeat(text_len);
    let mut body = format!(r#"{{"id":"{chat}","trigger":"submit-message","messages":["#);
    for i in 0..count - 1 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        body.push_str(&format!(
            r#"{{"id":"m{i}","role":"{role}","parts":[{{"type":"text","text":"{text}"}}]}},"#
        ));
    }
    body.push_str(r#"{"id":"new","role":"user","parts":[{"type":"text","text":"hello"}]}]}"#);
    body.into_bytes()
}

/// `POST /api/chat` with `body`: the status and the body of the answer.
async fn post(base: String, body: Vec<u8>) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/chat"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.text().await.expect("an answer"))
}

/// Sends `bodies` at once and waits for every answer: the answers, and by how much the
/// server's resident memory rose at its peak meanwhile.
async fn at_once(app: &Binary, bodies: Vec<Vec<u8>>) -> (Vec<(u16, String)>, u64) {
    let pid = app.pid();
    reset_peak(pid);
    let before = status(pid, "VmRSS");
    let sent: Vec<_> = bodies
        .into_iter()
        .map(|body| tokio::spawn(post(app.base.clone(), body)))
        .collect();
    let mut answers = Vec::new();
    for answer in sent {
        answers.push(answer.await.expect("the request task"));
    }
    let peak = status(pid, "VmHWM");
    let rise = peak.saturating_sub(before);
    // Printed for the record (`--nocapture`): bench/results.md quotes it.
    eprintln!(
        "{} bodies: peak resident memory rose by {:.1} MB",
        answers.len(),
        rise as f64 / 1e6
    );
    (answers, rise)
}

async fn server(name: &str, extra: &[(&str, &str)]) -> Binary {
    let db = std::env::temp_dir().join(format!(
        "countersign-body-memory-{}-{name}.db",
        std::process::id()
    ));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let mut env = vec![
        ("COUNTERSIGN_DB", db.display().to_string()),
        ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_owned()),
        ("COUNTERSIGN_WEATHER", "offline".to_owned()),
        // Many requests come from this one address.
        ("COUNTERSIGN_IP_RATE", "0".to_owned()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let app = Binary::start(&env).await;
    // Warm up what a first request sets up (the chat's store, the model), so it is not counted.
    let (status, _) = post(app.base.clone(), conversation("warm-up", 3, 300)).await;
    assert_eq!(status, 200);
    app
}

fn code(answer: &str) -> Value {
    serde_json::from_str::<Value>(answer).unwrap_or(Value::Null)["error"]["code"].clone()
}

/// Two 19.5 MB bodies of 230,000 small messages each, at once. Read as a tree of every message
/// (as before), they took ~2 GB; the server needs the last message and the few before it.
/// More messages than a request may carry are refused with the cap, after a bounded read.
#[tokio::test]
async fn many_small_messages_cost_their_bytes_not_their_count() {
    let app = server("many", &[]).await;
    let bodies: Vec<_> = (0..2)
        .map(|i| conversation(&format!("many-{i}"), 230_000, BODY))
        .collect();
    let in_flight: usize = bodies.iter().map(Vec::len).sum();
    let (answers, rise) = at_once(&app, bodies).await;
    assert!(
        rise <= 3 * in_flight as u64,
        "the peak rose by {} MB for {} MB of bodies",
        rise / 1_000_000,
        in_flight / 1_000_000
    );
    for (status, text) in &answers {
        assert_eq!(*status, 413, "{text}");
        assert_eq!(code(text), json!("too_many_messages"), "{text}");
        assert!(text.contains("10000"), "the cap is named: {text}");
    }
    // A conversation within the cap is answered as ever.
    let (status, text) = post(app.base.clone(), conversation("few", 9, 9_000)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("[DONE]"));
}

/// Two 19.5 MB conversations the server accepts (9,000 messages of 2 KB), at once: each starts
/// its turn, and the peak stays within three times the bodies.
#[tokio::test]
async fn accepted_large_conversations_stay_within_three_times_their_bodies() {
    let app = server("large", &[]).await;
    let bodies: Vec<_> = (0..2)
        .map(|i| conversation(&format!("large-{i}"), 9_000, BODY))
        .collect();
    let in_flight: usize = bodies.iter().map(Vec::len).sum();
    let (answers, rise) = at_once(&app, bodies).await;
    for (status, text) in &answers {
        assert_eq!(*status, 200, "{}", &text[..text.len().min(300)]);
        assert!(text.contains("[DONE]"));
    }
    assert!(
        rise <= 3 * in_flight as u64,
        "the peak rose by {} MB for {} MB of bodies",
        rise / 1_000_000,
        in_flight / 1_000_000
    );
}

/// Five such bodies at once from one address: only as many bytes as the address may have in
/// flight (`COUNTERSIGN_BODY_BYTES_PER_ADDRESS`, here 20 MiB: one body) are read at a time;
/// the others wait their turn and are answered too.
#[tokio::test]
async fn one_address_has_only_its_share_of_bodies_in_flight() {
    let budget = MAX_BODY;
    let app = server(
        "queued",
        &[("COUNTERSIGN_BODY_BYTES_PER_ADDRESS", &budget.to_string())],
    )
    .await;
    let bodies: Vec<_> = (0..5)
        .map(|i| conversation(&format!("queued-{i}"), 9_000, BODY))
        .collect();
    let (answers, rise) = at_once(&app, bodies).await;
    for (status, text) in &answers {
        assert_eq!(*status, 200, "{}", &text[..text.len().min(300)]);
    }
    assert!(
        rise <= 3 * budget as u64,
        "the peak rose by {} MB with {} MB allowed in flight",
        rise / 1_000_000,
        budget / 1_000_000
    );
}
