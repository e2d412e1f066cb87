//! BIDI mode over a real WebSocket: many turns on one socket, approvals (several pending at
//! once, answered in any order), browser tools, interrupts, reconnect without loss, takeover,
//! and every bad input answered without harming the session.
#![cfg(feature = "ssr")]

use std::time::Duration;

use countersign::server::AppState;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::{
    connect_async,
    tungstenite::{Message, client::IntoClientRequest, protocol::frame::coding::CloseCode},
};

mod common;

use common::Opts;
use common::socket::{Frame, Socket, next};

struct Server {
    base: String,
    state: AppState,
    _inner: common::Server,
}

async fn server_with(opts: Opts) -> Server {
    let inner = common::start(opts).await;
    Server {
        base: format!("ws://{}", inner.addr),
        state: inner.state.clone(),
        _inner: inner,
    }
}

async fn server() -> Server {
    server_with(Opts::default()).await
}

async fn connect(server: &Server) -> Socket {
    connect_async(format!("{}/api/live", server.base))
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

/// Chunks until `[DONE]` or until `stop` matches a chunk type (inclusive).
async fn read_until(socket: &mut Socket, stop: &str) -> Vec<Value> {
    let mut chunks = Vec::new();
    loop {
        match next(socket).await {
            Frame::Chunk(c) => {
                let hit = c["type"] == stop;
                chunks.push(c);
                if hit {
                    return chunks;
                }
            }
            Frame::Done => {
                chunks.push(json!({"type": "[DONE]"}));
                return chunks;
            }
            other => panic!("unexpected {other:?} while waiting for {stop}"),
        }
    }
}

fn types(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| c["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn text(chunks: &[Value]) -> String {
    chunks.iter().filter_map(|c| c["delta"].as_str()).collect()
}

fn message(chat: &str, text: &str) -> Value {
    json!({"type": "message", "version": "1.0", "id": chat, "trigger": "submit-message",
           "messages": [{"id": format!("u-{text}"), "role": "user", "parts": [{"type": "text", "text": text}]}]})
}

/// The seed system's confirmation answer: a `tool_result` addressed to the approval id.
fn confirm(approval: &str, confirmed: bool) -> Value {
    json!({"type": "tool_result", "toolCallId": approval, "result": {"confirmed": confirmed}})
}

/// The AI SDK form: the assistant message with the tool part answered.
fn approval_message(
    chat: &str,
    message_id: &str,
    call: &str,
    approval: &str,
    approved: bool,
) -> Value {
    json!({"type": "message", "id": chat, "messages": [{"id": message_id, "role": "assistant", "parts": [
        {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded", "input": {},
         "approval": {"id": approval, "approved": approved}}]}]})
}

fn approval_requests(chunks: &[Value]) -> Vec<(String, String)> {
    chunks
        .iter()
        .filter(|c| c["type"] == "tool-approval-request")
        .map(|c| {
            (
                c["approvalId"].as_str().unwrap().to_string(),
                c["toolCallId"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn weather_then_a_second_turn_with_fresh_ids_on_one_socket() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "What's the weather in Tokyo?")).await;
    let first = read_until(&mut socket, "[DONE]").await;
    assert_eq!(first[0]["type"], "start");
    assert!(types(&first).contains(&"tool-output-available".to_string()));
    assert!(text(&first).contains("Tokyo"));

    send(&mut socket, message("c", "東京の天気は?")).await;
    let second = read_until(&mut socket, "[DONE]").await;
    assert_eq!(second[0]["type"], "start");
    assert_ne!(
        first[0]["messageId"], second[0]["messageId"],
        "every turn has its own message id"
    );
    let text_ids = |chunks: &[Value]| -> Vec<Value> {
        chunks
            .iter()
            .filter(|c| c["type"] == "text-start")
            .map(|c| c["id"].clone())
            .collect()
    };
    assert!(
        text_ids(&first)
            .iter()
            .all(|id| !text_ids(&second).contains(id))
    );
    let finish = second.iter().find(|c| c["type"] == "finish").unwrap();
    assert!(finish["messageMetadata"]["usage"].is_object());
}

#[tokio::test]
async fn approval_keeps_the_socket_open_and_continues_the_same_stream() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    assert_eq!(
        types(&first),
        [
            "start",
            "start-step",
            "tool-input-start",
            "tool-input-available",
            "tool-approval-request",
            "finish-step"
        ]
    );
    let (approval, _) = approval_requests(&first).remove(0);
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available");
    assert_eq!(rest[0]["output"]["wallet_balance"], 950);
    assert!(text(&rest).contains("950"));
}

/// A confirmation that says neither yes nor no (`"confirmed": "yes"`) is refused with a clear
/// error, not read as a denial: the approval still waits, and a real answer then decides it.
#[tokio::test]
async fn a_malformed_confirmation_is_refused_and_the_approval_still_waits() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, _) = approval_requests(&first).remove(0);
    for result in [
        json!({"confirmed": "yes"}),
        json!({"approved": 1}),
        json!({"confirmed": true, "reason": 7}),
    ] {
        send(
            &mut socket,
            json!({"type": "tool_result", "toolCallId": approval, "result": result}),
        )
        .await;
        let Frame::Chunk(error) = next(&mut socket).await else {
            panic!("{result}")
        };
        assert_eq!(error["type"], "error", "{error}");
        let said = error["errorText"].as_str().unwrap();
        assert!(
            said.contains(&format!("the answer to approval {approval}")),
            "{said}"
        );
    }
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available", "{rest:?}");
    assert_eq!(rest[0]["output"]["wallet_balance"], 950);
}

#[tokio::test]
async fn deny_and_edit_in_the_ai_sdk_form() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let message_id = first[0]["messageId"].as_str().unwrap().to_string();
    let (approval, call) = approval_requests(&first).remove(0);
    send(
        &mut socket,
        approval_message("c", &message_id, &call, &approval, false),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        rest[0],
        json!({"type": "tool-output-denied", "toolCallId": call})
    );

    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let message_id = first[0]["messageId"].as_str().unwrap().to_string();
    let (approval, call) = approval_requests(&first).remove(0);
    send(&mut socket, json!({"type": "message", "id": "c", "messages": [{"id": message_id, "role": "assistant", "parts": [
        {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded", "input": {},
         "approval": {"id": approval, "approved": true, "editedInput": {"amount": 20, "recipient": "Hanako"}}}]}]})).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["output"]["amount"], 20);
    assert_eq!(rest[0]["output"]["wallet_balance"], 980);
}

#[tokio::test]
async fn an_unanswered_approval_expires() {
    let server = server_with(Opts {
        approval: Duration::from_secs(1),
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    read_until(&mut socket, "finish-step").await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-error");
    assert!(
        rest[0]["errorText"]
            .as_str()
            .unwrap()
            .starts_with("Approval expired")
    );
}

#[tokio::test]
async fn three_parallel_payments_answered_in_shuffled_order() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        message("c", "Send $10 to Alice, $20 to Bob and $30 to Carol"),
    )
    .await;
    let first = read_until(&mut socket, "finish-step").await;
    let approvals = approval_requests(&first);
    assert_eq!(
        approvals.len(),
        3,
        "all three wait at once: {:?}",
        types(&first)
    );
    // Answer Carol (deny), Alice (approve), Bob (approve).
    send(&mut socket, confirm(&approvals[2].0, false)).await;
    assert_eq!(
        read_until(&mut socket, "tool-output-denied")
            .await
            .last()
            .unwrap()["toolCallId"],
        approvals[2].1.as_str()
    );
    send(&mut socket, confirm(&approvals[0].0, true)).await;
    assert_eq!(
        read_until(&mut socket, "tool-output-available")
            .await
            .last()
            .unwrap()["toolCallId"],
        approvals[0].1.as_str()
    );
    send(&mut socket, confirm(&approvals[1].0, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["toolCallId"], approvals[1].1.as_str());
    let session = server.state.runtime.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000 - 3_000);
}

#[tokio::test]
async fn a_sequential_chain_asks_after_the_first_step() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        message("c", "check the weather in Paris, then send Bob $5"),
    )
    .await;
    let first = read_until(&mut socket, "tool-approval-request").await;
    assert!(types(&first).contains(&"tool-output-available".to_string()));
    let (approval, _) = approval_requests(&first).remove(0);
    read_until(&mut socket, "finish-step").await;
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert!(text(&rest).contains("Paris"));
}

#[tokio::test]
async fn get_location_approved_then_the_browser_result_and_denied() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Where am I?")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, call) = approval_requests(&first).remove(0);
    send(&mut socket, confirm(&approval, true)).await;
    send(
        &mut socket,
        json!({"type": "tool_result", "toolCallId": call,
        "result": {"latitude": 35.68, "longitude": 139.76, "accuracy": 20, "city": "Tokyo"}}),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available");
    assert!(text(&rest).contains("Tokyo"));

    send(&mut socket, message("c", "Where am I?")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, call) = approval_requests(&first).remove(0);
    send(&mut socket, confirm(&approval, false)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        rest[0],
        json!({"type": "tool-output-denied", "toolCallId": call})
    );
}

#[tokio::test]
async fn change_bgm_result_and_timeout() {
    let server = server_with(Opts {
        browser: Duration::from_secs(1),
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "play track 1")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let call = first
        .iter()
        .find(|c| c["type"] == "tool-input-available")
        .unwrap()["toolCallId"]
        .clone();
    send(
        &mut socket,
        json!({"type": "tool_result", "toolCallId": call, "result": {"track": 1, "playing": true}}),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available");

    send(&mut socket, message("c", "change bgm to 2")).await;
    read_until(&mut socket, "finish-step").await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-error");
    assert!(
        rest[0]["errorText"]
            .as_str()
            .unwrap()
            .contains("did not return a result")
    );
}

#[tokio::test]
async fn interrupt_mid_text_and_mid_approval() {
    let server = server_with(Opts {
        delay: Duration::from_millis(20),
        ..Opts::default()
    })
    .await;
    let mut socket = connect_async(format!("{}/api/live?text=progressive", server.base))
        .await
        .unwrap()
        .0;
    send(&mut socket, message("c", "/lorem 300")).await;
    read_until(&mut socket, "text-delta").await;
    send(
        &mut socket,
        json!({"type": "interrupt", "reason": "user_abort"}),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert!(
        types(&rest).contains(&"abort".to_string()),
        "{:?}",
        types(&rest)
    );
    let words: usize = text(&rest).split_whitespace().count();
    assert!(words < 300);

    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    read_until(&mut socket, "finish-step").await;
    send(&mut socket, json!({"type": "interrupt"})).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        types(&rest),
        ["tool-output-error", "abort", "finish", "[DONE]"]
    );

    // Still usable.
    send(&mut socket, message("c", "hello")).await;
    assert_eq!(
        read_until(&mut socket, "[DONE]").await.last().unwrap()["type"],
        "[DONE]"
    );
}

#[tokio::test]
async fn reconnect_mid_text_loses_and_duplicates_nothing() {
    let server = server_with(Opts {
        delay: Duration::from_millis(3),
        ..Opts::default()
    })
    .await;
    let mut socket = connect_async(format!("{}/api/live?text=progressive", server.base))
        .await
        .unwrap()
        .0;
    send(&mut socket, message("r", "/lorem 200")).await;
    let mut received = Vec::new();
    while received.len() < 20 {
        if let Frame::Chunk(c) = next(&mut socket).await {
            received.push(c);
        }
    }
    drop(socket);
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        json!({"type": "resume", "id": "r", "received": received.len()}),
    )
    .await;
    let Frame::Chunk(announce) = next(&mut socket).await else {
        panic!("announce")
    };
    assert_eq!(announce["type"], "data-countersign-pending");
    let rest = read_until(&mut socket, "[DONE]").await;
    received.extend(rest);
    assert_eq!(
        text(&received).split_whitespace().count(),
        200,
        "every word exactly once"
    );
    assert_eq!(received.iter().filter(|c| c["type"] == "start").count(), 1);
}

#[tokio::test]
async fn reconnect_while_waiting_for_approval() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("r", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, call) = approval_requests(&first).remove(0);
    drop(socket);

    let mut socket = connect(&server).await;
    send(
        &mut socket,
        json!({"type": "resume", "id": "r", "received": first.len()}),
    )
    .await;
    let Frame::Chunk(announce) = next(&mut socket).await else {
        panic!("announce")
    };
    assert_eq!(
        announce["data"]["pending"][0]["approvalId"],
        approval.as_str()
    );
    assert_eq!(announce["data"]["pending"][0]["toolCallId"], call.as_str());
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        rest[0]["type"],
        "tool-output-available",
        "nothing replayed twice: {:?}",
        types(&rest)
    );
}

#[tokio::test]
async fn a_second_socket_takes_over_the_chat() {
    let server = server().await;
    let mut first = connect(&server).await;
    send(&mut first, message("t", "hello")).await;
    read_until(&mut first, "[DONE]").await;
    let mut second = connect(&server).await;
    send(&mut second, message("t", "What's the weather in Tokyo?")).await;
    match next(&mut first).await {
        Frame::Closed(code, reason) => {
            assert_eq!(code, Some(4001));
            assert!(reason.contains("took over"));
        }
        other => panic!("the first socket should close, got {other:?}"),
    }
    assert_eq!(
        read_until(&mut second, "[DONE]").await.last().unwrap()["type"],
        "[DONE]"
    );
}

#[tokio::test]
async fn bad_input_gets_an_error_chunk_and_the_session_survives() {
    let server = server().await;
    let mut socket = connect(&server).await;
    for (frame, expect) in [
        ("{not json".to_string(), "not valid JSON"),
        (
            json!({"type": "teleport"}).to_string(),
            "Unknown frame type",
        ),
        (json!({"no_type": 1}).to_string(), "cannot be read"),
        (
            json!({"type": "audio_chunk", "chunk": "AAAAAA=="}).to_string(),
            "audio arrived outside an utterance",
        ),
        (
            json!({"type": "tool_result", "toolCallId": "x", "result": {}}).to_string(),
            "no chat yet",
        ),
        // More messages than a request may carry (the default cap, 10,000): refused unread.
        (
            json!({"type": "message", "id": "c", "messages":
                vec![json!({"id": "u", "role": "user", "parts": []}); 10_001]})
            .to_string(),
            "too_many_messages",
        ),
    ] {
        socket.send(Message::Text(frame.into())).await.unwrap();
        match next(&mut socket).await {
            Frame::Chunk(c) => {
                assert_eq!(c["type"], "error");
                assert!(c["errorText"].as_str().unwrap().contains(expect), "{c}");
            }
            other => panic!("{other:?}"),
        }
    }
    send(
        &mut socket,
        json!({"type": "ping", "timestamp": 1712345678901u64}),
    )
    .await;
    assert_eq!(
        next(&mut socket).await,
        Frame::Control(json!({"type": "pong", "timestamp": 1712345678901u64}))
    );
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    read_until(&mut socket, "finish-step").await;
    send(&mut socket, confirm("apv-forged", true)).await;
    let Frame::Chunk(error) = next(&mut socket).await else {
        panic!()
    };
    assert!(
        error["errorText"].as_str().unwrap().contains("apv-forged"),
        "{error}"
    );
    send(
        &mut socket,
        json!({"type": "message", "id": "other-chat", "messages": []}),
    )
    .await;
    let Frame::Chunk(error) = next(&mut socket).await else {
        panic!()
    };
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("belongs to chat c")
    );
    // The real approval still works.
    send(&mut socket, confirm("apv-1", true)).await;
    assert_eq!(
        read_until(&mut socket, "[DONE]").await[0]["type"],
        "tool-output-available"
    );
}

#[tokio::test]
async fn oversized_frames_close_with_1009_and_foreign_origins_get_403() {
    let server = server_with(Opts {
        env: vec![("COUNTERSIGN_WS_MAX_FRAME_BYTES".into(), "2048".into())],
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    socket
        .send(Message::Text("x".repeat(5000).into()))
        .await
        .unwrap();
    match next(&mut socket).await {
        Frame::Closed(code, _) => assert_eq!(code, Some(u16::from(CloseCode::Size))),
        other => panic!("{other:?}"),
    }

    let mut request = format!("{}/api/live", server.base)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    let err = connect_async(request).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test]
async fn invalid_utf8_closes_with_1007() {
    let server = server().await;
    let (mut socket, _) = connect_async(format!("{}/live", server.base))
        .await
        .unwrap();
    // A text frame whose payload is not UTF-8 (sent raw, bypassing the client's own check).
    socket
        .send(Message::Frame(
            tokio_tungstenite::tungstenite::protocol::frame::Frame::message(
                vec![0xff, 0xfe, 0xfd],
                tokio_tungstenite::tungstenite::protocol::frame::coding::OpCode::Data(
                    tokio_tungstenite::tungstenite::protocol::frame::coding::Data::Text,
                ),
                true,
            ),
        ))
        .await
        .unwrap();
    match next(&mut socket).await {
        Frame::Closed(code, _) => assert_eq!(code, Some(1007)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_silent_client_is_closed_after_the_idle_timeout() {
    let server = server_with(Opts {
        env: vec![("COUNTERSIGN_WS_IDLE_SECS".into(), "3".into())],
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("idle", "hello")).await;
    read_until(&mut socket, "[DONE]").await;
    assert!(server.state.runtime.followers.is_followed("idle"));
    // Stop reading, so no pong answers the server's pings, for longer than the idle timeout plus
    // one ping interval (the server checks at each ping, every third of the timeout).
    tokio::time::sleep(Duration::from_millis(5500)).await;
    assert!(
        !server.state.runtime.followers.is_followed("idle"),
        "the server let the silent socket go"
    );
    // What the client then sees: the server's close (1001 "idle timeout"), or — when its
    // automatic pong hits the already closed connection first — a broken pipe.
    loop {
        match next(&mut socket).await {
            Frame::Closed(Some(code), reason) => {
                assert_eq!((code, reason.as_str()), (1001, "idle timeout"));
                break;
            }
            Frame::Closed(None, error) => {
                assert!(
                    error.contains("Broken pipe") || error.contains("reset") || error.is_empty(),
                    "{error}"
                );
                break;
            }
            Frame::Control(_) | Frame::Chunk(_) | Frame::Done | Frame::Binary(_) => continue,
        }
    }
}

#[tokio::test]
async fn requests_that_are_not_websocket_upgrades_are_refused_with_a_reason() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = server().await;
    let addr = server.base.trim_start_matches("ws://").to_string();
    let ask = |request: String| {
        let addr = addr.clone();
        async move {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(request.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            tcp.read_to_end(&mut answer).await.unwrap();
            String::from_utf8_lossy(&answer).into_owned()
        }
    };
    let plain = ask(format!(
        "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    ))
    .await;
    assert!(plain.starts_with("HTTP/1.1 400"), "{plain}");
    assert!(plain.contains("not_a_websocket_upgrade"), "{plain}");
    let old = ask(format!(
        "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    ))
    .await;
    assert!(old.starts_with("HTTP/1.1 426"), "{old}");
    // RFC 6455 §1.3's example key and the accept value it must produce.
    let good = {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(
            format!(
                "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: keep-alive, Upgrade\r\n\
                 Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut head = vec![0u8; 512];
        let n = tcp.read(&mut head).await.unwrap();
        String::from_utf8_lossy(&head[..n]).into_owned()
    };
    assert!(good.starts_with("HTTP/1.1 101"), "{good}");
    assert!(
        good.to_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{good}"
    );
}

#[tokio::test]
async fn a_fragmented_frame_with_a_ping_between_its_pieces_is_understood() {
    use tokio_tungstenite::tungstenite::protocol::frame::{
        Frame as RawFrame,
        coding::{Data, OpCode},
    };
    let server = server().await;
    let mut socket = connect(&server).await;
    let text = json!({"type": "ping", "timestamp": 42}).to_string();
    let (head, tail) = text.split_at(7);
    socket
        .send(Message::Frame(RawFrame::message(
            head.as_bytes().to_vec(),
            OpCode::Data(Data::Text),
            false,
        )))
        .await
        .unwrap();
    socket
        .send(Message::Ping(b"still there?".to_vec().into()))
        .await
        .unwrap();
    socket
        .send(Message::Frame(RawFrame::message(
            tail.as_bytes().to_vec(),
            OpCode::Data(Data::Continue),
            true,
        )))
        .await
        .unwrap();
    let mut pong = None;
    let control = loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("an answer")
            .expect("open")
            .expect("readable");
        match message {
            Message::Pong(payload) => pong = Some(payload.to_vec()),
            Message::Text(text) => break serde_json::from_str::<Value>(text.as_str()).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(pong.as_deref(), Some(&b"still there?"[..]));
    assert_eq!(control, json!({"type": "pong", "timestamp": 42}));
}

#[tokio::test]
async fn the_socket_hears_what_an_answer_from_elsewhere_and_a_turn_from_elsewhere_cause() {
    use countersign::agent::{ApprovalDecision, PersonInput, UserTurn};
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, _) = approval_requests(&first).remove(0);
    // The turn waits with nothing of it in memory (ADR 0011) while the socket stays open.
    let runtime = &server.state.runtime;
    for _ in 0..200 {
        if runtime.live_sessions() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(runtime.live_sessions(), 0);

    // Another client (another tab, the API) answers: this socket gets the rest of the turn.
    runtime
        .submit(
            "c",
            &[PersonInput::Approval {
                approval_id: approval,
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .unwrap();
    let rest = read_until(&mut socket, "[DONE]").await;
    assert!(
        types(&rest).contains(&"tool-output-available".to_string()),
        "{rest:?}"
    );
    assert!(
        !types(&rest).contains(&"start".to_string()),
        "the same stream goes on"
    );

    // A turn started elsewhere on this chat reaches the socket too, from its start.
    runtime
        .start_turn(
            "c",
            UserTurn {
                text: "hello".into(),
                transport: countersign::agent::Transport::Api,
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap();
    let next = read_until(&mut socket, "[DONE]").await;
    assert_eq!(next[0]["type"], "start");
    assert_eq!(next.last().unwrap()["type"], "[DONE]");
}
