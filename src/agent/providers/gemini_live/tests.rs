//! Gemini Live against an in-process fake server: a real WebSocket on 127.0.0.1 that checks the
//! exact JSON the client sends and answers, as Google does, with *binary* frames of UTF-8 JSON.
//! Every await is bounded, so a bug fails a test instead of hanging it.

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
use crate::agent::history::{AssistantPart, HistoryItem, Outcome, ToolCall, ToolResult};
use crate::agent::model::{ToolDeclaration, Usage};
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
        api_key: ApiKey::new("test-key"),
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
            history: self.history.clone(),
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

/// Events up to and including `Finish`.
async fn until_finish(stream: &mut ModelStream) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    loop {
        match within("a model event", stream.next()).await {
            Some(Ok(event)) => {
                let done = matches!(event, ModelEvent::Finish { .. });
                events.push(event);
                if done {
                    return events;
                }
            }
            Some(Err(error)) => panic!("step failed: {error} (after {events:?})"),
            None => panic!("stream ended without Finish: {events:?}"),
        }
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

fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
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
// Scenarios
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn setup_asks_for_audio_with_transcripts_tools_and_the_key_header() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    assert_eq!(model.label(), "gemini-live:gemini-3.8-live");
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());

    let mut conn = server.next_conn().await;
    assert_eq!(
        conn.headers
            .get("x-goog-api-key")
            .map(|v| v.to_str().unwrap()),
        Some("test-key")
    );
    assert!(
        !conn.uri.contains("key="),
        "the key never goes in the URL: {}",
        conn.uri
    );
    assert!(
        conn.uri.ends_with("GenerativeService.BidiGenerateContent"),
        "{}",
        conn.uri
    );

    let setup = conn.setup().await;
    assert_eq!(
        setup,
        json!({
            "model": "models/gemini-3.8-live",
            "generationConfig": {"responseModalities": ["AUDIO"]},
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather for a place",
                    "parametersJsonSchema": weather_tool().parameters,
                    "behavior": "NON_BLOCKING"
                },
                {
                    "name": "process_payment",
                    "description": "Pay an amount",
                    "parametersJsonSchema": payment_tool().parameters,
                    "behavior": "NON_BLOCKING"
                }
            ]}],
            "inputAudioTranscription": {},
            "outputAudioTranscription": {},
            "sessionResumption": {},
            "contextWindowCompression": {"slidingWindow": {}}
        })
    );
    assert_eq!(conn.recv().await, user_turn("hi"));

    // Text comes as the transcript; the same words as modelTurn text are not repeated, audio is
    // dropped, a text frame is read like a binary one.
    conn.send(json!({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAAA"}},
        {"text": "Hello there!"}
    ]}}}))
    .await;
    conn.say("Hello ").await;
    conn.send_text_frame(json!({"serverContent": {"outputTranscription": {"text": "there!"}}}))
        .await;
    conn.send(json!({"serverContent": {"generationComplete": true}}))
        .await;
    conn.send(json!({
        "serverContent": {"turnComplete": true},
        "usageMetadata": {"promptTokenCount": 12, "responseTokenCount": 5,
                          "thoughtsTokenCount": 2, "totalTokenCount": 19}
    }))
    .await;
    let events = until_finish(&mut stream).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Hello ".into()),
            ModelEvent::TextDelta("there!".into()),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage {
                    input_tokens: Some(12),
                    output_tokens: Some(7),
                    total_tokens: Some(19),
                },
            },
        ]
    );
}

#[tokio::test]
async fn the_blocking_model_declares_blocking_tools() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    assert_eq!(model.tool_behavior(), ToolBehavior::Blocking);
    let mut chat = Chat::new();
    chat.user("hi");
    let _stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["model"], "models/gemini-3.1-flash-live-preview");
    for declaration in setup["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
    {
        assert_eq!(declaration["behavior"], "BLOCKING");
    }
}

#[tokio::test]
async fn model_turn_text_is_a_fallback_and_thoughts_are_reasoning() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(json!({"serverContent": {"modelTurn": {"parts": [
        {"text": "Planning a greeting", "thought": true},
        {"text": "Hi!"}
    ]}}}))
    .await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta {
                text: "Planning a greeting".into(),
                provider_data: None
            },
            ModelEvent::TextDelta("Hi!".into()),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

/// Two parallel calls on a blocking model; the person takes a while; the results go back as one
/// `toolResponse` with the Live ids, on the same socket. A bare `turnComplete` some models send
/// after a blocking call does not end the next step.
#[tokio::test]
async fn parallel_calls_wait_for_approval_then_answer_on_the_same_socket() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather in Tokyo, and pay 20");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    assert_eq!(conn.recv().await, user_turn("Weather in Tokyo, and pay 20"));
    conn.send(two_calls()).await;
    let events = until_finish(&mut stream).await;
    drop(stream);
    let calls = calls_of(&events);
    assert_eq!(finish_of(&events).0, FinishReason::ToolCalls);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "", "the runner assigns ids");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].args, json!({"location": "Tokyo"}));
    assert_eq!(
        calls[0].provider_data,
        Some(json!({"google": {"id": "fc-1"}}))
    );
    assert_eq!(calls[1].name, "process_payment");
    assert_eq!(
        calls[1].provider_data,
        Some(json!({"google": {"id": "fc-2"}}))
    );

    // The person thinks it over.
    let calls = chat.record(&events);
    tokio::time::sleep(Duration::from_millis(300)).await;
    chat.results(vec![
        (
            &calls[0],
            Outcome::Output {
                output: json!({"tempC": 21}),
            },
        ),
        (
            &calls[1],
            Outcome::Output {
                output: json!("paid"),
            },
        ),
    ]);
    let mut stream = model.stream(chat.request());
    assert_eq!(
        conn.recv().await,
        json!({"toolResponse": {"functionResponses": [
            {"id": "fc-1", "name": "get_weather", "response": {"tempC": 21}},
            {"id": "fc-2", "name": "process_payment", "response": {"result": "paid"}}
        ]}})
    );
    conn.turn_complete().await; // the closed generation's end marker
    conn.say("21 degrees, and paid.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "21 degrees, and paid.");
    assert_eq!(finish_of(&events).0, FinishReason::Stop);
    assert_eq!(server.accepted(), 1, "the second step reused the socket");
    server.no_new_conn(100).await;
}

/// A non-blocking model goes on talking after its call; the step lasts until `turnComplete`.
/// A denial goes back as a response with an error, scheduled `WHEN_IDLE`.
#[tokio::test]
async fn a_denial_is_a_response_with_an_error() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Pay 500");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(json!({"toolCall": {"functionCalls": [
        {"id": "fc-9", "name": "process_payment", "args": {"amount": 500}}
    ]}}))
    .await;
    conn.say("I've asked for the payment.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "I've asked for the payment.");
    assert_eq!(finish_of(&events).0, FinishReason::ToolCalls);
    let calls = chat.record(&events);
    chat.results(vec![(
        &calls[0],
        Outcome::Denied {
            reason: Some("too much".into()),
        },
    )]);
    let mut stream = model.stream(chat.request());
    let response = conn.recv().await;
    let answer = &response["toolResponse"]["functionResponses"][0];
    assert_eq!(answer["id"], "fc-9");
    assert_eq!(answer["name"], "process_payment");
    assert_eq!(answer["scheduling"], "WHEN_IDLE");
    assert_eq!(answer["response"]["denied"], true);
    assert_eq!(answer["response"]["reason"], "too much");
    assert!(
        answer["response"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("denied")),
        "{answer}"
    );
    conn.say("Understood, no payment.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "Understood, no payment.");
}

/// `goAway`, a handle, then the socket closes mid-answer: the client reconnects with the handle
/// and the step goes on. The handle came after the input, so the input is not sent again.
#[tokio::test]
async fn go_away_mid_step_resumes_with_the_handle_and_the_step_goes_on() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Tell me a story");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("Once upon a time, ").await;
    conn.send(json!({"sessionResumptionUpdate": {"newHandle": "h-1", "resumable": true}}))
        .await;
    conn.send(json!({"goAway": {"timeLeft": "1s"}})).await;
    conn.close(1000, "").await;

    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-1"}));
    assert!(setup.get("historyConfig").is_none(), "{setup}");
    conn.say("the end.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "Once upon a time, the end.");
    assert_eq!(finish_of(&events).0, FinishReason::Stop);
    conn.silent_for(150).await;
    assert_eq!(server.accepted(), 2);
}

/// When the latest handle predates the step, a mid-step reconnect re-sends the step's input.
#[tokio::test]
async fn a_mid_step_reconnect_resends_what_the_handle_does_not_cover() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("First.").await;
    conn.turn_complete().await;
    conn.send(json!({"sessionResumptionUpdate": {"newHandle": "h-0", "resumable": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    // A handle while generating is not resumable and is ignored.
    chat.user("two");
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.send(json!({"sessionResumptionUpdate": {"newHandle": "", "resumable": false}}))
        .await;
    conn.close(1001, "going away").await;

    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-0"}));
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "Second.");
}

/// `goAway` between steps: the next step opens a new socket with the latest handle (and closes
/// the old one), and sends only the new message.
#[tokio::test]
async fn go_away_while_idle_reconnects_with_the_handle_at_the_next_step() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.say("First.").await;
    old.turn_complete().await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-7", "resumable": true}}))
        .await;
    old.send(json!({"goAway": {"timeLeft": "10s"}})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    chat.user("two");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-7"}));
    assert!(setup.get("historyConfig").is_none());
    assert_eq!(conn.recv().await, user_turn("two"));
    old.expect_closed().await;
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// A cancellation before the step ends removes the call before the runner sees it.
#[tokio::test]
async fn a_call_cancelled_before_the_step_ends_is_dropped() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather and pay");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(two_calls()).await;
    conn.send(json!({"toolCallCancellation": {"ids": ["fc-1"]}}))
        .await;
    conn.say("On it.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    let calls = calls_of(&events);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "process_payment");
    assert_eq!(finish_of(&events).0, FinishReason::ToolCalls);
}

/// A cancellation while the runner waits: published, and the result is not sent. When nothing
/// else is left to send, the results go as text so the model still answers.
#[tokio::test]
async fn a_call_cancelled_after_the_step_is_not_answered() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut cancellations = model.call_cancellations();
    let mut chat = Chat::new();
    chat.user("Weather and pay");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(two_calls()).await;
    let events = until_finish(&mut stream).await;
    let calls = chat.record(&events);
    conn.send(json!({"toolCallCancellation": {"ids": ["fc-2"]}}))
        .await;
    let notice = within("the cancellation notice", cancellations.recv())
        .await
        .expect("notice");
    assert_eq!(
        notice,
        CallNotice::Withdrawn {
            session_id: "chat-1".into(),
            provider_call_id: "fc-2".into()
        }
    );
    chat.results(vec![
        (
            &calls[0],
            Outcome::Output {
                output: json!({"tempC": 21}),
            },
        ),
        (
            &calls[1],
            Outcome::Output {
                output: json!({"paid": true}),
            },
        ),
    ]);
    let mut stream = model.stream(chat.request());
    assert_eq!(
        conn.recv().await,
        json!({"toolResponse": {"functionResponses": [
            {"id": "fc-1", "name": "get_weather", "response": {"tempC": 21}}
        ]}})
    );
    conn.say("21 degrees.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "21 degrees.");

    // Only a cancelled call's result left: it goes as text.
    let events = {
        chat.record(&[ModelEvent::TextDelta("21 degrees.".into())]);
        chat.user("Pay 5");
        let mut stream = model.stream(chat.request());
        assert_eq!(conn.recv().await, user_turn("Pay 5"));
        conn.send(json!({"toolCall": {"functionCalls": [
            {"id": "fc-3", "name": "process_payment", "args": {"amount": 5}}
        ]}}))
        .await;
        until_finish(&mut stream).await
    };
    let calls = chat.record(&events);
    conn.send(json!({"toolCallCancellation": {"ids": ["fc-3"]}}))
        .await;
    within("the cancellation notice", cancellations.recv())
        .await
        .expect("notice");
    chat.results(vec![(
        &calls[0],
        Outcome::Output {
            output: json!({"paid": true}),
        },
    )]);
    let mut stream = model.stream(chat.request());
    let message = conn.recv().await;
    assert_eq!(message["clientContent"]["turnComplete"], true, "{message}");
    let turns = message["clientContent"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["role"], "user");
    let text = turns[0]["parts"].to_string();
    assert!(
        text.contains(r#"[Result of the tool process_payment: {\"paid\":true}]"#),
        "{text}"
    );
    conn.say("Paid.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Paid.");
}

/// `interrupted` ends the step; the bare `turnComplete` that follows it does not end the next.
#[tokio::test]
async fn interrupted_ends_the_step() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("I was say").await;
    conn.send(json!({"serverContent": {"interrupted": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "I was say");
    assert_eq!(finish_of(&events).0, FinishReason::Other);
    chat.record(&events);
    chat.user("two");
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.turn_complete().await;
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// The runner drops a step mid-answer (Stop). The rest of that answer, even when it arrives after
/// the next step's input, never reaches the next step.
#[tokio::test]
async fn a_dropped_step_does_not_leak_into_the_next() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Tell me a long story");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("Once upon").await;
    let first = within("the first delta", stream.next()).await;
    assert_eq!(first, Some(Ok(ModelEvent::TextDelta("Once upon".into()))));
    drop(stream);
    chat.record(&[ModelEvent::TextDelta("Once upon".into())]);
    chat.user("Stop. What is 2+2?");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("Stop. What is 2+2?"));
    conn.say(" a time there was a dragon").await;
    conn.send(json!({"serverContent": {"interrupted": true}}))
        .await;
    conn.turn_complete().await;
    conn.say("4").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "4");
    assert_eq!(finish_of(&events).0, FinishReason::Stop);
}

#[tokio::test]
async fn close_1008_fails_the_step_with_the_reason() {
    let mut server = FakeLive::start().await;
    let model = live(&server, "gemini-2.0-flash-live-001");
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    let reason = "models/gemini-2.0-flash-live-001 is not found for API version v1beta, or is not supported for bidiGenerateContent";
    conn.close(1008, reason).await;
    let error = until_error(&mut stream).await;
    assert_eq!(
        error,
        ModelError::Provider {
            status: 1008,
            message: reason.into()
        }
    );
    assert!(within("the end", stream.next()).await.is_none());
}

#[tokio::test]
async fn a_missing_setup_complete_times_out() {
    let mut server = FakeLive::start().await;
    let mut config = config(&server, NON_BLOCKING_MODEL);
    config.timeouts.setup = Duration::from_millis(300);
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let message = conn.recv().await;
    assert!(message.get("setup").is_some());
    let started = std::time::Instant::now();
    let error = until_error(&mut stream).await;
    assert!(
        matches!(&error, ModelError::Transport(m) if m.contains("setup")),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn silence_mid_step_times_out() {
    let mut server = FakeLive::start().await;
    let mut config = config(&server, NON_BLOCKING_MODEL);
    config.timeouts.silence = Duration::from_millis(300);
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("Hm").await;
    let error = until_error(&mut stream).await;
    assert!(
        matches!(&error, ModelError::Transport(m) if m.contains("sent nothing")),
        "{error:?}"
    );
}

/// A fresh socket for a conversation with history: `historyConfig`, the history as one
/// `clientContent` (calls and results as text), then the new message.
#[tokio::test]
async fn a_fresh_socket_seeds_the_history() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather in Tokyo?");
    let calls = chat.record(&[
        ModelEvent::TextDelta("Checking.".into()),
        ModelEvent::ReasoningDelta {
            text: "needs a tool".into(),
            provider_data: None,
        },
        ModelEvent::ToolCall(ToolCall {
            id: String::new(),
            name: "get_weather".into(),
            args: json!({"location": "Tokyo"}),
            provider_data: Some(json!({"google": {"id": "fc-old"}})),
        }),
    ]);
    chat.results(vec![(
        &calls[0],
        Outcome::Output {
            output: json!({"tempC": 21}),
        },
    )]);
    chat.record(&[ModelEvent::TextDelta("It is 21 degrees.".into())]);
    chat.user("Thanks!");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(
        setup["historyConfig"],
        json!({"initialHistoryInClientContent": true})
    );
    assert_eq!(
        conn.recv().await,
        json!({"clientContent": {"turns": [
            {"role": "user", "parts": [{"text": "Weather in Tokyo?"}]},
            {"role": "model", "parts": [
                {"text": "Checking."},
                {"text": "[Called the tool get_weather with arguments {\"location\":\"Tokyo\"}]"}
            ]},
            {"role": "user", "parts": [{"text": "[Result of the tool get_weather: {\"tempC\":21}]"}]},
            {"role": "model", "parts": [{"text": "It is 21 degrees."}]}
        ], "turnComplete": true}})
    );
    assert_eq!(conn.recv().await, user_turn("Thanks!"));
    conn.say("You're welcome.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "You're welcome.");
}

/// History that is not what the socket saw (a restarted runner, an edited chat): a fresh,
/// seeded socket.
#[tokio::test]
async fn a_diverged_history_starts_a_fresh_session() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.say("First.").await;
    old.turn_complete().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-1", "resumable": true}}))
        .await;
    until_finish(&mut stream).await;

    let mut other = Chat::new();
    other.user("something else");
    other.record(&[ModelEvent::TextDelta("Other.".into())]);
    other.user("two");
    let mut stream = model.stream(other.request());
    old.expect_closed().await;
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(
        setup["sessionResumption"],
        json!({}),
        "the handle is not reused"
    );
    assert_eq!(
        setup["historyConfig"],
        json!({"initialHistoryInClientContent": true})
    );
    let seed = conn.recv().await;
    assert_eq!(
        seed["clientContent"]["turns"][0]["parts"][0]["text"],
        "something else"
    );
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// After the idle timeout the socket is closed; the next step resumes with the handle.
#[tokio::test]
async fn an_idle_socket_is_closed_and_resumed_later() {
    let mut server = FakeLive::start().await;
    let mut config = config(&server, NON_BLOCKING_MODEL);
    config.timeouts.idle_close = Duration::from_millis(200);
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.say("First.").await;
    old.turn_complete().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-2", "resumable": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    old.expect_closed().await;

    chat.user("two");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-2"}));
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// Results of calls made on an earlier socket cannot be a `toolResponse` (the ids are that
/// socket's): they go as text.
#[tokio::test]
async fn results_for_calls_of_an_earlier_socket_go_as_text() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather?");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-3", "resumable": true}}))
        .await;
    old.send(json!({"toolCall": {"functionCalls": [
        {"id": "fc-1", "name": "get_weather", "args": {"location": "Oslo"}}
    ]}}))
    .await;
    let events = until_finish(&mut stream).await;
    let calls = chat.record(&events);
    // The approval takes longer than the connection lives.
    old.send(json!({"goAway": {"timeLeft": "0s"}})).await;
    old.close(1000, "").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    chat.results(vec![(
        &calls[0],
        Outcome::Output {
            output: json!({"tempC": 3}),
        },
    )]);
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-3"}));
    // The handle covered the question, not the call: the call is replayed as the model's turn,
    // then the result as text.
    let context = conn.recv().await;
    assert_eq!(context["clientContent"]["turnComplete"], false, "{context}");
    assert_eq!(context["clientContent"]["turns"][0]["role"], "model");
    let trigger = conn.recv().await;
    assert_eq!(trigger["clientContent"]["turnComplete"], true);
    let text = trigger["clientContent"]["turns"][0]["parts"].to_string();
    assert!(
        text.contains("The tool calls you made earlier have finished"),
        "{text}"
    );
    assert!(
        text.contains("[Result of the tool get_weather: {\\\"tempC\\\":3}]"),
        "{text}"
    );
    conn.say("3 degrees.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "3 degrees.");
}

/// The person writes instead of answering: on a blocking model the open calls cannot be closed
/// cleanly on that socket, so a fresh one is seeded; on a non-blocking one the results go
/// `SILENT` and the message follows.
#[tokio::test]
async fn a_new_message_while_calls_are_open() {
    for model_name in [BLOCKING_MODEL, NON_BLOCKING_MODEL] {
        let mut server = FakeLive::start().await;
        let model = live(&server, model_name);
        let mut chat = Chat::new();
        chat.user("Pay 20");
        let mut stream = model.stream(chat.request());
        let mut conn = server.next_conn().await;
        conn.setup().await;
        conn.recv().await;
        conn.send(json!({"toolCall": {"functionCalls": [
            {"id": "fc-1", "name": "process_payment", "args": {"amount": 20}}
        ]}}))
        .await;
        if model_name == NON_BLOCKING_MODEL {
            conn.turn_complete().await;
        }
        let events = until_finish(&mut stream).await;
        let calls = chat.record(&events);
        chat.results(vec![(&calls[0], Outcome::Interrupted)]);
        chat.user("Never mind, what time is it?");
        let mut stream = model.stream(chat.request());
        if model_name == BLOCKING_MODEL {
            conn.expect_closed().await;
            let mut fresh = server.next_conn().await;
            let setup = fresh.setup().await;
            assert_eq!(setup["sessionResumption"], json!({}));
            assert!(setup.get("historyConfig").is_some());
            let seed = fresh.recv().await;
            assert_eq!(seed["clientContent"]["turnComplete"], true);
            let trigger = fresh.recv().await;
            let text = trigger["clientContent"]["turns"][0]["parts"].to_string();
            assert!(
                text.contains("[Result of the tool process_payment"),
                "{text}"
            );
            assert!(text.contains("Never mind, what time is it?"), "{text}");
            conn = fresh;
        } else {
            let response = conn.recv().await;
            let answer = &response["toolResponse"]["functionResponses"][0];
            assert_eq!(answer["id"], "fc-1");
            assert_eq!(answer["scheduling"], "SILENT");
            assert_eq!(answer["response"]["interrupted"], true);
            assert_eq!(conn.recv().await, user_turn("Never mind, what time is it?"));
        }
        conn.say("Noon.").await;
        conn.turn_complete().await;
        assert_eq!(
            text_of(&until_finish(&mut stream).await),
            "Noon.",
            "{model_name}"
        );
    }
}

/// A different tool list (or system prompt) needs a new setup: the socket is replaced, resuming
/// with the handle.
#[tokio::test]
async fn changed_tools_replace_the_socket() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.say("First.").await;
    old.turn_complete().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-4", "resumable": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    chat.user("two");
    let mut request = chat.request();
    request.tools.pop();
    let mut stream = model.stream(request);
    old.expect_closed().await;
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-4"}));
    assert_eq!(
        setup["tools"][0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// A call that arrives when no step is running is answered with an error at once (a blocking
/// model would wait forever), and what the model says after it does not leak into the next step.
#[tokio::test]
async fn a_call_between_steps_is_answered_with_an_error() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("First.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    conn.send(json!({"toolCall": {"functionCalls": [
        {"id": "fc-late", "name": "get_weather", "args": {"location": "Rome"}}
    ]}}))
    .await;
    let answer = conn.recv().await;
    let response = &answer["toolResponse"]["functionResponses"][0];
    assert_eq!(response["id"], "fc-late");
    assert_eq!(response["name"], "get_weather");
    assert!(response["response"]["error"].is_string(), "{answer}");
    assert!(
        response.get("scheduling").is_none(),
        "blocking: no scheduling"
    );

    chat.user("two");
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Sorry, I could not check Rome.").await;
    conn.turn_complete().await;
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

#[tokio::test]
async fn a_handshake_refused_with_429_is_rate_limiting() {
    let server = FakeLive::start_with(Handshake::Refuse(429)).await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let error = until_error(&mut stream).await;
    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
            message: "Quota exceeded for live sessions".into(),
        }
    );
}

/// `wss://` works with the TLS feature the crate enables (`rustls-tls-webpki-roots`): the client
/// gets as far as the TLS handshake (here with a plain TCP peer that hangs up) and reports a
/// transport error, instead of "TLS support not compiled in" or a crypto-provider panic.
#[tokio::test]
async fn wss_reaches_the_tls_handshake() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            drop(tcp);
        }
    });
    let mut config = GeminiLiveConfig::new(ApiKey::new("k"));
    config.live_url = format!("wss://{addr}/ws");
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let error = until_error(&mut model.stream(chat.request())).await;
    let ModelError::Transport(message) = &error else {
        panic!("{error:?}");
    };
    assert!(!message.contains("TLS support"), "{message}");
    assert!(message.to_ascii_lowercase().contains("tls"), "{message}");
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut config = GeminiLiveConfig::new(ApiKey::new("k"));
    config.live_url = format!("ws://{addr}/ws");
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let error = until_error(&mut model.stream(chat.request())).await;
    assert!(matches!(error, ModelError::Transport(_)), "{error:?}");
}

/// Each chat has its own socket.
#[tokio::test]
async fn sessions_do_not_share_sockets() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut a = Chat::with_id("a");
    a.user("from a");
    let mut b = Chat::with_id("b");
    b.user("from b");
    let mut stream_a = model.stream(a.request());
    let mut conn_a = server.next_conn().await;
    conn_a.setup().await;
    assert_eq!(conn_a.recv().await, user_turn("from a"));
    let mut stream_b = model.stream(b.request());
    let mut conn_b = server.next_conn().await;
    conn_b.setup().await;
    assert_eq!(conn_b.recv().await, user_turn("from b"));
    conn_b.say("B.").await;
    conn_b.turn_complete().await;
    conn_a.say("A.").await;
    conn_a.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream_a).await), "A.");
    assert_eq!(text_of(&until_finish(&mut stream_b).await), "B.");
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
    let mut config = GeminiLiveConfig::new(ApiKey::new("k"));
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
    let config = GeminiLiveConfig::new(ApiKey::new("secret-key"));
    assert!(!format!("{config:?}").contains("secret-key"));
}

/// A runtime whose BIDI turns use Live (the demo model answers SSE turns) with a BIDI turn in
/// chat `chat` that asked to pay Hanako 50 dollars and now waits for the person's approval:
/// (the fake server, its connection, the runtime, a reader of the turn's log past the approval
/// request, the approval id).
async fn payment_awaiting_approval(
    chat: &str,
) -> (
    FakeLive,
    FakeConn,
    Arc<crate::agent::Runtime>,
    crate::agent::session::LogReader,
    String,
) {
    use crate::agent::{
        Runtime, RuntimeSettings, TextTiming, TurnEntry, UserTurn,
        clock::{SequentialIds, SystemClock},
        demo::DemoModel,
        store::MemoryStore,
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    };
    use crate::protocol::Chunk;

    let mut server = FakeLive::start().await;
    let runtime = Runtime::new(
        Arc::new(DemoModel::new(Duration::ZERO)),
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
    );
    runtime.set_live_model(Arc::new(live(&server, BLOCKING_MODEL)));
    let started = within(
        "start",
        runtime.start_turn(
            chat,
            UserTurn {
                message_id: None,
                text: "Pay Hanako 50 dollars".into(),
                attachments: Vec::new(),
                transport: crate::agent::Transport::Bidi,
            },
            None,
        ),
    )
    .await
    .expect("turn started");
    let mut conn = server.next_conn().await;
    conn.setup().await;
    assert_eq!(conn.recv().await, user_turn("Pay Hanako 50 dollars"));
    conn.send(
        json!({"toolCall": {"functionCalls": [{"id": "fc-pay", "name": "process_payment",
        "args": {"amount": 50, "recipient": "Hanako", "currency": "USD"}}]}}),
    )
    .await;
    let mut reader = started.log.subscribe(0);
    let approval_id = loop {
        match within("approval request", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => break r.approval_id,
            Some(_) => {}
            None => panic!("the turn ended without asking for approval"),
        }
    };
    (server, conn, runtime, reader, approval_id)
}

/// The whole path a BIDI turn takes with Gemini Live: the runtime (demo model for SSE, Live for
/// BIDI) sends the person's message, the model asks for a payment, the approval gate holds it
/// until the person approves, the payment runs, its result goes back as a `toolResponse` with
/// the Live call id, and the transcript of the answer streams out as text.
#[tokio::test]
async fn a_bidi_turn_through_the_runtime_waits_for_approval_then_answers() {
    use crate::agent::{ApprovalDecision, PersonInput, TurnEntry};
    use crate::protocol::Chunk;

    let (_server, mut conn, runtime, mut reader, approval_id) =
        payment_awaiting_approval("live-chat").await;
    assert!(runtime.models_label().contains("BIDI: gemini-live"));
    assert_eq!(
        within("finish-step", reader.next()).await,
        Some(TurnEntry::Chunk(Chunk::FinishStep))
    );
    assert_eq!(within("pause", reader.next()).await, Some(TurnEntry::Pause));
    conn.silent_for(200).await;

    within(
        "submit",
        runtime.submit(
            "live-chat",
            &[PersonInput::Approval {
                approval_id,
                decision: ApprovalDecision::Approve,
            }],
        ),
    )
    .await
    .expect("approval accepted");
    let response = conn.recv().await;
    let answer = &response["toolResponse"]["functionResponses"][0];
    assert_eq!(answer["id"], "fc-pay", "{response}");
    assert_eq!(answer["name"], "process_payment");
    assert_eq!(answer["response"]["wallet_balance"], 950, "{response}");
    conn.turn_complete().await;
    conn.say("Paid 50 dollars to Hanako.").await;
    conn.turn_complete().await;

    let mut text = String::new();
    let mut model = None;
    loop {
        match within("the answer", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::Finish(f))) => {
                model = f.message_metadata.map(|m| m["model"].clone());
            }
            Some(TurnEntry::End) | None => break,
            Some(_) => {}
        }
    }
    assert_eq!(text, "Paid 50 dollars to Hanako.");
    assert!(
        model
            .and_then(|m| m.as_str().map(str::to_owned))
            .is_some_and(|m| m.contains("gemini-live")),
        "the finish names the Live model"
    );
}

/// Gemini Live withdraws a call while the person is still deciding (`toolCallCancellation`
/// after the step): the runtime ends the call, the approval can no longer be answered, the
/// audit log says why, and the turn goes on.
#[tokio::test]
async fn a_call_withdrawn_during_the_approval_wait_cannot_be_approved() {
    use crate::agent::{
        ApprovalDecision, InputError, PersonInput, TurnEntry,
        store::{AuditKind, AuditQuery},
    };
    use crate::protocol::Chunk;

    let (_server, mut conn, runtime, mut reader, approval_id) =
        payment_awaiting_approval("withdrawn").await;

    conn.send(json!({"toolCallCancellation": {"ids": ["fc-pay"]}}))
        .await;
    let withdrawn = loop {
        match within("the withdrawal", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolOutputError(e))) => break e.error_text,
            Some(_) => {}
            None => panic!("the turn ended without reporting the withdrawal"),
        }
    };
    assert!(withdrawn.contains("withdrew"), "{withdrawn}");
    let refused = runtime
        .submit(
            "withdrawn",
            &[PersonInput::Approval {
                approval_id: approval_id.clone(),
                decision: ApprovalDecision::Approve,
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(refused, InputError::ApprovalWithdrawn { approval_id });

    // The turn goes on: the model hears what became of its call and answers.
    let next = conn.recv().await;
    assert!(
        next.get("clientContent").is_some() || next.get("toolResponse").is_some(),
        "{next}"
    );
    conn.say("All right, I will not pay.").await;
    conn.turn_complete().await;
    let mut text = String::new();
    loop {
        match within("the answer", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::End) | None => break,
            Some(_) => {}
        }
    }
    assert_eq!(text, "All right, I will not pay.");
    let audit = runtime.store.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(audit[0].event.kind, AuditKind::Interrupted);
    assert_eq!(
        audit[0].event.reason.as_deref(),
        Some("withdrawn by the model")
    );
    let session = runtime
        .existing_session("withdrawn")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        session.snapshot().wallet.balance_cents,
        100_000,
        "nothing paid"
    );
}
