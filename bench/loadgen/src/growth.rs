//! Growth scenario (issue #35): does an approval cost more in a long conversation?
//!
//! One chat on one `/api/live` socket, the way an AI SDK client drives it: every `message` frame
//! carries the whole conversation so far (the client's copy, rebuilt here from the chunks), the
//! payment request as a new user message, then the approval as the assistant message with its
//! tool part `approval-responded`. Turn after turn; at each of `--at 0,100,1000` turns done,
//! `--samples` turns are measured: the approval round trip (the answer's frame, once encoded,
//! handed to the socket → `tool-output-available`), and the bytes the server process wrote for
//! the whole turn (`/proc/PID/io` `wchar`: every `write`/`pwrite` — the database and its WAL,
//! the socket's frames, logs; what grows with the chat is the database's share). With
//! `--db PATH` the database file and its `-wal` are measured at each point too.
//!
//! ```text
//! loadgen growth --base http://IP:PORT --pid PID [--at 0,100,1000] [--samples 20]
//!                [--prompt "Send $0.50 to Hanako"] [--db PATH]
//! ```

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::{WebSocketStream, client_async, tungstenite::Message};

use crate::{
    Opts, Result,
    stats::{ms, round, summary},
};

type Ws = WebSocketStream<TcpStream>;

/// What the server process has written so far (`/proc/PID/io`): `(wchar, write_bytes)`.
fn written(pid: u32) -> Result<(u64, u64)> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .map_err(|e| format!("/proc/{pid}/io: {e} (is the server running?)"))?;
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok((field("wchar:"), field("write_bytes:")))
}

fn file_len(path: &str) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

async fn next_chunk(ws: &mut Ws, timeout: Duration) -> Result<Option<Value>> {
    loop {
        let message = tokio::time::timeout(timeout, ws.next())
            .await
            .map_err(|_| format!("no frame within {timeout:?}"))?;
        let text = match message {
            None => return Err("the server closed the socket".into()),
            Some(Err(e)) => return Err(format!("read: {e}")),
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(frame))) => {
                return Err(format!("the server closed the socket: {frame:?}"));
            }
            Some(Ok(_)) => continue,
        };
        let Some(data) = text.strip_prefix("data: ") else {
            continue;
        };
        let data = data.trim_end();
        if data == "[DONE]" {
            return Ok(None);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| format!("a chunk is not JSON: {e}"))?;
        if chunk["type"] == "error" {
            return Err(format!("error chunk: {chunk}"));
        }
        return Ok(Some(chunk));
    }
}

/// The assistant message as an AI SDK client folds it from the chunks (text parts and the tool
/// part; what the server's conversation has, the client sends back).
#[derive(Default)]
struct Assistant {
    id: String,
    parts: Vec<Value>,
    /// The tool part's index in `parts`.
    tool: Option<usize>,
    approval: Option<String>,
}

impl Assistant {
    fn fold(&mut self, chunk: &Value) {
        let field = |name: &str| chunk[name].as_str().unwrap_or_default().to_owned();
        match chunk["type"].as_str().unwrap_or_default() {
            "start" if self.id.is_empty() => self.id = field("messageId"),
            "start-step" => self.parts.push(json!({"type": "step-start"})),
            "text-start" => self
                .parts
                .push(json!({"type": "text", "text": "", "state": "streaming"})),
            "text-delta" => {
                if let Some(text) = self.parts.iter_mut().rev().find(|p| p["type"] == "text") {
                    let so_far = text["text"].as_str().unwrap_or_default().to_owned();
                    text["text"] = Value::String(so_far + chunk["delta"].as_str().unwrap_or(""));
                }
            }
            "text-end" => {
                if let Some(text) = self.parts.iter_mut().rev().find(|p| p["type"] == "text") {
                    text["state"] = json!("done");
                }
            }
            "tool-input-available" => {
                self.tool = Some(self.parts.len());
                self.parts.push(json!({
                    "type": format!("tool-{}", field("toolName")),
                    "toolCallId": field("toolCallId"),
                    "state": "input-available",
                    "input": chunk["input"],
                }));
            }
            "tool-approval-request" => {
                let id = field("approvalId");
                if let Some(part) = self.tool.and_then(|i| self.parts.get_mut(i)) {
                    part["state"] = json!("approval-requested");
                    part["approval"] = json!({ "id": id });
                }
                self.approval = Some(id);
            }
            "tool-output-available" => {
                if let Some(part) = self.tool.and_then(|i| self.parts.get_mut(i)) {
                    part["state"] = json!("output-available");
                    part["output"] = chunk["output"].clone();
                }
            }
            _ => {}
        }
    }

    fn answered(&mut self) -> Value {
        if let (Some(part), Some(id)) = (
            self.tool.and_then(|i| self.parts.get_mut(i)),
            &self.approval,
        ) {
            part["state"] = json!("approval-responded");
            part["approval"] = json!({"id": id, "approved": true});
        }
        self.message()
    }

    fn message(&self) -> Value {
        json!({"id": self.id, "role": "assistant", "parts": self.parts})
    }
}

/// One chat as its AI SDK client holds it.
struct Chat {
    ws: Ws,
    id: String,
    history: Vec<Value>,
    prompt: String,
    timeout: Duration,
}

/// What one measured turn cost.
struct TurnCost {
    round_trip: Duration,
    wchar: u64,
    write_bytes: u64,
}

impl Chat {
    /// The `message` frame that carries `messages`, as text.
    fn frame(&self, messages: &[Value]) -> String {
        json!({
            "type": "message", "id": self.id, "trigger": "submit-message", "messages": messages,
        })
        .to_string()
    }

    async fn send(&mut self, frame: String) -> Result<()> {
        self.ws
            .send(Message::Text(frame.into()))
            .await
            .map_err(|e| format!("send: {e}"))
    }

    /// A payment turn: the request, the approval, to `[DONE]`.
    async fn turn(&mut self, pid: u32) -> Result<TurnCost> {
        let n = self.history.len();
        let user = json!({"id": format!("{}-u{n}", self.id), "role": "user",
                          "parts": [{"type": "text", "text": self.prompt}]});
        let before = written(pid)?;
        let mut messages = self.history.clone();
        messages.push(user.clone());
        let frame = self.frame(&messages);
        self.send(frame).await?;
        let mut assistant = Assistant::default();
        loop {
            let Some(chunk) = next_chunk(&mut self.ws, self.timeout).await? else {
                return Err("the turn ended without an approval request".into());
            };
            assistant.fold(&chunk);
            if chunk["type"] == "finish-step" && assistant.approval.is_some() {
                break;
            }
        }
        messages.push(assistant.answered());
        // The clock starts when the frame goes out: the client's own encoding of the whole
        // conversation (a copy and a serialization of every message) is not the server's cost.
        let frame = self.frame(&messages);
        let sent = Instant::now();
        self.send(frame).await?;
        let mut round_trip = None;
        loop {
            match next_chunk(&mut self.ws, self.timeout).await? {
                // The paused stream's end, if it sends one.
                None if round_trip.is_none() => continue,
                None => break,
                Some(chunk) => {
                    if round_trip.is_none() && chunk["type"] == "tool-output-available" {
                        round_trip = Some(sent.elapsed());
                    }
                    assistant.fold(&chunk);
                }
            }
        }
        let round_trip = round_trip.ok_or("the approval got no tool-output-available")?;
        let after = written(pid)?;
        self.history.push(user);
        self.history.push(assistant.message());
        Ok(TurnCost {
            round_trip,
            wchar: after.0.saturating_sub(before.0),
            write_bytes: after.1.saturating_sub(before.1),
        })
    }
}

pub async fn growth(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let pid: u32 = opts
        .required("pid")?
        .parse()
        .map_err(|_| "--pid: expected a process id".to_string())?;
    let mut at: Vec<usize> = opts
        .str("at", "0,100,1000")
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| format!("--at {s:?}: expected turn counts"))
        })
        .collect::<Result<_>>()?;
    at.sort_unstable();
    let samples = opts.num("samples", 20)?.max(1) as usize;
    let db = opts.opt("db");
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let (ws, _) = client_async(format!("ws://{addr}/api/live").as_str(), tcp)
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    let mut chat = Chat {
        ws,
        id: format!("{}-growth", crate::run_tag()),
        history: Vec::new(),
        prompt: opts.str("prompt", "Send $0.50 to Hanako"),
        timeout: opts.timeout()?,
    };
    let mut turns = 0usize;
    let mut points = Vec::new();
    for point in at {
        while turns < point {
            chat.turn(pid).await?;
            turns += 1;
        }
        let (mut rtt, mut wchar, mut write_bytes) = (Vec::new(), Vec::new(), Vec::new());
        // Where a profiler attached to the server may start (and the previous point's ended).
        eprintln!("growth: measuring {samples} turns after {point}");
        let request_bytes = {
            let frame = json!({"type": "message", "id": chat.id, "messages": chat.history});
            frame.to_string().len()
        };
        for _ in 0..samples {
            let cost = chat.turn(pid).await?;
            turns += 1;
            rtt.push(ms(cost.round_trip));
            wchar.push(cost.wchar as f64);
            write_bytes.push(cost.write_bytes as f64);
        }
        let mean = |v: &[f64]| round(v.iter().sum::<f64>() / v.len() as f64);
        let mut entry = Map::new();
        entry.insert("turns_before".into(), json!(point));
        entry.insert("request_bytes".into(), json!(request_bytes));
        entry.insert("round_trip_ms".into(), summary(&rtt));
        entry.insert("wchar_per_turn".into(), json!(mean(&wchar)));
        entry.insert("write_bytes_per_turn".into(), json!(mean(&write_bytes)));
        if let Some(db) = &db {
            entry.insert("db_bytes".into(), json!(file_len(db)));
            entry.insert("wal_bytes".into(), json!(file_len(&format!("{db}-wal"))));
        }
        points.push(Value::Object(entry));
    }
    Ok(json!({ "turns": turns, "samples": samples, "points": points }))
}
