//! Gemini Live against an in-process fake server: a real WebSocket on 127.0.0.1 that checks the
//! exact JSON the client sends and answers, as Google does, with *binary* frames of UTF-8 JSON.
//! Every await is bounded, so a bug fails a test instead of hanging it.
//!
//! The fake server and the client-side helpers are here, with the tests of pure helpers; the
//! scenarios are in `steps` (one socket), `sockets` (a socket's life) and `runtime` (through the
//! runtime).

mod runtime;
mod sockets;
mod steps;
mod voice;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderMap;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{WebSocketStream, accept_hdr_async};

use super::wire::{close_error, is_normal_close, map_turn_complete_reason};
use super::*;
use crate::agent::history::{
    AssistantPart, CONTEXT_MARKER, ContextRole, HistoryItem, Outcome, ToolCall, ToolResult,
    context_items,
};
use crate::agent::model::{ToolDeclaration, Usage};
use crate::models::providers::testing::{text_of, until_finish};
use crate::protocol::FinishReason;

const WAIT: Duration = Duration::from_secs(5);
const BLOCKING_MODEL: &str = "gemini-3.1-flash-live-preview";
const NON_BLOCKING_MODEL: &str = "gemini-3.8-live";

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

// ---------------------------------------------------------------------------------------------
// The fake Live server
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Handshake {
    Accept,
    /// Refuse the upgrade with this HTTP status (and `retry-after: 7`).
    Refuse(u16),
}

struct FakeLive {
    url: String,
    conns: mpsc::UnboundedReceiver<FakeConn>,
    accepted: Arc<AtomicUsize>,
}

impl FakeLive {
    async fn start() -> Self {
        Self::start_with(Handshake::Accept).await
    }

    async fn start_with(handshake: Handshake) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (sender, conns) = mpsc::unbounded_channel();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let seen: Arc<Mutex<Option<(String, HeaderMap)>>> = Arc::default();
                let record = seen.clone();
                // The signature is tungstenite's `Callback`.
                #[allow(clippy::result_large_err)]
                let callback = move |request: &Request, response: Response| {
                    *record.lock().unwrap() =
                        Some((request.uri().to_string(), request.headers().clone()));
                    match handshake {
                        Handshake::Accept => Ok(response),
                        Handshake::Refuse(status) => {
                            let refusal: ErrorResponse = Response::builder()
                                .status(status)
                                .header("retry-after", "7")
                                .body(Some(
                                    r#"{"error":{"code":429,"message":"Quota exceeded for live sessions","status":"RESOURCE_EXHAUSTED"}}"#.to_owned(),
                                ))
                                .unwrap();
                            Err(refusal)
                        }
                    }
                };
                let Ok(ws) = accept_hdr_async(tcp, callback).await else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let (uri, headers) = seen.lock().unwrap().take().unwrap_or_default();
                if sender.send(FakeConn { ws, uri, headers }).is_err() {
                    break;
                }
            }
        });
        Self {
            url: format!(
                "ws://{addr}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
            ),
            conns,
            accepted,
        }
    }

    async fn next_conn(&mut self) -> FakeConn {
        within("a Live connection", self.conns.recv())
            .await
            .expect("the fake server runs")
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// No further connection arrives within `ms`.
    async fn no_new_conn(&mut self, ms: u64) {
        let next = tokio::time::timeout(Duration::from_millis(ms), self.conns.recv()).await;
        assert!(next.is_err(), "unexpected extra connection");
    }
}

struct FakeConn {
    ws: WebSocketStream<TcpStream>,
    uri: String,
    headers: HeaderMap,
}

impl FakeConn {
    /// The next client message (a text frame of JSON).
    async fn recv(&mut self) -> Value {
        loop {
            let frame = within("a client message", self.ws.next()).await;
            match frame {
                Some(Ok(Message::Text(text))) => {
                    return serde_json::from_str(text.as_str()).expect("client JSON");
                }
                Some(Ok(Message::Binary(_))) => panic!("the client must send text frames"),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("expected a client message, got {other:?}"),
            }
        }
    }

    /// Nothing arrives from the client within `ms`.
    async fn silent_for(&mut self, ms: u64) {
        match tokio::time::timeout(Duration::from_millis(ms), self.ws.next()).await {
            Err(_) => {}
            Ok(frame) => panic!("expected silence, got {frame:?}"),
        }
    }

    /// The client closes this socket.
    async fn expect_closed(&mut self) {
        loop {
            match within("the client to close", self.ws.next()).await {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(other)) => panic!("expected a close, got {other:?}"),
            }
        }
    }

    /// A server message, as Google sends them: a binary frame of UTF-8 JSON.
    async fn send(&mut self, message: Value) {
        within(
            "sending",
            self.ws
                .send(Message::binary(message.to_string().into_bytes())),
        )
        .await
        .expect("send");
    }

    async fn send_text_frame(&mut self, message: Value) {
        within("sending", self.ws.send(Message::text(message.to_string())))
            .await
            .expect("send");
    }

    /// Reads `setup`, answers `setupComplete`, returns the setup object.
    async fn setup(&mut self) -> Value {
        let message = self.recv().await;
        let setup = message
            .get("setup")
            .cloned()
            .unwrap_or_else(|| panic!("the first message must be setup: {message}"));
        self.send(json!({"setupComplete": {}})).await;
        setup
    }

    async fn close(mut self, code: u16, reason: &str) {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: reason.to_owned().into(),
        };
        let _ = within("closing", self.ws.close(Some(frame))).await;
        // Let the close handshake finish.
        let _ = tokio::time::timeout(Duration::from_millis(500), self.ws.next()).await;
    }

    async fn say(&mut self, text: &str) {
        self.send(json!({"serverContent": {"outputTranscription": {"text": text}}}))
            .await;
    }

    async fn turn_complete(&mut self) {
        self.send(json!({"serverContent": {"turnComplete": true}}))
            .await;
    }
}

// ---------------------------------------------------------------------------------------------
// The client side: a model, and a stand-in for the runner's history keeping
// ---------------------------------------------------------------------------------------------

fn config(server: &FakeLive, model: &str) -> GeminiLiveConfig {
    GeminiLiveConfig {
        api_key: ProviderKey::new("test-key"),
        model: model.into(),
        live_url: server.url.clone(),
        tool_behavior: ToolBehaviorPolicy::Auto,
        timeouts: LiveTimeouts {
            connect: Duration::from_secs(2),
            setup: Duration::from_secs(2),
            silence: Duration::from_secs(3),
            tool_turn_grace: Duration::from_secs(2),
            idle_close: Duration::from_secs(60),
            resume_ttl: Duration::from_secs(600),
        },
        compression: Some(SlidingWindow::default()),
    }
}

fn live(server: &FakeLive, model: &str) -> GeminiLiveModel {
    GeminiLiveModel::new(config(server, model)).expect("model")
}

/// A runtime whose BIDI turns (and voice) use Live with `model` at `server`; the demo model
/// answers SSE turns.
fn live_runtime(server: &FakeLive, model: &str) -> Arc<crate::agent::Runtime> {
    use crate::agent::{
        Runtime, RuntimeSettings, TextTiming,
        clock::{SequentialIds, SystemClock},
        store::MemoryStore,
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    };
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
    .live_model(Arc::new(live(server, model)))
    .build()
}

fn weather_tool() -> ToolDeclaration {
    ToolDeclaration {
        name: "get_weather".into(),
        description: "Current weather for a place".into(),
        parameters: json!({
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"]
        }),
    }
}

fn payment_tool() -> ToolDeclaration {
    ToolDeclaration {
        name: "process_payment".into(),
        description: "Pay an amount".into(),
        parameters: json!({
            "type": "object",
            "properties": {"amount": {"type": "number"}},
            "required": ["amount"]
        }),
    }
}

/// The runner's side of a conversation: history, and the ids it assigns.
struct Chat {
    session_id: String,
    history: Vec<HistoryItem>,
    next_id: usize,
}

impl Chat {
    fn new() -> Self {
        Self::with_id("chat-1")
    }

    fn with_id(id: &str) -> Self {
        Self {
            session_id: id.into(),
            history: Vec::new(),
            next_id: 1,
        }
    }

    fn user(&mut self, text: &str) -> &mut Self {
        self.history.push(HistoryItem::user(text));
        self
    }

    fn request(&self) -> ModelRequest {
        ModelRequest {
            session_id: self.session_id.clone(),
            system: "Be brief.".into(),
            history: self.history.clone().into(),
            tools: vec![weather_tool(), payment_tool()],
        }
    }

    /// Records a step like the runner: text, reasoning, calls (with our ids).
    fn record(&mut self, events: &[ModelEvent]) -> Vec<ToolCall> {
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        let text = text_of(events);
        if !text.is_empty() {
            parts.push(AssistantPart::Text {
                text,
                provider_data: None,
            });
        }
        for event in events {
            if let ModelEvent::ToolCall(call) = event {
                let mut call = call.clone();
                call.id = format!("call-{}", self.next_id);
                self.next_id += 1;
                parts.push(AssistantPart::ToolCall { call: call.clone() });
                calls.push(call);
            }
        }
        if !parts.is_empty() {
            self.history.push(HistoryItem::Assistant { parts });
        }
        calls
    }

    fn results(&mut self, results: Vec<(&ToolCall, Outcome)>) {
        self.history.push(HistoryItem::ToolResults {
            results: results
                .into_iter()
                .map(|(call, outcome)| ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome,
                    edited_args: None,
                })
                .collect(),
        });
    }
}

async fn until_error(stream: &mut ModelStream) -> ModelError {
    loop {
        match within("a model error", stream.next()).await {
            Some(Ok(_)) => {}
            Some(Err(error)) => return error,
            None => panic!("stream ended without an error"),
        }
    }
}

fn calls_of(events: &[ModelEvent]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .collect()
}

fn finish_of(events: &[ModelEvent]) -> (FinishReason, Usage) {
    match events.last() {
        Some(ModelEvent::Finish { reason, usage }) => (reason.clone(), *usage),
        other => panic!("no Finish at the end: {other:?}"),
    }
}

fn user_turn(text: &str) -> Value {
    json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}], "turnComplete": true}})
}

fn two_calls() -> Value {
    json!({"toolCall": {"functionCalls": [
        {"id": "fc-1", "name": "get_weather", "args": {"location": "Tokyo"}},
        {"id": "fc-2", "name": "process_payment", "args": {"amount": 20}}
    ]}})
}

// ---------------------------------------------------------------------------------------------
// Pure helpers
// ---------------------------------------------------------------------------------------------

#[test]
fn tool_behavior_follows_the_model_table() {
    let table = [
        ("gemini-3.8-live", ToolBehavior::NonBlocking),
        ("models/gemini-3.8-live", ToolBehavior::NonBlocking),
        (
            "gemini-2.5-flash-native-audio-preview-12-2025",
            ToolBehavior::NonBlocking,
        ),
        (
            "gemini-2.5-flash-native-audio-latest",
            ToolBehavior::NonBlocking,
        ),
        ("gemini-live-2.5-flash", ToolBehavior::NonBlocking),
        ("gemini-3.1-flash-live-preview", ToolBehavior::Blocking),
        ("some-future-live-model", ToolBehavior::Blocking),
    ];
    for (model, expected) in table {
        assert_eq!(ToolBehavior::for_model(model), expected, "{model}");
    }
    assert_eq!(
        ToolBehaviorPolicy::Fixed(ToolBehavior::Blocking).resolve("gemini-3.8-live"),
        ToolBehavior::Blocking
    );
}

#[test]
fn live_urls_are_checked() {
    assert_eq!(
        live_url(DEFAULT_LIVE_URL).as_deref(),
        Some(DEFAULT_LIVE_URL)
    );
    assert_eq!(
        live_url("https://example.com/ws").as_deref(),
        Some("wss://example.com/ws")
    );
    assert_eq!(
        live_url("http://127.0.0.1:9/ws").as_deref(),
        Some("ws://127.0.0.1:9/ws")
    );
    assert_eq!(live_url("ftp://example.com"), None);
    assert_eq!(live_url("wss://"), None);
    let mut config = GeminiLiveConfig::new(ProviderKey::new("k"));
    config.live_url = "example.com".into();
    assert!(matches!(
        GeminiLiveModel::new(config),
        Err(ProviderConfigError::InvalidLiveUrl { .. })
    ));
}

#[test]
fn close_codes_map_to_errors() {
    assert_eq!(
        close_error(1007, "Request contains an invalid argument."),
        ModelError::Provider {
            status: 1007,
            message: "Request contains an invalid argument.".into()
        }
    );
    assert!(matches!(
        close_error(1011, "Resource has been exhausted (e.g. check quota)."),
        ModelError::RateLimited { .. }
    ));
    assert!(matches!(
        close_error(1011, ""),
        ModelError::Provider { status: 1011, message } if message.contains("1011")
    ));
    assert!(is_normal_close(1000) && is_normal_close(1001) && !is_normal_close(1008));
}

#[test]
fn turn_complete_reasons_map_to_finish_reasons() {
    assert_eq!(
        map_turn_complete_reason("MALFORMED_FUNCTION_CALL"),
        FinishReason::Error
    );
    assert_eq!(
        map_turn_complete_reason("RESPONSE_REJECTED"),
        FinishReason::ContentFilter
    );
    assert_eq!(
        map_turn_complete_reason("NEED_MORE_INPUT"),
        FinishReason::Stop
    );
    assert_eq!(
        map_turn_complete_reason("SOMETHING_NEW"),
        FinishReason::Other
    );
}

#[test]
fn the_api_key_is_not_printed() {
    let config = GeminiLiveConfig::new(ProviderKey::new("secret-key"));
    assert!(!format!("{config:?}").contains("secret-key"));
}
