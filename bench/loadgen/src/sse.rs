//! SSE scenarios: `POST /api/chat` over HTTP/1.1 keep-alive connections (hyper), reading the
//! `data: …\n\n` frames as they arrive without decoding the JSON of text deltas.

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1::SendRequest, header};
use hyper_util::rt::TokioIo;
use memchr::memmem;
use serde_json::{Value, json};
use tokio::{net::TcpStream, sync::Barrier};

use crate::{
    Opts, Result,
    stats::{ms, round, summary},
};

pub const PAYMENT_PROMPT: &str = "Send $50 to Hanako";

/// One HTTP/1.1 connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> Result<Conn> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("handshake {addr}: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            sender,
            host: addr.to_string(),
        })
    }

    /// POSTs JSON to `path` and reads the SSE answer to its end.
    pub async fn post(&mut self, path: &str, body: &Value, watch: &Watch) -> Result<ResponseStats> {
        let request = Request::post(path)
            .header(header::HOST, &self.host)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "text/event-stream")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection not ready: {e}"))?;
        let sent = Instant::now();
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let mut out = ResponseStats {
            status: response.status().as_u16(),
            headers: sent.elapsed(),
            ..ResponseStats::default()
        };
        let mut body = response.into_body();
        let mut parser = Parser::default();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("body: {e}"))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let now = sent.elapsed();
            out.bytes += data.len() as u64;
            parser.push(&data, |payload| out.on_payload(payload, now, watch));
        }
        out.total = sent.elapsed();
        Ok(out)
    }
}

/// What to look for while reading.
#[derive(Debug, Default, Clone)]
pub struct Watch {
    /// Record when a chunk containing this text first arrives (e.g. `tool-output-available`).
    pub marker: Option<&'static str>,
    /// Keep every chunk's JSON text.
    pub collect: bool,
}

/// What one response did, times from the moment the request was handed to the socket.
#[derive(Debug, Default)]
pub struct ResponseStats {
    pub status: u16,
    pub headers: Duration,
    pub first_chunk: Option<Duration>,
    pub first_text: Option<Duration>,
    pub marker: Option<Duration>,
    pub done: Option<Duration>,
    pub total: Duration,
    pub chunks: u64,
    pub text_deltas: u64,
    pub bytes: u64,
    pub collected: Vec<String>,
    pub error_body: String,
}

impl ResponseStats {
    fn on_payload(&mut self, payload: &[u8], now: Duration, watch: &Watch) {
        if payload == b"[DONE]" {
            self.done.get_or_insert(now);
            return;
        }
        if self.status != 200 {
            self.error_body.push_str(&String::from_utf8_lossy(payload));
        }
        self.chunks += 1;
        self.first_chunk.get_or_insert(now);
        if memmem::find(payload, br#""type":"text-delta""#).is_some() {
            self.text_deltas += 1;
            self.first_text.get_or_insert(now);
        }
        if let Some(marker) = watch.marker
            && self.marker.is_none()
            && memmem::find(payload, marker.as_bytes()).is_some()
        {
            self.marker = Some(now);
        }
        if watch.collect {
            self.collected
                .push(String::from_utf8_lossy(payload).into_owned());
        }
    }

    /// The collected chunks as JSON.
    pub fn chunks_json(&self) -> Vec<Value> {
        self.collected
            .iter()
            .filter_map(|c| serde_json::from_str(c).ok())
            .collect()
    }

    fn check(&self) -> Result<()> {
        if self.status != 200 {
            return Err(format!(
                "HTTP {}: {}",
                self.status,
                self.error_body.chars().take(200).collect::<String>()
            ));
        }
        if self.done.is_none() {
            return Err("the stream ended without [DONE]".into());
        }
        Ok(())
    }
}

/// Splits a byte stream into SSE events (`\n\n`-terminated) and hands over the payload of each
/// `data: ` line. A non-`data` event (a `:` keep-alive comment) is skipped.
#[derive(Default)]
struct Parser {
    buf: Vec<u8>,
}

impl Parser {
    fn push(&mut self, data: &[u8], mut on_payload: impl FnMut(&[u8])) {
        let search_from = self.buf.len().saturating_sub(1);
        self.buf.extend_from_slice(data);
        let mut start = 0;
        let mut from = search_from;
        while let Some(at) = memmem::find(&self.buf[from..], b"\n\n") {
            let end = from + at;
            let event = &self.buf[start..end];
            for line in event.split(|b| *b == b'\n') {
                if let Some(payload) = line.strip_prefix(b"data: ") {
                    on_payload(payload);
                } else if let Some(payload) = line.strip_prefix(b"data:") {
                    on_payload(payload);
                }
            }
            start = end + 2;
            from = start;
        }
        self.buf.drain(..start);
    }
}

pub fn user_message(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

fn turn_body(chat: &str, text: &str) -> Value {
    json!({
        "id": chat,
        "messages": [user_message(&format!("{chat}-u"), text)],
        "trigger": "submit-message",
    })
}

fn stream_report(o: &ResponseStats) -> Value {
    let total_s = o.total.as_secs_f64().max(1e-9);
    json!({
        "headers_ms": round(ms(o.headers)),
        "first_chunk_ms": o.first_chunk.map(|d| round(ms(d))),
        "first_text_ms": o.first_text.map(|d| round(ms(d))),
        "done_ms": o.done.map(|d| round(ms(d))),
        "total_ms": round(ms(o.total)),
        "chunks": o.chunks,
        "text_deltas": o.text_deltas,
        "bytes": o.bytes,
        "chunks_per_s": (o.chunks as f64 / total_s).round(),
        "mb_per_s": round(o.bytes as f64 / total_s / 1e6),
    })
}

/// One long streamed answer, `--repeat` times on one connection after `--warmup` unmeasured ones.
pub async fn stream(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let prompt = opts.str("prompt", "Tell me a long story.");
    let repeat = opts.num("repeat", 5)?;
    let warmup = opts.num("warmup", 1)?;
    let timeout = opts.timeout()?;
    let tag = crate::run_tag();
    let mut conn = Conn::connect(addr).await?;
    let mut runs = Vec::new();
    for i in 0..warmup + repeat {
        let body = turn_body(&format!("{tag}-{i}"), &prompt);
        let outcome =
            tokio::time::timeout(timeout, conn.post("/api/chat", &body, &Watch::default()))
                .await
                .map_err(|_| format!("no [DONE] within {timeout:?}"))??;
        outcome.check()?;
        if i >= warmup {
            runs.push(stream_report(&outcome));
        }
    }
    Ok(json!({ "runs": runs }))
}

/// Sequential short turns on one connection: time to first chunk and to [DONE].
pub async fn ttfc(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let prompt = opts.str("prompt", "hello");
    let n = opts.num("n", 300)?;
    let warmup = opts.num("warmup", 20)?;
    let timeout = opts.timeout()?;
    let tag = crate::run_tag();
    let mut conn = Conn::connect(addr).await?;
    let (mut first, mut first_text, mut done) = (Vec::new(), Vec::new(), Vec::new());
    let mut chunks = 0;
    for i in 0..warmup + n {
        let body = turn_body(&format!("{tag}-{i}"), &prompt);
        let o = tokio::time::timeout(timeout, conn.post("/api/chat", &body, &Watch::default()))
            .await
            .map_err(|_| format!("no [DONE] within {timeout:?}"))??;
        o.check()?;
        if i >= warmup {
            first.extend(o.first_chunk.map(ms));
            first_text.extend(o.first_text.map(ms));
            done.extend(o.done.map(ms));
            chunks = o.chunks;
        }
    }
    Ok(json!({
        "n": n,
        "chunks_per_turn": chunks,
        "first_chunk_ms": summary(&first),
        "first_text_ms": summary(&first_text),
        "done_ms": summary(&done),
    }))
}

/// `--n` turns at once: all connections are opened first, then every request is sent together.
pub async fn concurrency(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let prompt = opts.str("prompt", "Tell me a story.");
    let n = opts.num("n", 1000)? as usize;
    let parallel = opts.num("connect-parallel", 100)?.max(1) as usize;
    let timeout = opts.timeout()?;
    let tag = crate::run_tag();

    let connected: Vec<Result<Conn>> = stream::iter(0..n)
        .map(|_| Conn::connect(addr))
        .buffer_unordered(parallel)
        .collect()
        .await;
    let mut errors: Vec<String> = Vec::new();
    let mut conns = Vec::new();
    for c in connected {
        match c {
            Ok(c) => conns.push(c),
            Err(e) => errors.push(e),
        }
    }
    let barrier = Arc::new(Barrier::new(conns.len() + 1));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, mut conn) in conns.into_iter().enumerate() {
        let barrier = barrier.clone();
        let body = turn_body(&format!("{tag}-{i}"), &prompt);
        tasks.spawn(async move {
            barrier.wait().await;
            let result =
                tokio::time::timeout(timeout, conn.post("/api/chat", &body, &Watch::default()))
                    .await
                    .map_err(|_| format!("no [DONE] within {timeout:?}"))
                    .and_then(|r| r);
            drop(conn);
            result.and_then(|o| o.check().map(|()| o))
        });
    }
    barrier.wait().await;
    let go = Instant::now();
    let (mut first, mut first_text, mut done) = (Vec::new(), Vec::new(), Vec::new());
    let mut chunk_counts = std::collections::BTreeMap::<u64, u64>::new();
    let mut bytes = 0u64;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(o)) => {
                first.extend(o.first_chunk.map(ms));
                first_text.extend(o.first_text.map(ms));
                done.extend(o.done.map(ms));
                *chunk_counts.entry(o.chunks).or_default() += 1;
                bytes += o.bytes;
            }
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(format!("task: {e}")),
        }
    }
    let wall = go.elapsed();
    // Every turn streams the same script: a response with another chunk count lost chunks.
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
        "bytes": bytes,
        "first_chunk_ms": summary(&first),
        "first_text_ms": summary(&first_text),
        "done_ms": summary(&done),
    }))
}

/// The ids a payment turn's first response gave.
pub struct Pending {
    pub message_id: String,
    pub tool_call_id: String,
    pub approval_id: String,
    pub input: Value,
}

pub fn pending_from(chunks: &[Value]) -> Result<Pending> {
    let find = |t: &str| chunks.iter().find(|c| c["type"] == t);
    let start = find("start").ok_or("no start chunk")?;
    let input = find("tool-input-available").ok_or("no tool-input-available chunk")?;
    let request = find("tool-approval-request").ok_or_else(|| {
        format!(
            "no tool-approval-request chunk (got {:?})",
            chunks.iter().map(|c| c["type"].clone()).collect::<Vec<_>>()
        )
    })?;
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Ok(Pending {
        message_id: s(&start["messageId"]),
        tool_call_id: s(&input["toolCallId"]),
        approval_id: s(&request["approvalId"]),
        input: input["input"].clone(),
    })
}

/// A PNG-typed file of `bytes` bytes (a PNG signature, then a pseudo-random filler that does
/// not compress) as a `data:` URL.
fn image_data_url(bytes: usize) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut data = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while data.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.push(x as u8);
    }
    data.truncate(bytes);
    let mut out = String::with_capacity(bytes * 4 / 3 + 32);
    out.push_str("data:image/png;base64,");
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Sequential payments: the approval request's response, then the approval's POST, timed from
/// sending it to the `tool-output-available` chunk. `--image-bytes N` attaches an image of N
/// bytes to each chat's first message, which every later request carries again (as an AI SDK
/// client sends the whole conversation). `--approve-base` sends the approvals to another server
/// (another instance on the same database) than the one asked. The report has the approvals per
/// second over the measured part, asks included.
pub async fn approval(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let approve_addr = match opts.opt("approve-base") {
        Some(base) => crate::parse_base(&base)?,
        None => addr,
    };
    let n = opts.num("n", 300)?;
    let image = match opts.num("image-bytes", 0)? {
        0 => None,
        bytes => Some(image_data_url(bytes as usize)),
    };
    let warmup = opts.num("warmup", 10)?;
    let timeout = opts.timeout()?;
    let tag = crate::run_tag();
    let mut conn = Conn::connect(addr).await?;
    let mut approver = if approve_addr == addr {
        None
    } else {
        Some(Conn::connect(approve_addr).await?)
    };
    let (mut rtt, mut done) = (Vec::new(), Vec::new());
    let mut measured_from = Instant::now();
    for i in 0..warmup + n {
        if i == warmup {
            measured_from = Instant::now();
        }
        let chat = format!("{tag}-{i}");
        let mut user = user_message(&format!("{chat}-u"), PAYMENT_PROMPT);
        if let (Some(url), Some(parts)) = (&image, user["parts"].as_array_mut()) {
            parts.push(json!({"type": "file", "mediaType": "image/png", "url": url,
                              "filename": "photo.png"}));
        }
        let body = json!({"id": chat, "messages": [user], "trigger": "submit-message"});
        let collect = Watch {
            marker: None,
            collect: true,
        };
        let first = tokio::time::timeout(timeout, conn.post("/api/chat", &body, &collect))
            .await
            .map_err(|_| format!("no [DONE] within {timeout:?}"))??;
        first.check()?;
        let p = pending_from(&first.chunks_json())?;
        let assistant = json!({
            "id": p.message_id,
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "tool-process_payment", "toolCallId": p.tool_call_id,
                 "state": "approval-responded", "input": p.input,
                 "approval": {"id": p.approval_id, "approved": true}},
            ],
        });
        let body = json!({"id": chat, "messages": [user, assistant], "trigger": "submit-message",
                          "messageId": p.message_id});
        let watch = Watch {
            marker: Some("tool-output-available"),
            collect: false,
        };
        let answering = approver.as_mut().unwrap_or(&mut conn);
        let second = tokio::time::timeout(timeout, answering.post("/api/chat", &body, &watch))
            .await
            .map_err(|_| format!("no [DONE] within {timeout:?}"))??;
        second.check()?;
        let marker = second
            .marker
            .ok_or("the approval's response has no tool-output-available chunk")?;
        if i >= warmup {
            rtt.push(ms(marker));
            done.extend(second.done.map(ms));
        }
    }
    Ok(json!({
        "n": n,
        "image_bytes": image.as_ref().map_or(0, |_| opts.num("image-bytes", 0).unwrap_or(0)),
        "approvals_per_s": n as f64 / measured_from.elapsed().as_secs_f64(),
        "round_trip_ms": summary(&rtt),
        "done_ms": summary(&done),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_is_standard_base64_of_the_asked_size() {
        let url = image_data_url(5);
        // 89 50 4E 47 0D → iVBORw0=
        assert_eq!(url, "data:image/png;base64,iVBORw0=");
        let url = image_data_url(1 << 20);
        let encoded = url.trim_start_matches("data:image/png;base64,");
        assert_eq!(encoded.len(), (1 << 20) / 3 * 4 + 4);
    }

    #[test]
    fn events_split_across_reads_are_joined() {
        let mut parser = Parser::default();
        let mut seen = Vec::new();
        parser.push(b"data: {\"a\":1}\n\ndata: {\"b\"", |p| {
            seen.push(p.to_vec())
        });
        parser.push(b":2}\n", |p| seen.push(p.to_vec()));
        parser.push(b"\n: keep-alive\n\ndata: [DONE]\n\n", |p| {
            seen.push(p.to_vec())
        });
        assert_eq!(
            seen,
            vec![
                b"{\"a\":1}".to_vec(),
                b"{\"b\":2}".to_vec(),
                b"[DONE]".to_vec()
            ]
        );
    }
}
