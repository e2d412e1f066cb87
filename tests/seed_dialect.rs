//! The seed's own routes against its own recordings: `POST /stream` and WebSocket `/live` driven
//! through the scenarios of `tests/fixtures/seed/frontend/*.json` (the demo model, the seed test
//! client's request shapes), compared after the seed's own normalisation (its
//! `compare_raw_events`): reasoning dropped, consecutive text deltas merged, ids ignored; then
//! the type sequence, each chunk's key set, `toolName` and `errorText`, `finishReason` `stop`,
//! the `finish` metadata's keys and the `[DONE]` count must match. The seed's frontend and tests
//! depend on exactly that (ADR 0019).
#![cfg(feature = "ssr")]

use std::{collections::BTreeSet, time::Duration};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream, connect_async,
    tungstenite::{Message, protocol::frame::coding::CloseCode},
};

use crate::common;

use common::Opts;

type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// What the seed test client's browser tool returns for `get_location`.
fn tokyo() -> Value {
    json!({"latitude": 35.6762, "longitude": 139.6503, "accuracy": 20, "city": "Tokyo", "country": "Japan"})
}

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/seed/frontend/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// A stream as the seed's checker sees it: its chunks and how many `[DONE]`s.
#[derive(Debug, Default)]
struct Stream {
    chunks: Vec<Value>,
    done: usize,
}

impl Stream {
    /// One SSE event or WebSocket text frame, checked for the seed's bytes on the way: `data: `
    /// and Python-style JSON (ASCII only; `"type": "…"` first, except the compact step markers).
    fn push_frame(&mut self, frame: &str) {
        let data = frame
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("not a data frame: {frame:?}"))
            .trim_end_matches('\n');
        if data == "[DONE]" {
            self.done += 1;
            return;
        }
        assert!(data.is_ascii(), "non-ASCII in {data}");
        let chunk: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{data}: {e}"));
        if chunk["type"] == "start-step" || chunk["type"] == "finish-step" {
            assert_eq!(
                data,
                format!("{{\"type\":\"{}\"}}", chunk["type"].as_str().unwrap())
            );
        } else {
            assert!(data.starts_with("{\"type\": \""), "{data}");
        }
        self.chunks.push(chunk);
    }

    /// An SSE body: events separated by blank lines; `: ping` comments skipped.
    fn push_body(&mut self, body: &str) {
        for event in body.split_terminator("\n\n") {
            if !event.starts_with(':') {
                self.push_frame(event);
            }
        }
    }

    fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.chunks.iter().filter(|c| c["type"] == kind).collect()
    }
}

/// The seed checker's normalisation: no reasoning, consecutive text deltas of one id merged.
fn normalise(chunks: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for chunk in chunks {
        let kind = chunk["type"].as_str().unwrap_or_default();
        if kind.starts_with("reasoning-") {
            continue;
        }
        if kind == "text-delta"
            && let Some(last) = out.last_mut()
            && last["type"] == "text-delta"
            && last["id"] == chunk["id"]
        {
            let merged = format!(
                "{}{}",
                last["delta"].as_str().unwrap_or_default(),
                chunk["delta"].as_str().unwrap_or_default()
            );
            last["delta"] = json!(merged);
            continue;
        }
        out.push(chunk.clone());
    }
    out
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// Ours against the recording, as the seed's checker compares them.
fn assert_like_the_seed(name: &str, ours: &Stream) {
    let recorded = fixture(name);
    let output = &recorded["output"];
    let expected = normalise(output["expectedChunks"].as_array().unwrap());
    let actual = normalise(&ours.chunks);
    let types = |chunks: &[Value]| -> Vec<String> {
        chunks
            .iter()
            .map(|c| c["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(types(&actual), types(&expected), "{name}: type sequence");
    assert_eq!(
        ours.done as u64,
        output["expectedDoneCount"].as_u64().unwrap(),
        "{name}: [DONE] count"
    );
    for (index, (a, e)) in actual.iter().zip(&expected).enumerate() {
        let at = format!("{name}: chunk {index} ({})", e["type"]);
        assert_eq!(keys(a), keys(e), "{at}: keys");
        for key in ["toolName", "errorText", "finishReason"] {
            assert_eq!(a.get(key), e.get(key), "{at}: {key}");
        }
        if e["type"] == "finish" {
            assert_eq!(a["finishReason"], "stop", "{at}");
            // The BIDI recordings' `audio` is the seed's voice output, which we do not send
            // (the seed's checker skips it too).
            let mut expected_keys = keys(&e["messageMetadata"]);
            expected_keys.remove("audio");
            assert_eq!(keys(&a["messageMetadata"]), expected_keys, "{at}: metadata");
            assert_eq!(
                keys(&a["messageMetadata"]["usage"]),
                keys(&e["messageMetadata"]["usage"]),
                "{at}: usage"
            );
            assert_eq!(a["messageMetadata"]["modelVersion"], "countersign-demo");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SSE: POST /stream, the seed test client's two requests.
// ---------------------------------------------------------------------------------------------

struct Sse {
    url: String,
    _server: common::Server,
}

async fn sse() -> Sse {
    let server = common::start(Opts::default()).await;
    Sse {
        url: format!("http://{}/stream", server.addr),
        _server: server,
    }
}

impl Sse {
    async fn post(&self, body: Value, stream: &mut Stream) -> Vec<Value> {
        let response = reqwest::Client::new()
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let before = stream.chunks.len();
        stream.push_body(&response.text().await.unwrap());
        stream.chunks[before..].to_vec()
    }
}

/// How the person answers each approval request of the first response, in order.
#[derive(Clone, Copy)]
enum Answer {
    Approve,
    Deny,
    /// Approve, with the browser's location in the same request (`tool-result`, Pattern A).
    ApproveWithLocation,
}

/// The seed test client's second request: the user message, the assistant message it rebuilt
/// (calls in state `call`), and a user message with one ADK confirmation per request.
fn second_request(chat: &str, first: &Value, response: &[Value], answers: &[Answer]) -> Value {
    let calls: Vec<Value> = response
        .iter()
        .filter(|c| c["type"] == "tool-input-available")
        .map(|c| {
            json!({"type": format!("tool-{}", c["toolName"].as_str().unwrap()),
                   "toolCallId": c["toolCallId"], "toolName": c["toolName"],
                   "state": "call", "input": c["input"]})
        })
        .collect();
    let requests: Vec<&Value> = response
        .iter()
        .filter(|c| c["type"] == "tool-approval-request")
        .collect();
    assert_eq!(requests.len(), answers.len(), "one answer per request");
    let mut parts = Vec::new();
    for (request, answer) in requests.iter().zip(answers) {
        let id = &request["approvalId"];
        let approval = match answer {
            Answer::Deny => {
                json!({"id": id, "approved": false, "reason": "User rejected the operation"})
            }
            _ => json!({"id": id, "approved": true}),
        };
        parts.push(
            json!({"type": "tool-adk_request_confirmation", "toolCallId": id,
                          "toolName": "adk_request_confirmation", "state": "approval-responded",
                          "approval": approval}),
        );
        if let Answer::ApproveWithLocation = answer {
            parts.push(
                json!({"type": "tool-result", "toolCallId": request["toolCallId"], "result": tokyo()}),
            );
        }
    }
    json!({"id": chat, "trigger": "submit-message", "messages": [
        first,
        {"role": "assistant", "parts": calls},
        {"role": "user", "parts": parts},
    ]})
}

/// Plays the fixture `name` on `/stream`: its first request, then (if it asks) the answers.
async fn sse_scenario(name: &str, answers: &[Answer]) -> Stream {
    let server = sse().await;
    let input = fixture(name)["input"].clone();
    let chat = format!("seed-{name}");
    let mut stream = Stream::default();
    let mut first = input.clone();
    first["id"] = json!(chat);
    let response = server.post(first, &mut stream).await;
    if !answers.is_empty() {
        let body = second_request(&chat, &input["messages"][0], &response, answers);
        server.post(body, &mut stream).await;
    }
    stream
}

#[tokio::test]
async fn sse_weather_and_music_are_one_response() {
    assert_like_the_seed(
        "get_weather-sse-baseline",
        &sse_scenario("get_weather-sse-baseline", &[]).await,
    );
    // The seed's frontend plays the music itself and never reports it: the server answers at
    // once with the seed's own words.
    let stream = sse_scenario("change_bgm-sse-baseline", &[]).await;
    assert_like_the_seed("change_bgm-sse-baseline", &stream);
    assert_eq!(
        stream.of_type("tool-output-available")[0]["output"],
        json!({"success": true, "track": 1,
               "message": "BGM change to track 1 initiated (frontend handles execution)"})
    );
}

#[tokio::test]
async fn sse_payment_approved_and_denied() {
    let stream = sse_scenario("process_payment-approved-sse-baseline", &[Answer::Approve]).await;
    assert_like_the_seed("process_payment-approved-sse-baseline", &stream);
    // The first response's finish already reports usage and the model.
    let finishes = stream.of_type("finish");
    assert!(finishes[0]["messageMetadata"]["usage"]["totalTokens"].is_u64());
    // Both responses extend one assistant message (ours on purpose, ADR 0019).
    let starts = stream.of_type("start");
    assert_eq!(starts[0]["messageId"], starts[1]["messageId"]);

    let stream = sse_scenario("process_payment-denied-sse-baseline", &[Answer::Deny]).await;
    assert_like_the_seed("process_payment-denied-sse-baseline", &stream);
}

#[tokio::test]
async fn sse_location_approved_and_denied() {
    let stream = sse_scenario(
        "get_location-approved-sse-baseline",
        &[Answer::ApproveWithLocation],
    )
    .await;
    assert_like_the_seed("get_location-approved-sse-baseline", &stream);
    assert_eq!(
        stream.of_type("tool-output-available")[0]["output"],
        tokyo()
    );
    assert_like_the_seed(
        "get_location-denied-sse-baseline",
        &sse_scenario("get_location-denied-sse-baseline", &[Answer::Deny]).await,
    );
}

#[tokio::test]
async fn sse_parallel_payments_in_every_combination() {
    use Answer::{Approve, Deny};
    for (name, answers) in [
        (
            "multiple-payments-approved-sse-baseline",
            [Approve, Approve],
        ),
        ("multiple-payments-approve-deny-sse", [Approve, Deny]),
        ("multiple-payments-deny-approve-sse", [Deny, Approve]),
        ("multiple-payments-deny-deny-sse", [Deny, Deny]),
    ] {
        let stream = sse_scenario(name, &answers).await;
        assert_like_the_seed(name, &stream);
        // Results in the order of the calls (Alice, then Bob), whatever finished first.
        let calls: Vec<&Value> = stream
            .of_type("tool-input-available")
            .into_iter()
            .map(|c| &c["toolCallId"])
            .collect();
        let results: Vec<&Value> = stream
            .chunks
            .iter()
            .filter(|c| c["type"] == "tool-output-available" || c["type"] == "tool-output-error")
            .map(|c| &c["toolCallId"])
            .collect();
        assert_eq!(results, calls, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// BIDI: WebSocket /live, one stream per turn.
// ---------------------------------------------------------------------------------------------

async fn live(server: &common::Server) -> Socket {
    connect_async(format!("ws://{}/live", server.addr))
        .await
        .unwrap()
        .0
}

async fn send(socket: &mut Socket, frame: Value) {
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

/// Reads frames into `stream` until `[DONE]` or, after a chunk of type `stop`, returns.
async fn read_until(socket: &mut Socket, stream: &mut Stream, stop: &str) {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s")
            .expect("the socket stays open")
            .unwrap();
        let Message::Text(text) = message else {
            continue;
        };
        let before = stream.done;
        stream.push_frame(text.as_str());
        if stream.done > before || stream.chunks.last().is_some_and(|c| c["type"] == stop) {
            return;
        }
    }
}

/// The seed's BIDI client's answer: a `message` frame without a chat id, holding a user message
/// with one ADK confirmation.
fn confirmation(stream: &Stream, approved: bool) -> Value {
    let request = stream
        .of_type("tool-approval-request")
        .last()
        .copied()
        .cloned()
        .expect("an approval request");
    let id = &request["approvalId"];
    let mut approval = json!({"id": id, "approved": approved});
    if !approved {
        approval["reason"] = json!("User rejected the operation");
    }
    json!({"type": "message", "messages": [{"role": "user", "parts": [{
        "type": "tool-adk_request_confirmation", "toolCallId": id,
        "toolName": "adk_request_confirmation", "state": "approval-responded",
        "approval": approval}]}]})
}

/// The fixture's first frame as the seed's BIDI client sends it (no chat id).
fn first_frame(name: &str) -> Value {
    let input = fixture(name)["input"].clone();
    json!({"type": "message", "version": "1.0", "messages": input["messages"], "trigger": input["trigger"]})
}

/// Plays an approval scenario on `/live`: asks, waits for the approval group, answers.
async fn bidi_approval(server: &common::Server, name: &str, approved: bool) -> Stream {
    let mut socket = live(server).await;
    let mut stream = Stream::default();
    send(&mut socket, first_frame(name)).await;
    read_until(&mut socket, &mut stream, "finish-step").await;
    send(&mut socket, confirmation(&stream, approved)).await;
    read_until(&mut socket, &mut stream, "[DONE]").await;
    stream
}

#[tokio::test]
async fn bidi_weather_is_one_stream_without_step_markers() {
    let server = common::start(Opts::default()).await;
    let mut socket = live(&server).await;
    let mut stream = Stream::default();
    send(&mut socket, first_frame("get_weather-bidi-baseline")).await;
    read_until(&mut socket, &mut stream, "[DONE]").await;
    assert_like_the_seed("get_weather-bidi-baseline", &stream);
}

#[tokio::test]
async fn bidi_payment_approved_and_denied() {
    let server = common::start(Opts::default()).await;
    let stream = bidi_approval(&server, "process_payment-approved-bidi-baseline", true).await;
    assert_like_the_seed("process_payment-approved-bidi-baseline", &stream);
    let stream = bidi_approval(&server, "process_payment-denied-bidi-baseline", false).await;
    assert_like_the_seed("process_payment-denied-bidi-baseline", &stream);
    assert_eq!(
        stream.of_type("tool-output-error")[0]["errorText"],
        "User denied the payment"
    );
}

#[tokio::test]
async fn bidi_location_approved_then_reported_and_denied() {
    let server = common::start(Opts::default()).await;
    let name = "get_location-approved-bidi-baseline";
    let mut socket = live(&server).await;
    let mut stream = Stream::default();
    send(&mut socket, first_frame(name)).await;
    read_until(&mut socket, &mut stream, "finish-step").await;
    let call = stream.of_type("tool-input-available")[0]["toolCallId"].clone();
    send(&mut socket, confirmation(&stream, true)).await;
    // The seed's test client runs the browser tool and sends its result.
    send(
        &mut socket,
        json!({"type": "tool_result", "toolCallId": call, "result": tokyo()}),
    )
    .await;
    read_until(&mut socket, &mut stream, "[DONE]").await;
    assert_like_the_seed(name, &stream);

    let stream = bidi_approval(&server, "get_location-denied-bidi-baseline", false).await;
    assert_like_the_seed("get_location-denied-bidi-baseline", &stream);
}

#[tokio::test]
async fn bidi_music_waits_for_the_browsers_result() {
    let server = common::start(Opts::default()).await;
    let name = "change_bgm-bidi-baseline";
    let mut socket = live(&server).await;
    let mut stream = Stream::default();
    send(&mut socket, first_frame(name)).await;
    read_until(&mut socket, &mut stream, "tool-input-available").await;
    let call = stream.of_type("tool-input-available")[0]["toolCallId"].clone();
    send(
        &mut socket,
        json!({"type": "tool_result", "toolCallId": call, "result":
            {"success": true, "track": 1, "message": "BGM change to track 1 initiated (frontend handles execution)"}}),
    )
    .await;
    read_until(&mut socket, &mut stream, "[DONE]").await;
    assert_like_the_seed(name, &stream);
}

#[tokio::test]
async fn bidi_an_unanswered_approval_times_out_in_the_seeds_words() {
    let server = common::start(Opts {
        approval: Duration::from_secs(1),
        ..Opts::default()
    })
    .await;
    let name = "process_payment-timeout-bidi-baseline";
    let mut socket = live(&server).await;
    let mut stream = Stream::default();
    send(&mut socket, first_frame(name)).await;
    read_until(&mut socket, &mut stream, "finish-step").await;
    read_until(&mut socket, &mut stream, "[DONE]").await;
    assert_like_the_seed(name, &stream);
}

#[tokio::test]
async fn live_tolerates_what_it_does_not_understand_and_closes_on_broken_json() {
    let server = common::start(Opts::default()).await;
    let mut socket = live(&server).await;
    // Unknown types, unreadable structure and push-to-talk state: logged and ignored, as the
    // seed's backend does (an error chunk would fail the seed client's open stream).
    send(&mut socket, json!({"type": "no_such_frame"})).await;
    send(&mut socket, json!({"type": "message", "messages": "nope"})).await;
    send(
        &mut socket,
        json!({"type": "audio_control", "action": "start"}),
    )
    .await;
    send(
        &mut socket,
        json!({"type": "ping", "version": "1.0", "timestamp": 7}),
    )
    .await;
    let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let pong: Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
    assert_eq!(
        pong,
        json!({"type": "pong", "timestamp": 7}),
        "nothing came before the pong"
    );
    // Broken JSON ends the connection with a protocol error.
    socket
        .send(Message::Text("{not json".into()))
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Close(Some(frame)))) => {
                assert_eq!(frame.code, CloseCode::Protocol);
                assert!(frame.reason.starts_with("Invalid JSON"), "{}", frame.reason);
                break;
            }
            Some(Ok(Message::Close(None))) | None | Some(Err(_)) => {
                panic!("expected a close frame with code 1002")
            }
            Some(Ok(_)) => {}
        }
    }
}
