//! BIDI scenario: `--n` WebSocket sessions each holding one pending approval; the server's RSS
//! before and after (after a warm-up burst of `--warmup` sessions); then `--approve` of them
//! approved one at a time, timed from sending the `tool_result` frame to the
//! `tool-output-available` frame. `--gap-ms` waits that long before each approval (a server
//! that was idle, as it is while a person reads the request; default 0: back to back).
//! `--first TEXT` runs a turn of its own before the payment, on `/api/live?text=hold` (its text
//! one frame), and `--pad-bytes N` adds N bytes of message metadata to the payment's frame: what a
//! socket keeps of the larger frames it sent and received, once it waits again.
//!
//! `ws-concurrency`: `--n` sockets on `/api/live` opened first, then every one starts its turn
//! at once (a `message` frame), read to its `[DONE]`: the BIDI twin of the SSE concurrency
//! scenario.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt, stream};
use serde_json::{Value, json};
use tokio::{net::TcpStream, sync::Barrier};
use tokio_tungstenite::{
    WebSocketStream, client_async_with_config,
    tungstenite::{Message, protocol::WebSocketConfig},
};

use crate::{
    Opts, Result,
    sse::{Conn, PAYMENT_PROMPT, Watch},
    stats::{ms, round, summary},
};

type Ws = WebSocketStream<TcpStream>;

/// A session paused at its approval.
struct Session {
    ws: Ws,
    approval_id: String,
}

async fn next_text(ws: &mut Ws, timeout: Duration) -> Result<String> {
    loop {
        let message = tokio::time::timeout(timeout, ws.next())
            .await
            .map_err(|_| format!("no frame within {timeout:?}"))?;
        match message {
            None => return Err("the server closed the socket".into()),
            Some(Err(e)) => return Err(format!("read: {e}")),
            Some(Ok(Message::Text(text))) => return Ok(text.to_string()),
            Some(Ok(Message::Close(frame))) => {
                return Err(format!("the server closed the socket: {frame:?}"));
            }
            Some(Ok(_)) => continue,
        }
    }
}

/// The chunk of a `data: {json}` frame; `None` for `[DONE]` and control frames.
fn chunk_of(text: &str) -> Option<Value> {
    let data = text.strip_prefix("data: ")?.trim_end();
    if data == "[DONE]" {
        return None;
    }
    serde_json::from_str(data).ok()
}

/// What a session does before it pauses at the payment (`--first`, `--pad-bytes`).
#[derive(Debug, Clone, Default)]
struct Before {
    first: Option<String>,
    pad_bytes: usize,
}

/// Sends a `message` frame to `chat` and reads to `[DONE]`.
async fn whole_turn(ws: &mut Ws, chat: &str, text: &str, timeout: Duration) -> Result<()> {
    let frame = json!({
        "type": "message", "id": chat, "trigger": "submit-message",
        "messages": [{"id": format!("{chat}-first"), "role": "user",
                      "parts": [{"type": "text", "text": text}]}],
    });
    ws.send(Message::Text(frame.to_string().into()))
        .await
        .map_err(|e| format!("send: {e}"))?;
    while !next_text(ws, timeout).await?.starts_with("data: [DONE]") {}
    Ok(())
}

/// Opens a socket; with `chat`, starts a payment there and waits until it pauses for approval.
async fn open(addr: SocketAddr, chat: Option<String>, timeout: Duration) -> Result<Session> {
    open_after(addr, chat, timeout, &Before::default()).await
}

async fn open_after(
    addr: SocketAddr,
    chat: Option<String>,
    timeout: Duration,
    before: &Before,
) -> Result<Session> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let query = if before.first.is_some() {
        "?text=hold"
    } else {
        ""
    };
    let url = format!("ws://{addr}/api/live{query}");
    // Small buffers: tungstenite zero-fills its whole read buffer (128 KiB by default) on every
    // read, which for 10k sockets would be 1.3 GB in this process.
    let config = WebSocketConfig::default()
        .read_buffer_size(8 * 1024)
        .write_buffer_size(0);
    let (mut ws, _) = client_async_with_config(url.as_str(), tcp, Some(config))
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    let Some(chat) = chat else {
        return Ok(Session {
            ws,
            approval_id: String::new(),
        });
    };
    if let Some(first) = &before.first {
        whole_turn(&mut ws, &chat, first, timeout).await?;
    }
    let mut message = json!({"id": format!("{chat}-u"), "role": "user",
                             "parts": [{"type": "text", "text": PAYMENT_PROMPT}]});
    if before.pad_bytes > 0 {
        message["metadata"] = json!({ "pad": "x".repeat(before.pad_bytes) });
    }
    let frame = json!({
        "type": "message", "id": chat, "trigger": "submit-message",
        "messages": [message],
    });
    ws.send(Message::Text(frame.to_string().into()))
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut approval_id = None;
    loop {
        let text = next_text(&mut ws, timeout).await?;
        let Some(chunk) = chunk_of(&text) else {
            if text.contains("[DONE]") {
                return Err("the turn ended without an approval request".into());
            }
            continue;
        };
        match chunk["type"].as_str() {
            Some("tool-approval-request") => {
                approval_id = chunk["approvalId"].as_str().map(str::to_string);
            }
            Some("finish-step") if approval_id.is_some() => {
                return Ok(Session {
                    ws,
                    approval_id: approval_id.unwrap_or_default(),
                });
            }
            Some("error") => return Err(format!("error chunk: {chunk}")),
            _ => {}
        }
    }
}

/// Approves one session: the time from sending the frame to `tool-output-available`, and to
/// `[DONE]`.
async fn approve(session: &mut Session, timeout: Duration) -> Result<(Duration, Duration)> {
    let frame = json!({"type": "tool_result", "toolCallId": session.approval_id,
                       "result": {"confirmed": true}});
    let text = frame.to_string();
    let sent = Instant::now();
    session
        .ws
        .send(Message::Text(text.into()))
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut output = None;
    loop {
        let text = next_text(&mut session.ws, timeout).await?;
        if output.is_none() && text.contains(r#""type":"tool-output-available""#) {
            output = Some(sent.elapsed());
        }
        if text.starts_with("data: [DONE]") {
            let output = output.ok_or("the turn ended without tool-output-available")?;
            return Ok((output, sent.elapsed()));
        }
        if let Some(chunk) = chunk_of(&text)
            && chunk["type"] == "error"
        {
            return Err(format!("error chunk: {chunk}"));
        }
    }
}

/// VmRSS of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e} (is the server running?)"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("/proc/{pid}/status has no VmRSS"))
}

/// Runs the collector of the Node baseline (`--gc-url`), then waits for things to settle.
async fn settle(gc: Option<(SocketAddr, String)>, wait: Duration) -> Result<()> {
    if let Some((addr, path)) = gc {
        let mut conn = Conn::connect(addr).await?;
        // The answer is JSON, not SSE: only the request matters.
        let _ = conn.post(&path, &json!({}), &Watch::default()).await?;
    }
    tokio::time::sleep(wait).await;
    Ok(())
}

fn gc_target(url: Option<String>) -> Result<Option<(SocketAddr, String)>> {
    let Some(url) = url else { return Ok(None) };
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--gc-url {url:?}: expected http://IP:PORT/path"))?;
    let (hostport, path) = rest.split_once('/').unwrap_or((rest, ""));
    let addr = hostport
        .parse()
        .map_err(|e| format!("--gc-url {url:?}: {e}"))?;
    Ok(Some((addr, format!("/{path}"))))
}

pub async fn bidi(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let pid: u32 = opts
        .required("pid")?
        .parse()
        .map_err(|_| "--pid: expected a process id".to_string())?;
    let n = opts.num("n", 1000)? as usize;
    let approvals = opts.num("approve", 300)? as usize;
    let parallel = opts.num("parallel", 128)?.max(1) as usize;
    let settle_for = Duration::from_millis(opts.num("settle-ms", 2000)?);
    let timeout = opts.timeout()?;
    let gc = gc_target(opts.opt("gc-url"))?;
    let tag = crate::run_tag();

    // Warm the server up before the baseline is read, with a burst of the measurement's shape
    // (`--warmup` sessions, default one wave of `--parallel`, opened at once, approved, closed):
    // lazy statics, code paths paged in, each thread's allocator arena and the JIT (Node) reach
    // their working size, so what is measured is what the sessions themselves cost.
    let socket_only = opts.num("socket-only", 0)? == 1;
    let shape = Before {
        first: opts.opt("first"),
        pad_bytes: opts.num("pad-bytes", 0)? as usize,
    };
    let warmup = opts.num("warmup", parallel as u64)?.max(1) as usize;
    let warm: Vec<Result<Session>> = stream::iter(0..warmup)
        .map(|i| open_after(addr, Some(format!("{tag}-warm-{i}")), timeout, &shape))
        .buffer_unordered(parallel)
        .collect()
        .await;
    for session in warm {
        approve(&mut session?, timeout).await?;
    }
    settle(gc.clone(), settle_for).await?;
    let before = rss_kib(pid)?;

    let started = Instant::now();
    let opened: Vec<Result<Session>> = stream::iter(0..n)
        .map(|i| {
            let chat = (!socket_only).then(|| format!("{tag}-{i}"));
            open_after(addr, chat, timeout, &shape)
        })
        .buffer_unordered(parallel)
        .collect()
        .await;
    let open_s = started.elapsed().as_secs_f64();
    let mut sessions = Vec::new();
    let mut kinds = std::collections::BTreeMap::<String, u64>::new();
    for s in opened {
        match s {
            Ok(s) => sessions.push(s),
            Err(e) => *kinds.entry(e.chars().take(120).collect()).or_default() += 1,
        }
    }
    let errors: u64 = kinds.values().sum();
    settle(gc.clone(), settle_for).await?;
    let after = rss_kib(pid)?;
    let per_session = if sessions.is_empty() {
        0.0
    } else {
        (after as f64 - before as f64) * 1024.0 / sessions.len() as f64
    };

    // Approve an evenly spread sample, one at a time, with every other session still open.
    let mut rtt = Vec::new();
    let mut done = Vec::new();
    let mut approve_errors = 0u64;
    let approvals = if socket_only { 0 } else { approvals };
    let step = (sessions.len() / approvals.max(1)).max(1);
    let gap = Duration::from_millis(opts.num("gap-ms", 0)?);
    for session in sessions.iter_mut().step_by(step).take(approvals) {
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        match approve(session, timeout).await {
            Ok((output, end)) => {
                rtt.push(ms(output));
                done.push(ms(end));
            }
            Err(e) => {
                approve_errors += 1;
                *kinds
                    .entry(format!(
                        "approve: {}",
                        e.chars().take(100).collect::<String>()
                    ))
                    .or_default() += 1;
            }
        }
    }
    let held = sessions.len();
    drop(sessions);
    Ok(json!({
        "n": n,
        "socket_only": socket_only,
        "sessions": held,
        "errors": errors,
        "approve_errors": approve_errors,
        "error_kinds": kinds,
        "open_s": round(open_s * 1000.0) / 1000.0,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "bytes_per_session": per_session.round(),
        "round_trip_ms": summary(&rtt),
        "done_ms": summary(&done),
    }))
}

/// One turn on an open socket: the times to the first chunk and to `[DONE]`, and the chunks.
struct TurnTimes {
    first_chunk: Duration,
    done: Duration,
    chunks: u64,
}

async fn turn(
    session: &mut Session,
    chat: &str,
    prompt: &str,
    timeout: Duration,
) -> Result<TurnTimes> {
    let frame = json!({
        "type": "message", "id": chat, "trigger": "submit-message",
        "messages": [{"id": format!("{chat}-u"), "role": "user",
                      "parts": [{"type": "text", "text": prompt}]}],
    });
    let sent = Instant::now();
    session
        .ws
        .send(Message::Text(frame.to_string().into()))
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut first_chunk = None;
    let mut chunks = 0u64;
    loop {
        let text = next_text(&mut session.ws, timeout).await?;
        if text.starts_with("data: [DONE]") {
            return Ok(TurnTimes {
                first_chunk: first_chunk.ok_or("[DONE] without a chunk")?,
                done: sent.elapsed(),
                chunks,
            });
        }
        if !text.starts_with("data: ") {
            continue;
        }
        first_chunk.get_or_insert_with(|| sent.elapsed());
        chunks += 1;
        if text.contains(r#""type":"error""#) {
            return Err(format!("error chunk: {text}"));
        }
    }
}

pub async fn concurrency(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let prompt = opts.str("prompt", "Tell me a story.");
    let n = opts.num("n", 1000)? as usize;
    let parallel = opts.num("connect-parallel", 100)?.max(1) as usize;
    let timeout = opts.timeout()?;
    let tag = crate::run_tag();

    let opened: Vec<Result<Session>> = stream::iter(0..n)
        .map(|_| open(addr, None, timeout))
        .buffer_unordered(parallel)
        .collect()
        .await;
    let mut errors: Vec<String> = Vec::new();
    let mut sessions = Vec::new();
    for s in opened {
        match s {
            Ok(s) => sessions.push(s),
            Err(e) => errors.push(e),
        }
    }
    let barrier = Arc::new(Barrier::new(sessions.len() + 1));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, mut session) in sessions.into_iter().enumerate() {
        let barrier = barrier.clone();
        let chat = format!("{tag}-{i}");
        let prompt = prompt.clone();
        tasks.spawn(async move {
            barrier.wait().await;
            let result = turn(&mut session, &chat, &prompt, timeout).await;
            drop(session);
            result
        });
    }
    barrier.wait().await;
    let go = Instant::now();
    let (mut first, mut done) = (Vec::new(), Vec::new());
    let mut chunk_counts = std::collections::BTreeMap::<u64, u64>::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(t)) => {
                first.push(ms(t.first_chunk));
                done.push(ms(t.done));
                *chunk_counts.entry(t.chunks).or_default() += 1;
            }
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(format!("task: {e}")),
        }
    }
    let wall = go.elapsed();
    // Every turn streams the same script: a turn with another chunk count lost chunks.
    let expected = chunk_counts
        .iter()
        .max_by_key(|(_, count)| **count)
        .map(|(chunks, _)| *chunks)
        .unwrap_or(0);
    let short: u64 = chunk_counts
        .iter()
        .filter(|(chunks, _)| **chunks != expected)
        .map(|(_, count)| *count)
        .sum();
    let mut kinds = std::collections::BTreeMap::<String, u64>::new();
    for e in &errors {
        *kinds.entry(e.chars().take(120).collect()).or_default() += 1;
    }
    Ok(json!({
        "n": n,
        "ok": done.len(),
        "errors": errors.len() as u64 + short,
        "error_kinds": kinds,
        "chunk_count_mismatches": short,
        "chunks_per_turn": expected,
        "wall_ms": round(ms(wall)),
        "first_chunk_ms": summary(&first),
        "done_ms": summary(&done),
    }))
}
