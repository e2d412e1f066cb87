//! Voice (issue #36): a zero-delay OpenAI Realtime fake the server is pointed at, and the
//! browser's side of `/api/live` as our page speaks it (binary PCM16 16 kHz frames,
//! `audio_control` push-to-talk, the agent's speech back as binary frames).
//!
//! `fake-realtime --port P` speaks the Realtime wire (`session.created`, `session.updated`,
//! `input_audio_buffer.committed`, then for each `response.create`: `response.created`, the
//! person's transcript, 0.1 s of 24 kHz speech, its transcript, `response.done`) with no delay,
//! so what `voice` measures is the server.
//!
//! `voice --base … --pid PID [--n 200] [--sessions 200] [--utterances 3] [--speech-ms 1000]`:
//! 1. latency: one socket says `--n` utterances one after another; for each, the time from the
//!    `stop` frame (the end of speech, `activityEnd` on Gemini Live) to the first byte of the
//!    agent's speech, read at the client;
//! 2. load: `--sessions` sockets at once, each saying `--utterances` utterances of
//!    `--speech-ms` of audio in real time (0.1 s frames every 0.1 s) and reading the answers; the
//!    server's CPU seconds (`/proc/PID/stat`) and its resident memory before, at its highest
//!    while they stream, and after.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::{WebSocketStream, accept_async, client_async, tungstenite::Message};

use crate::{
    Opts, Result,
    stats::{ms, round, summary},
    ws::rss_kib,
};

type Ws = WebSocketStream<TcpStream>;

/// 0.1 s of microphone audio: PCM16 mono 16 kHz, a 440 Hz tone.
fn mic_frame() -> Vec<u8> {
    (0..1_600)
        .flat_map(|i| {
            let t = i as f64 / 16_000.0;
            let sample = (8_000.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16;
            sample.to_le_bytes()
        })
        .collect()
}

// -- the fake model ----------------------------------------------------------------------------

/// Serves the Realtime wire on `--port` until killed.
pub async fn fake_realtime(opts: &Opts) -> Result<Value> {
    let port = opts.num("port", 0)? as u16;
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("bind 127.0.0.1:{port}: {e}"))?;
    // 0.1 s of 24 kHz PCM16 silence, base64 (4,800 zero bytes).
    let speech = "A".repeat(6_400);
    loop {
        let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        tokio::spawn(serve(tcp, speech.clone()));
    }
}

async fn serve(tcp: TcpStream, speech: String) {
    let Ok(mut ws) = accept_async(tcp).await else {
        return;
    };
    let mut events = vec![json!({"type": "session.created", "session": {"type": "realtime"}})];
    let mut responses = 0u64;
    loop {
        for event in events.drain(..) {
            if ws.feed(Message::text(event.to_string())).await.is_err() {
                return;
            }
        }
        if ws.flush().await.is_err() {
            return;
        }
        let Some(Ok(message)) = ws.next().await else {
            return;
        };
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(event) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        match event["type"].as_str() {
            Some("session.update") => {
                events.push(json!({"type": "session.updated", "session": event["session"]}));
            }
            Some("input_audio_buffer.commit") => {
                events.push(json!({"type": "input_audio_buffer.committed",
                    "item_id": format!("in_{}", responses + 1)}));
            }
            Some("response.create") => {
                responses += 1;
                let id = format!("resp_{responses}");
                let item = format!("in_{responses}");
                events.extend([
                    json!({"type": "response.created", "response": {"id": id, "status": "in_progress"}}),
                    json!({"type": "conversation.item.input_audio_transcription.completed",
                        "item_id": item, "content_index": 0, "transcript": "What is the weather?"}),
                    json!({"type": "response.output_audio.delta", "response_id": id, "item_id": "a",
                        "output_index": 0, "content_index": 0, "delta": speech}),
                    json!({"type": "response.output_audio_transcript.delta", "response_id": id,
                        "item_id": "a", "output_index": 0, "content_index": 0, "delta": "It is sunny."}),
                    json!({"type": "response.done", "response": {"id": id, "status": "completed",
                        "usage": {"total_tokens": 9, "input_tokens": 5, "output_tokens": 4}}}),
                ]);
            }
            _ => {}
        }
    }
}

// -- the browser -------------------------------------------------------------------------------

async fn open(addr: SocketAddr) -> Result<Ws> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let url = format!("ws://{addr}/api/live?audio=binary");
    let (ws, _) = client_async(url.as_str(), tcp)
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    Ok(ws)
}

async fn send(ws: &mut Ws, message: Message) -> Result<()> {
    ws.send(message).await.map_err(|e| format!("send: {e}"))
}

/// Says one utterance of `frames` 0.1 s frames in `chat` (`pace`: one per 0.1 s, else at once),
/// then reads the answer to its `[DONE]`. Returns the time from the `stop` frame to the first
/// byte of speech.
async fn utterance(
    ws: &mut Ws,
    chat: &str,
    frames: usize,
    pace: bool,
    timeout: Duration,
) -> Result<Duration> {
    let start =
        json!({"type": "audio_control", "action": "start", "id": chat, "mode": "push_to_talk"});
    send(ws, Message::text(start.to_string())).await?;
    let frame = mic_frame();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for _ in 0..frames {
        if pace {
            tick.tick().await;
        }
        send(ws, Message::binary(frame.clone())).await?;
    }
    let stop = json!({"type": "audio_control", "action": "stop"});
    send(ws, Message::text(stop.to_string())).await?;
    let stopped = Instant::now();
    let mut first_speech = None;
    loop {
        let message = tokio::time::timeout(timeout, ws.next())
            .await
            .map_err(|_| format!("no frame within {timeout:?} in {chat}"))?;
        match message {
            Some(Ok(Message::Binary(_))) => {
                first_speech.get_or_insert_with(|| stopped.elapsed());
            }
            Some(Ok(Message::Text(text))) => {
                let data = text
                    .as_str()
                    .strip_prefix("data: ")
                    .unwrap_or(text.as_str());
                let data = data.trim_end();
                if data == "[DONE]" {
                    break;
                }
                if let Ok(chunk) = serde_json::from_str::<Value>(data)
                    && chunk["type"] == "error"
                {
                    return Err(format!("{chat}: error chunk {chunk}"));
                }
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(format!("{chat}: the server closed the socket: {frame:?}"));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(format!("{chat}: read: {e}")),
            None => return Err(format!("{chat}: the server closed the socket")),
        }
    }
    first_speech.ok_or_else(|| format!("{chat}: no speech came back"))
}

/// `utime + stime` of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e} (is the server running?)"))?;
    // Fields after the command name (which may hold spaces) start after its ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the ')'.
    Ok((ticks(11) + ticks(12)) as f64 / 100.0)
}

pub async fn voice(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let pid = opts.num("pid", 0)? as u32;
    let n = opts.num("n", 200)? as usize;
    let sessions = opts.num("sessions", 200)? as usize;
    let each = opts.num("utterances", 3)? as usize;
    let frames = (opts.num("speech-ms", 1_000)? / 100).max(1) as usize;
    let timeout = opts.timeout()?;

    // 1. Latency: one socket, one utterance after another (after 5 to warm up).
    let tag = crate::run_tag();
    let mut ws = open(addr).await?;
    let chat = format!("{tag}-latency");
    for _ in 0..5 {
        utterance(&mut ws, &chat, frames, false, timeout).await?;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(ms(utterance(&mut ws, &chat, frames, false, timeout).await?));
    }
    drop(ws);

    // 2. Load: every session at once, speaking in real time.
    let rss_before = rss_kib(pid)?;
    let cpu_before = cpu_seconds(pid)?;
    let began = Instant::now();
    let tasks: Vec<_> = (0..sessions)
        .map(|s| {
            let chat = format!("{tag}-{s}");
            tokio::spawn(async move {
                let mut ws = open(addr).await?;
                let mut times = Vec::with_capacity(each);
                for _ in 0..each {
                    times.push(utterance(&mut ws, &chat, frames, true, timeout).await?);
                }
                Ok::<_, String>((ws, times))
            })
        })
        .collect();
    let mut rss_peak = rss_before;
    let mut open_sockets = Vec::with_capacity(sessions);
    let mut loaded = Vec::new();
    let mut errors = 0usize;
    let mut first_error = None;
    for task in tasks {
        loop {
            if task.is_finished() {
                break;
            }
            rss_peak = rss_peak.max(rss_kib(pid)?);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match task.await.map_err(|e| e.to_string())? {
            Ok((ws, times)) => {
                open_sockets.push(ws);
                loaded.extend(times.into_iter().map(ms));
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    let wall = began.elapsed();
    let cpu = cpu_seconds(pid)? - cpu_before;
    let rss_after = rss_kib(pid)?;
    drop(open_sockets);
    let per = |v: f64| round(v / sessions.max(1) as f64);
    Ok(json!({
        "speech_ms": frames * 100,
        "latency": summary(&samples),
        "sessions": sessions,
        "utterances_each": each,
        "errors": errors,
        "first_error": first_error,
        "load_latency": summary(&loaded),
        "wall_s": round(wall.as_secs_f64()),
        "cpu_s": round(cpu),
        "cpu_per_session_ms": per(cpu * 1000.0),
        "cpu_share": round(cpu / wall.as_secs_f64()),
        "rss_before_kib": rss_before,
        "rss_peak_kib": rss_peak,
        "rss_after_kib": rss_after,
        "rss_per_session_kib": per((rss_peak.saturating_sub(rss_before)) as f64),
    }))
}
