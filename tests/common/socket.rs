//! A WebSocket client's reading of what the server sends on `/api/live` and `/live`: one
//! frame at a time, as the tests of both the chat protocol and voice read it.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, tungstenite::Message};

pub type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// One server frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A stream chunk (`data: {…}`).
    Chunk(Value),
    /// `data: [DONE]`: the end of a turn's stream.
    Done,
    /// A control frame (JSON without `data: `).
    Control(Value),
    /// A binary frame (the agent's speech on a socket opened with `?audio=binary`).
    Binary(Vec<u8>),
    /// The close (its code and reason), or the socket ending without one.
    Closed(Option<u16>, String),
}

/// The next frame (pings and pongs skipped); panics after 10 s without one.
pub async fn next(socket: &mut Socket) -> Frame {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s");
        match message {
            None => return Frame::Closed(None, String::new()),
            Some(Err(e)) => return Frame::Closed(None, e.to_string()),
            Some(Ok(Message::Text(text))) => {
                let text = text.as_str();
                if let Some(data) = text.strip_prefix("data: ") {
                    let data = data.trim_end();
                    if data == "[DONE]" {
                        return Frame::Done;
                    }
                    return Frame::Chunk(serde_json::from_str(data).expect("a JSON chunk"));
                }
                return Frame::Control(serde_json::from_str(text).expect("a JSON control frame"));
            }
            Some(Ok(Message::Binary(bytes))) => return Frame::Binary(bytes.to_vec()),
            Some(Ok(Message::Close(frame))) => {
                return Frame::Closed(
                    frame.as_ref().map(|f| u16::from(f.code)),
                    frame.map(|f| f.reason.to_string()).unwrap_or_default(),
                );
            }
            Some(Ok(_)) => continue,
        }
    }
}
