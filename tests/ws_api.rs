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

use crate::common;

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

#[path = "ws_api/approvals.rs"]
mod approvals;
#[path = "ws_api/browser.rs"]
mod browser;
#[path = "ws_api/hostile.rs"]
mod hostile;
#[path = "ws_api/sessions.rs"]
mod sessions;
