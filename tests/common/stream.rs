//! A chat response read as it arrives: for scenarios that act while the turn is still running
//! (answer a question a tool asks, stop the turn).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// `POST {base}/api/chat` with `body`; its chunks, one by one as they come.
pub fn chat_stream(base: &str, body: Value) -> UnboundedReceiver<Value> {
    let request = reqwest::Client::new()
        .post(format!("{base}/api/chat"))
        .json(&body);
    chunks_of_response(request)
}

/// `GET {base}/api/chat/{chat}/stream` (a resume); its chunks, one by one as they come.
pub fn resume_stream(base: &str, chat: &str) -> UnboundedReceiver<Value> {
    chunks_of_response(reqwest::Client::new().get(format!("{base}/api/chat/{chat}/stream")))
}

/// The chunks of `request`'s SSE response, one by one as they come.
fn chunks_of_response(request: reqwest::RequestBuilder) -> UnboundedReceiver<Value> {
    let (tx, rx) = unbounded_channel();
    tokio::spawn(async move {
        use futures::StreamExt;
        let Ok(response) = request.send().await else {
            return;
        };
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        while let Some(Ok(bytes)) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if let Some(data) = event.trim().strip_prefix("data: ")
                    && let Ok(chunk) = serde_json::from_str::<Value>(data)
                {
                    let _ = tx.send(chunk);
                }
            }
        }
    });
    rx
}

/// The next chunk of type `kind` (for a `data-question`, in `state` if given), skipping others.
pub async fn next_of(
    chunks: &mut UnboundedReceiver<Value>,
    kind: &str,
    state: Option<&str>,
) -> Value {
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(20), chunks.recv())
            .await
            .unwrap_or_else(|_| panic!("no {kind} chunk within 20 s"))
            .unwrap_or_else(|| panic!("the stream ended before a {kind} chunk"));
        if chunk["type"] == kind && state.is_none_or(|s| chunk["data"]["state"] == s) {
            return chunk;
        }
    }
}

/// `POST {base}/api/chats/{chat}/questions/{question}` with `reply`: the status and JSON body.
pub async fn reply(base: &str, chat: &str, question: &str, reply: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/chats/{chat}/questions/{question}"))
        .json(&reply)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A client's WebSocket to a test server.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Text frames of a BIDI socket until one whose chunk type is `stop` (inclusive; `[DONE]` is
/// its own type).
pub async fn frames_until(socket: &mut Socket, stop: &str) -> Vec<String> {
    use futures::StreamExt;
    let mut frames = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("a frame")
            .expect("open")
            .expect("readable");
        let tokio_tungstenite::tungstenite::Message::Text(text) = message else {
            continue;
        };
        let text = text.to_string();
        let data = text.strip_prefix("data: ").unwrap_or(&text).trim_end();
        let kind = serde_json::from_str::<Value>(data)
            .map(|c| c["type"].as_str().unwrap_or("").to_string())
            .unwrap_or_else(|_| data.to_string());
        frames.push(text);
        if kind == stop {
            return frames;
        }
    }
}

/// The chunks among BIDI `frames` (`data: {json}`).
pub fn chunks_of(frames: &[String]) -> Vec<Value> {
    frames
        .iter()
        .filter_map(|f| f.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d.trim_end()).ok())
        .collect()
}

/// An AI SDK `submit-message` body: chat `chat`, one user message `text`.
pub fn user(chat: &str, text: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
    ]})
}

/// The answer to the approval request among `chunks`.
pub fn answer(chat: &str, text: &str, chunks: &[Value], approved: bool) -> Value {
    let request = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .expect("an approval request");
    let call = request["toolCallId"].as_str().expect("a call id");
    let input = &chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == call)
        .expect("the call's input")["input"];
    let message = &chunks.iter().find(|c| c["type"] == "start").expect("start")["messageId"];
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]},
        {"id": message, "role": "assistant", "parts": [
            {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded",
             "input": input, "approval": {"id": request["approvalId"], "approved": approved}}
        ]}
    ]})
}
