//! SSE mode over a real socket: `POST /api/chat` as the AI SDK drives it, resume, stop, the seed
//! system's `/stream` alias, and every bad input answered with a 4xx JSON error that changes
//! nothing.
#![cfg(feature = "ssr")]

use std::time::Duration;

use countersign::{
    protocol::{ChunkStreamDecoder, StreamItem, UiMessage},
    server::AppState,
};
use serde_json::{Value, json};

use crate::common;

struct Server {
    base: String,
    state: AppState,
    _inner: common::Server,
}

async fn server_with(delay: Duration, env: &[(&str, &str)]) -> Server {
    let inner = common::start(common::Opts {
        delay,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..common::Opts::default()
    })
    .await;
    Server {
        base: format!("http://{}", inner.addr),
        state: inner.state.clone(),
        _inner: inner,
    }
}

async fn server() -> Server {
    server_with(Duration::ZERO, &[]).await
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// The chunks of an SSE body as JSON values, and whether it ended with [DONE].
fn parse(body: &[u8]) -> (Vec<Value>, bool) {
    let mut decoder = ChunkStreamDecoder::new();
    let mut chunks = Vec::new();
    let mut done = false;
    for frame in decoder.push(body).into_iter().chain(decoder.finish()) {
        match frame.expect("valid frame") {
            StreamItem::Chunk(c) => chunks.push(serde_json::to_value(&c).unwrap()),
            StreamItem::Done => done = true,
        }
    }
    (chunks, done)
}

fn types(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| c["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

async fn post(server: &Server, body: Value) -> reqwest::Response {
    client()
        .post(format!("{}/api/chat", server.base))
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

/// Applies chunks to the client's copy of the conversation like useChat (continuing the last
/// assistant message).
fn fold(messages: &mut Vec<UiMessage>, chunks: &[Value]) {
    let mut conversation = countersign::protocol::Conversation::new(std::mem::take(messages));
    conversation.begin_stream(
        countersign::protocol::Trigger::SubmitMessage,
        "client-fresh-id",
    );
    for chunk in chunks {
        let chunk = countersign::protocol::Chunk::from_value(chunk.clone()).unwrap();
        conversation
            .apply(&chunk)
            .expect("the client reducer accepts every chunk");
    }
    conversation.end_stream();
    *messages = conversation.into_messages();
}

#[tokio::test]
async fn a_payment_takes_two_requests_and_one_assistant_message() {
    let server = server().await;
    let mut messages: Vec<UiMessage> =
        vec![serde_json::from_value(user("u1", "Send $50 to Hanako")).unwrap()];

    let response = post(
        &server,
        json!({"id": "chat-1", "messages": messages, "trigger": "submit-message"}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(headers["x-vercel-ai-ui-message-stream"], "v1");
    assert_eq!(headers["x-accel-buffering"], "no");
    let (chunks, done) = parse(&response.bytes().await.unwrap());
    assert!(done, "the response ends with [DONE]");
    assert_eq!(
        types(&chunks),
        [
            "start",
            "start-step",
            "tool-input-start",
            "tool-input-available",
            "tool-approval-request",
            "finish-step",
            "finish"
        ]
    );
    assert_eq!(chunks.last().unwrap()["finishReason"], "tool-calls");
    let message_id = chunks[0]["messageId"].as_str().unwrap().to_string();
    let approval_id = chunks[4]["approvalId"].as_str().unwrap().to_string();
    fold(&mut messages, &chunks);
    assert_eq!(messages.len(), 2);

    // The person approves: the client flips the part to approval-responded and sends it all.
    let mut conversation = countersign::protocol::Conversation::new(messages.clone());
    conversation.add_tool_approval_response(&approval_id, true, None);
    messages = conversation.into_messages();
    let response = post(
        &server,
        json!({"id": "chat-1", "messages": messages, "trigger": "submit-message", "messageId": message_id}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let (chunks, done) = parse(&response.bytes().await.unwrap());
    assert!(done);
    assert_eq!(
        chunks[0],
        json!({"type": "start", "messageId": message_id}),
        "same assistant message"
    );
    // Text streams as the model writes it (ADR 0004): one or more deltas.
    let mut kinds = types(&chunks);
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "start",
            "tool-output-available",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish"
        ]
    );
    assert_eq!(chunks[1]["output"]["wallet_balance"], 950);
    fold(&mut messages, &chunks);
    assert_eq!(
        messages.len(),
        2,
        "the continuation extended the same message"
    );
    let tool = messages[1]
        .find_tool_part(chunks[1]["toolCallId"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        tool.state,
        countersign::protocol::ToolState::OutputAvailable
    );
    assert!(messages[1].text().contains("950"));

    // Sending the same answer again is an echo with nothing to continue.
    let again = post(&server, json!({"id": "chat-1", "messages": messages})).await;
    assert_eq!(again.status(), 409);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_active_turn");
}

#[tokio::test]
async fn strict_dialect_sends_no_key_ai_6_0_0_rejects() {
    let server = server().await;
    let response = post(
        &server,
        json!({"id": "c", "messages": [user("u", "Pay Alice 30 dollars and Bob 40 dollars")]}),
    )
    .await;
    let (chunks, _) = parse(&response.bytes().await.unwrap());
    for chunk in &chunks {
        for key in chunk.as_object().unwrap().keys() {
            assert!(
                !["providerMetadata", "toolMetadata", "signature", "reason"]
                    .contains(&key.as_str()),
                "{chunk}"
            );
        }
    }
    assert_eq!(
        types(&chunks)
            .iter()
            .filter(|t| *t == "tool-approval-request")
            .count(),
        2
    );
}

#[tokio::test]
async fn bad_requests_get_json_errors_and_change_nothing() {
    let server = server_with(Duration::ZERO, &[("COUNTERSIGN_MAX_BODY_BYTES", "2048")]).await;
    let url = format!("{}/api/chat", server.base);
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (client().post(&url).header("content-type", "application/json").body("{not json"), 400, "invalid_request"),
        (client().post(&url).json(&json!({"id": "c", "messages": []})), 400, "empty_messages"),
        (client().post(&url).json(&json!({"messages": [user("u", "hi")]})), 400, "invalid_request"),
        (client().post(&url).json(&json!({"id": " ", "messages": [user("u", "hi")]})), 400, "missing_chat_id"),
        (client().post(&url).json(&json!({"id": "c", "messages": [user("u", "   ")]})), 400, "empty_message"),
        (client().post(&url).json(&json!({"id": "c", "messages": [user("u", &"x".repeat(4000))]})), 413, "body_too_large"),
        (
            client().post(&url).json(&json!({"id": "c", "messages": [{"id": "m", "role": "assistant", "parts": [
                {"type": "tool-process_payment", "toolCallId": "call-x", "state": "approval-responded",
                 "input": {}, "approval": {"id": "apv-forged", "approved": true}}]}]})),
            409,
            "no_active_turn",
        ),
    ];
    for (request, status, code) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{code}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    assert!(
        server
            .state
            .runtime
            .list_sessions()
            .await
            .unwrap()
            .is_empty(),
        "no session was created"
    );
}

#[tokio::test]
async fn forged_and_foreign_approval_ids_are_refused() {
    let server = server().await;
    let first = post(
        &server,
        json!({"id": "a", "messages": [user("u", "Send $50 to Hanako")]}),
    )
    .await;
    let (a_chunks, _) = parse(&first.bytes().await.unwrap());
    let second = post(
        &server,
        json!({"id": "b", "messages": [user("u", "Send $10 to Taro")]}),
    )
    .await;
    let (b_chunks, _) = parse(&second.bytes().await.unwrap());
    let a_message = a_chunks[0]["messageId"].as_str().unwrap();
    let a_call = a_chunks[4]["toolCallId"].as_str().unwrap();
    let b_approval = b_chunks[4]["approvalId"].as_str().unwrap();

    let answer = |approval: &str| {
        json!({"id": "a", "messages": [{"id": a_message, "role": "assistant", "parts": [
            {"type": "tool-process_payment", "toolCallId": a_call, "state": "approval-responded",
             "input": {"amount": 50, "recipient": "Hanako"}, "approval": {"id": approval, "approved": true}}]}]})
    };
    let forged = post(&server, answer("apv-999")).await;
    assert_eq!(forged.status(), 404);
    assert_eq!(
        forged.json::<Value>().await.unwrap()["error"]["code"],
        "unknown_approval"
    );
    let foreign = post(&server, answer(b_approval)).await;
    assert_eq!(foreign.status(), 403);
    assert_eq!(
        foreign.json::<Value>().await.unwrap()["error"]["code"],
        "approval_of_other_chat"
    );

    let session = server.state.runtime.session("a").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
    assert_eq!(
        session.turn_status(),
        Some(countersign::agent::TurnStatus::AwaitingPerson)
    );
}

#[tokio::test]
async fn a_disconnected_turn_finishes_and_resume_replays_it_whole() {
    let server = server_with(Duration::from_millis(5), &[]).await;
    // Start a long answer and drop the connection after the first bytes.
    let mut response = post(
        &server,
        json!({"id": "r", "messages": [user("u", "/lorem 300")]}),
    )
    .await;
    let first = response.chunk().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(response);

    let resumed = client()
        .get(format!("{}/api/chat/r/stream", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let (chunks, done) = parse(&resumed.bytes().await.unwrap());
    assert!(done);
    assert_eq!(chunks[0]["type"], "start");
    let mut messages = Vec::new();
    fold(&mut messages, &chunks);
    assert_eq!(
        messages[0].text().split_whitespace().count(),
        300,
        "every word exactly once"
    );

    // Nothing streams any more.
    let idle = client()
        .get(format!("{}/api/chat/r/stream", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(idle.status(), 204);
    let unknown = client()
        .get(format!("{}/api/chat/nope/stream", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 204);
}

#[tokio::test]
async fn an_sse_response_is_neither_compressed_nor_held_back() {
    let server = server_with(Duration::from_millis(20), &[]).await;
    let mut response = client()
        .post(format!("{}/api/chat", server.base))
        .header("accept-encoding", "br, gzip, deflate, zstd")
        .json(&json!({"id": "z", "messages": [user("u", "/lorem 200")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().get("content-encoding").is_none(),
        "{:?}",
        response.headers()
    );
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    // The first bytes arrive while the model is still writing (200 words, 20 ms apart): a
    // compressor or a buffer in between would hold them until the end.
    let first = response.chunk().await.unwrap().unwrap();
    let first = String::from_utf8_lossy(&first);
    assert!(first.starts_with("data: {\"type\":\"start\""), "{first}");
    assert!(!first.contains("[DONE]"), "{first}");
    let session = server.state.runtime.session("z").await.unwrap();
    assert_eq!(
        session.turn_status(),
        Some(countersign::agent::TurnStatus::Running),
        "the turn is still running when its first chunk is read"
    );
}

#[tokio::test]
async fn stop_cancels_the_running_turn() {
    let server = server_with(Duration::from_millis(20), &[]).await;
    let mut response = post(
        &server,
        json!({"id": "s", "messages": [user("u", "/lorem 500")]}),
    )
    .await;
    response.chunk().await.unwrap();
    let stopped: Value = client()
        .post(format!("{}/api/chat/s/stop", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stopped["stopped"], true);
    let mut rest = Vec::new();
    while let Some(bytes) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&bytes);
    }
    let text = String::from_utf8_lossy(&rest);
    assert!(text.contains(r#""type":"abort""#), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"));
    let again: Value = client()
        .post(format!("{}/api/chat/s/stop", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["stopped"], false);
}

#[tokio::test]
async fn browser_tool_output_in_a_separate_request() {
    let server = server().await;
    let response = post(
        &server,
        json!({"id": "loc", "messages": [user("u", "Where am I?")]}),
    )
    .await;
    let (chunks, _) = parse(&response.bytes().await.unwrap());
    let message_id = chunks[0]["messageId"].as_str().unwrap();
    let call = chunks[3]["toolCallId"].as_str().unwrap();
    let approval = chunks[4]["approvalId"].as_str().unwrap();
    let part = |state: &str, output: Option<Value>| {
        let mut p = json!({"type": "tool-get_location", "toolCallId": call, "state": state, "input": {},
                           "approval": {"id": approval, "approved": true}});
        if let Some(o) = output {
            p["output"] = o;
        }
        json!({"id": "loc", "messages": [{"id": message_id, "role": "assistant", "parts": [p]}]})
    };
    // Pattern B: approval first; the response only says "waiting" again.
    let approved = post(&server, part("approval-responded", None)).await;
    let (chunks, done) = parse(&approved.bytes().await.unwrap());
    assert!(done);
    assert_eq!(types(&chunks), ["start", "finish"]);
    // Then the browser's output.
    let output = post(
        &server,
        part(
            "output-available",
            Some(json!({"latitude": 48.85, "longitude": 2.35, "city": "Paris"})),
        ),
    )
    .await;
    let (chunks, _) = parse(&output.bytes().await.unwrap());
    assert_eq!(
        types(&chunks)[..3],
        ["start", "tool-output-available", "start-step"]
    );
    let text: String = chunks.iter().filter_map(|c| c["delta"].as_str()).collect();
    assert!(text.contains("Paris"), "{text}");
}

#[tokio::test]
async fn the_seed_stream_alias_speaks_the_seed_shape_behind_its_api_key() {
    let server = server_with(
        Duration::ZERO,
        &[("COUNTERSIGN_API_KEY", "dev-key-12345-and-more")],
    )
    .await;
    let url = format!("{}/stream", server.base);
    let unauthorized = client()
        .post(&url)
        .json(&json!({"messages": [{"role": "user", "content": "東京の天気を教えて"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);

    let response = client()
        .post(&url)
        .header("x-api-key", "dev-key-12345-and-more")
        .json(&json!({"messages": [{"role": "user", "content": "次郎さんに200ドル送金してください"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (chunks, done) = parse(&response.bytes().await.unwrap());
    assert!(done);
    let approval = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap()["approvalId"]
        .as_str()
        .unwrap()
        .to_string();
    // The seed's turn-2 shape: a user message with an ADK confirmation part.
    let response = client()
        .post(&url)
        .header("x-api-key", "dev-key-12345-and-more")
        .json(&json!({"messages": [{"role": "user", "parts": [{
            "type": "tool-adk_request_confirmation", "toolCallId": approval, "toolName": "adk_request_confirmation",
            "state": "approval-responded", "approval": {"id": approval, "approved": false, "reason": "User rejected the operation"}}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (chunks, done) = parse(&response.bytes().await.unwrap());
    assert!(done);
    // The seed's words for a denial (its frontend has no state for `tool-output-denied`).
    assert_eq!(types(&chunks)[..2], ["start", "tool-output-error"]);
    assert_eq!(chunks[1]["errorText"], "This tool call is rejected.");
}

/// How many `text-delta` chunks a "/lorem 30" answer arrives in on `path`, with `headers`.
async fn lorem_deltas(server: &Server, path: &str, headers: &[(&str, &str)]) -> usize {
    let mut request = client()
        .post(format!("{}{path}", server.base))
        .json(&json!({"id": format!("timing-{path}-{}", headers.len()), "messages": [user("u", "/lorem 30")]}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let (chunks, done) = parse(&response.bytes().await.unwrap());
    assert!(done);
    types(&chunks).iter().filter(|t| *t == "text-delta").count()
}

#[tokio::test]
async fn text_streams_by_default_on_our_route_and_is_held_on_the_seeds() {
    let server = server().await;
    // A stock AI SDK client sends no header of ours: every word is its own delta.
    assert_eq!(lorem_deltas(&server, "/api/chat", &[]).await, 30);
    // Held on request (ADR 0004)…
    assert_eq!(
        lorem_deltas(&server, "/api/chat", &[("x-countersign-text", "hold")]).await,
        1
    );
    // …and by default on the seed's route, whose own frontend needs it.
    assert_eq!(lorem_deltas(&server, "/stream", &[]).await, 1);
    assert_eq!(
        lorem_deltas(&server, "/stream", &[("x-countersign-text", "progressive")]).await,
        30
    );
}
