//! OpenAI Realtime against an in-process fake server: a real WebSocket on 127.0.0.1 that
//! checks the exact client events and answers with the server events of the GA API (voice.md
//! §2), with real PCM, never silence: the committed recorded clips (`tests/fixtures/voice/`)
//! where a test is about the speech itself, a tone where only its length matters. Every await is bounded, so a bug fails a test
//! instead of hanging it. The scenarios go through the runtime: `voice` (speech in and out,
//! barge-in) and `turns` (typed turns, approvals, errors, a withdrawn call).

mod active;
mod asides;
mod reconnect;
mod turns;
mod utterances;
mod voice;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::{WebSocketStream, accept_hdr_async};

use super::*;
use crate::agent::session::LogReader;
use crate::agent::{Runtime, TurnEntry};
use crate::protocol::Chunk;

const WAIT: Duration = Duration::from_secs(5);

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// `ms` of a 440 Hz tone at `rate`, PCM16LE mono: real samples, different in every frame.
fn tone(rate: u32, ms: u32) -> Vec<u8> {
    let samples = rate * ms / 1000;
    (0..samples)
        .flat_map(|n| {
            let t = f64::from(n) / f64::from(rate);
            let value = (t * 440.0 * std::f64::consts::TAU).sin() * 8_000.0;
            (value as i16).to_le_bytes()
        })
        .collect()
}

/// A committed clip's PCM16 mono (`tests/fixtures/voice/`, made by `scripts/voice-fixtures.sh`:
/// recorded speech, 16 kHz for the person, 24 kHz for the agent; a plain 44-byte RIFF header).
fn clip(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/voice/{name}", env!("CARGO_MANIFEST_DIR"));
    let wav = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(&wav[36..40], b"data", "{path}: a plain WAV header");
    wav[44..].to_vec()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text.as_str().expect("base64 text"))
        .expect("base64")
}

// ---------------------------------------------------------------------------------------------
// The fake Realtime server
// ---------------------------------------------------------------------------------------------

struct FakeRealtime {
    url: String,
    conns: mpsc::UnboundedReceiver<FakeConn>,
    /// The clock of the model a test builds against this server.
    clock: Arc<HandClock>,
}

/// The actor's clock in these tests: it moves only when a test moves it, so what a barge-in
/// estimates the person heard is exact.
#[derive(Default)]
struct HandClock(std::sync::atomic::AtomicI64);

impl crate::agent::clock::Clock for HandClock {
    fn now_ms(&self) -> crate::agent::clock::Millis {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl HandClock {
    fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl FakeRealtime {
    async fn start() -> Self {
        Self::start_with(None).await
    }

    /// `refuse`: the upgrade is refused with this HTTP status and OpenAI's error body.
    async fn start_with(refuse: Option<u16>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (sender, conns) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let seen: Arc<Mutex<(String, String)>> = Arc::default();
                let record = seen.clone();
                // The signature is tungstenite's `Callback`.
                #[allow(clippy::result_large_err)]
                let callback = move |request: &Request, response: Response| {
                    let auth = request
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    *record.lock().unwrap() = (request.uri().to_string(), auth);
                    match refuse {
                        None => Ok(response),
                        Some(status) => Err(Response::builder()
                            .status(status)
                            .body(Some(
                                r#"{"error":{"message":"Incorrect API key provided: sk-xx***xx.","type":"invalid_request_error","code":"invalid_api_key"}}"#.to_owned(),
                            ))
                            .unwrap()),
                    }
                };
                let Ok(ws) = accept_hdr_async(tcp, callback).await else {
                    continue;
                };
                let (uri, authorization) = seen.lock().unwrap().clone();
                let conn = FakeConn {
                    ws,
                    uri,
                    authorization,
                    responses: 0,
                    active: false,
                    asked: None,
                };
                if sender.send(conn).is_err() {
                    break;
                }
            }
        });
        Self {
            url: format!("ws://{addr}/v1/realtime"),
            conns,
            clock: Arc::default(),
        }
    }

    /// The next connection, past `session.created` and the client's `session.update` (which
    /// is returned).
    async fn next_session(&mut self) -> (FakeConn, Value) {
        let mut conn = within("a Realtime connection", self.conns.recv())
            .await
            .expect("the fake server runs");
        assert_eq!(conn.uri, "/v1/realtime?model=gpt-realtime");
        assert_eq!(conn.authorization, "Bearer test-key");
        conn.send(json!({"type": "session.created", "event_id": "ev0",
            "session": {"type": "realtime", "model": "gpt-realtime"}}))
            .await;
        let update = conn.recv().await;
        assert_eq!(update["type"], "session.update", "{update}");
        let session = update["session"].clone();
        conn.send(json!({"type": "session.updated", "session": session}))
            .await;
        (conn, session)
    }

    async fn no_new_conn(&mut self, ms: u64) {
        let next = tokio::time::timeout(Duration::from_millis(ms), self.conns.recv()).await;
        assert!(next.is_err(), "unexpected extra connection");
    }
}

struct FakeConn {
    ws: WebSocketStream<TcpStream>,
    uri: String,
    authorization: String,
    /// Responses created so far (their ids are `resp_1`, `resp_2` …).
    responses: u32,
    /// A response is active: from an accepted `response.create` (or a response the server
    /// starts by itself, [`FakeConn::response_created`]) to its `response.done`.
    active: bool,
    /// The `metadata` of the accepted `response.create` not answered yet: the next
    /// [`FakeConn::response_created`] carries it back, as the server does.
    asked: Option<Value>,
}

impl FakeConn {
    /// The next client event (a text frame of JSON). As the real server does, a
    /// `response.create` while a response is active is refused with an `error` event
    /// (`conversation_already_has_active_response`) and creates nothing: it is not returned.
    async fn recv(&mut self) -> Value {
        loop {
            match within("a client event", self.ws.next()).await {
                Some(Ok(Message::Text(text))) => {
                    let event: Value = serde_json::from_str(text.as_str()).expect("client JSON");
                    if event["type"] == "response.create" {
                        if self.active {
                            self.refuse_create().await;
                            continue;
                        }
                        self.active = true;
                        self.asked = Some(event["response"]["metadata"].clone());
                    }
                    return event;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("expected a client event, got {other:?}"),
            }
        }
    }

    /// The next client event, which must be of `kind`.
    async fn expect(&mut self, kind: &str) -> Value {
        let event = self.recv().await;
        assert_eq!(event["type"], kind, "{event}");
        event
    }

    /// Nothing arrives from the client within `ms`.
    async fn silent_for(&mut self, ms: u64) {
        match tokio::time::timeout(Duration::from_millis(ms), self.ws.next()).await {
            Err(_) => {}
            Ok(frame) => panic!("expected silence, got {frame:?}"),
        }
    }

    async fn send(&mut self, event: Value) {
        within("sending", self.ws.send(Message::text(event.to_string())))
            .await
            .expect("send");
    }

    /// The real server's answer to a `response.create` over an active response.
    async fn refuse_create(&mut self) {
        let active = format!("resp_{}", self.responses);
        self.send(json!({"type": "error", "event_id": "ev_refused", "error": {
            "type": "invalid_request_error", "code": "conversation_already_has_active_response",
            "message": format!("Conversation already has an active response in progress: {active}. Wait until the response is finished before creating a new one."),
            "param": null, "event_id": null}}))
            .await;
    }

    /// `response.created`, for the `response.create` accepted last if one waits (with its
    /// `metadata`), else one the server starts by itself: returns the new response's id.
    async fn response_created(&mut self) -> String {
        let metadata = self.asked.take().unwrap_or(Value::Null);
        self.created(metadata).await
    }

    /// `response.created` of a response the server starts by itself (its voice activity
    /// detection answering speech): no `metadata`, whatever `response.create` waits.
    async fn server_response_created(&mut self) -> String {
        self.created(Value::Null).await
    }

    async fn created(&mut self, metadata: Value) -> String {
        self.active = true;
        self.responses += 1;
        let id = format!("resp_{}", self.responses);
        self.send(json!({"type": "response.created",
            "response": {"id": id, "object": "realtime.response", "status": "in_progress",
                "metadata": metadata}}))
            .await;
        id
    }

    /// The next client event is a `response.create` that reached the server while a response
    /// it started itself was active: refused, as the real server refuses it.
    async fn refuse_next_create(&mut self) {
        match within("a client event", self.ws.next()).await {
            Some(Ok(Message::Text(text))) => {
                let event: Value = serde_json::from_str(text.as_str()).expect("client JSON");
                assert_eq!(event["type"], "response.create", "{event}");
            }
            other => panic!("expected response.create, got {other:?}"),
        }
        self.refuse_create().await;
    }

    async fn audio(&mut self, response: &str, pcm: &[u8]) {
        self.send(
            json!({"type": "response.output_audio.delta", "response_id": response,
            "item_id": "item_a", "output_index": 0, "content_index": 0, "delta": b64(pcm)}),
        )
        .await;
    }

    async fn say(&mut self, response: &str, text: &str) {
        self.send(json!({"type": "response.output_audio_transcript.delta",
            "response_id": response, "item_id": "item_a", "output_index": 0,
            "content_index": 0, "delta": text}))
            .await;
    }

    async fn heard(&mut self, transcript: &str) {
        self.send(
            json!({"type": "conversation.item.input_audio_transcription.completed",
            "item_id": "item_in", "content_index": 0, "transcript": transcript}),
        )
        .await;
    }

    async fn call(&mut self, response: &str, call_id: &str, name: &str, arguments: Value) {
        self.send(json!({"type": "response.function_call_arguments.done",
            "response_id": response, "item_id": "item_fc", "output_index": 1,
            "call_id": call_id, "name": name, "arguments": arguments.to_string()}))
            .await;
    }

    /// `response.output_audio.done`: all of the item's audio was sent.
    async fn audio_done(&mut self, response: &str) {
        self.send(
            json!({"type": "response.output_audio.done", "response_id": response,
            "item_id": "item_a", "output_index": 0, "content_index": 0}),
        )
        .await;
    }

    async fn done(&mut self, response: &str, status: &str) {
        self.active = false;
        self.send(json!({"type": "response.done", "response": {
            "id": response, "object": "realtime.response", "status": status,
            "status_details": if status == "cancelled" { json!({"type": "cancelled", "reason": "turn_detected"}) } else { Value::Null },
            "usage": {"total_tokens": 30, "input_tokens": 20, "output_tokens": 10}}}))
            .await;
    }
}

// ---------------------------------------------------------------------------------------------
// The client side
// ---------------------------------------------------------------------------------------------

fn config(server: &FakeRealtime, grace: Duration) -> OpenAiRealtimeConfig {
    OpenAiRealtimeConfig {
        url: server.url.clone(),
        timeouts: RealtimeTimeouts {
            connect: Duration::from_secs(2),
            silence: Duration::from_secs(3),
            tool_turn_grace: grace,
            idle_close: Duration::from_secs(60),
        },
        ..OpenAiRealtimeConfig::new(ProviderKey::new("test-key"))
    }
}

/// A runtime whose BIDI turns and voice use Realtime at `server`; the demo model answers SSE
/// turns. `grace`: how long a step waits for `response.done` after a call.
fn realtime_runtime(server: &FakeRealtime, grace: Duration) -> Arc<Runtime> {
    use crate::agent::{
        RuntimeSettings, TextTiming,
        clock::{SequentialIds, SystemClock},
        store::MemoryStore,
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    };
    let model = OpenAiRealtimeModel::with_clock(config(server, grace), server.clock.clone())
        .expect("model");
    Runtime::builder(
        Arc::new(crate::models::demo::DemoModel::new(Duration::ZERO)),
        ToolRegistry::standard(&ToolSettings {
            approval_timeout: Duration::from_secs(60),
            browser_timeout: Duration::from_secs(10),
            weather: WeatherSource::Offline,
        }),
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        Arc::new(MemoryStore::default()),
        RuntimeSettings {
            text_timing: TextTiming::Progressive,
            ..RuntimeSettings::default()
        },
    )
    .live_model(Arc::new(model))
    .build()
}

/// What a turn's log held up to its end (or its pause for an approval).
#[derive(Debug, Default)]
struct Read {
    text: String,
    speech: Vec<u8>,
    states: Vec<String>,
    finish: Value,
    approval: Option<String>,
    errors: Vec<String>,
    tool_errors: Vec<String>,
}

async fn read_turn(reader: &mut LogReader) -> Read {
    let mut read = Read::default();
    read_on(reader, &mut read, |_| false).await;
    read
}

/// Reads the turn's log into `read` until `enough` says so, or to the turn's end (or its pause
/// for an approval).
async fn read_on(reader: &mut LogReader, read: &mut Read, enough: impl Fn(&Read) -> bool) {
    while !enough(read) {
        match within("the turn's log", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => read.text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::Data(data))) if data.name == "pcm" => {
                assert_eq!(data.data["sampleRate"], 24_000);
                read.speech.extend(unb64(&data.data["content"]));
            }
            Some(TurnEntry::Chunk(Chunk::Data(data))) if data.name == "voice" => read
                .states
                .push(data.data["state"].as_str().unwrap_or_default().to_owned()),
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => {
                read.approval = Some(r.approval_id)
            }
            Some(TurnEntry::Chunk(Chunk::Error(e))) => read.errors.push(e.error_text),
            Some(TurnEntry::Chunk(Chunk::ToolOutputError(e))) => {
                read.tool_errors.push(e.error_text)
            }
            Some(TurnEntry::Chunk(Chunk::Finish(f))) => {
                read.finish = f.message_metadata.unwrap_or_default()
            }
            Some(TurnEntry::Pause) if read.approval.is_some() => return,
            Some(TurnEntry::End) | None => return,
            Some(_) => {}
        }
    }
}

/// The log of the chat's current turn, once it has started (a spoken turn starts on its own).
async fn current_turn_log(runtime: &Arc<Runtime>, chat: &str) -> LogReader {
    let session = runtime.session(chat).await.expect("the chat");
    within("the spoken turn", async {
        loop {
            if let Some(log) = session.current_log() {
                return log.subscribe(0);
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}
