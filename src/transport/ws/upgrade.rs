//! The server end of a WebSocket: our upgrade, tokio-tungstenite's protocol.
//!
//! [`Handshake`] is the HTTP side (RFC 6455 §4.2), ours because the edge's rules are ours: it
//! checks the upgrade request (400 or 426 with a JSON reason) and answers `101 Switching
//! Protocols`; hyper then hands over the connection, which this server always serves from a
//! [`TcpStream`] behind the edge's [`WriteDeadline`] (`server::accept`).
//!
//! From there tokio-tungstenite speaks RFC 6455 on that stream ([`WebSocketStream`], ADR 0027),
//! configured for sockets that are idle most of their life: a 256-byte read buffer, no write
//! buffering, and the route's frame and message size caps. It answers pings and the client's
//! close by itself; everything a client sends reaches the connection as an [`Incoming`],
//! binary messages included, and every protocol violation as the close code it ends with.

use std::{sync::Arc, time::Duration};

use axum::{
    extract::FromRequestParts,
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    response::Response,
};
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use tokio::{io::AsyncWriteExt, net::TcpStream};
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{
        self, Bytes, Message, Utf8Bytes,
        protocol::{CloseFrame, Role, WebSocketConfig},
    },
};
use tokio_util::task::TaskTracker;

use crate::transport::{
    ApiError,
    edge::connections::{Admission, WriteDeadline},
};

/// WebSocket close codes used here (RFC 6455 §7.4.1, plus an application code).
pub mod close {
    pub const NORMAL: u16 = 1000;
    pub const GOING_AWAY: u16 = 1001;
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// A kind of data the endpoint does not accept (binary frames where JSON text is spoken).
    pub const UNSUPPORTED: u16 = 1003;
    pub const INVALID_PAYLOAD: u16 = 1007;
    pub const POLICY: u16 = 1008;
    pub const TOO_BIG: u16 = 1009;
    /// Another socket took over this chat.
    pub const REPLACED: u16 = 4001;
}

/// A valid WebSocket upgrade request, ready to be answered.
pub struct Handshake {
    key: HeaderValue,
    on_upgrade: hyper::upgrade::OnUpgrade,
    /// The connection's place under the edge's caps, which the socket keeps.
    admission: Option<Arc<Admission>>,
}

/// Whether a request asks to become a WebSocket: `Connection` has the token `upgrade` and
/// `Upgrade` the token `websocket` (each a comma-separated list, any case). The edge guard and the
/// handshake decide with this one function, so no request is an upgrade to one and not to the
/// other.
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    has_token(headers, header::CONNECTION, "upgrade")
        && has_token(headers, header::UPGRADE, "websocket")
}

/// Whether `key` is a valid `Sec-WebSocket-Key`: 16 bytes, base64 (RFC 6455 §4.1).
fn valid_key(key: &HeaderValue) -> bool {
    use base64::{Engine, engine::general_purpose::STANDARD};
    STANDARD
        .decode(key.as_bytes())
        .is_ok_and(|bytes| bytes.len() == 16)
}

impl<S: Send + Sync> FromRequestParts<S> for Handshake {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let refuse = |message: &str| {
            ApiError::bad_request(
                "not_a_websocket_upgrade",
                format!("{message}: this route speaks WebSocket (RFC 6455) only."),
            )
        };
        if parts.method != Method::GET {
            return Err(refuse("A WebSocket upgrade is a GET request"));
        }
        if parts.version != axum::http::Version::HTTP_11 {
            return Err(refuse("A WebSocket upgrade is an HTTP/1.1 request"));
        }
        if !is_upgrade(&parts.headers) {
            return Err(refuse(
                "The request does not ask for an upgrade to websocket",
            ));
        }
        if parts
            .headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .is_none_or(|v| v.as_bytes() != b"13")
        {
            return Err(ApiError::new(
                StatusCode::UPGRADE_REQUIRED,
                "unsupported_websocket_version",
                "Only WebSocket version 13 is supported.",
            ));
        }
        let key = parts
            .headers
            .get(header::SEC_WEBSOCKET_KEY)
            .cloned()
            .ok_or_else(|| refuse("Sec-WebSocket-Key is missing"))?;
        if !valid_key(&key) {
            return Err(refuse(
                "Sec-WebSocket-Key must be 16 bytes in base64 (RFC 6455 section 4.1)",
            ));
        }
        let on_upgrade = parts
            .extensions
            .remove::<hyper::upgrade::OnUpgrade>()
            .ok_or_else(|| refuse("This connection cannot be upgraded"))?;
        let admission = parts.extensions.get::<Arc<Admission>>().cloned();
        Ok(Handshake {
            key,
            on_upgrade,
            admission,
        })
    }
}

/// Whether the comma-separated header `name` has `token` (case-insensitive).
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl Handshake {
    /// Answers `101 Switching Protocols` and spawns `serve` with the connection to come on
    /// `tasks` (which shutdown waits for). The connection's whole life is that one task: it
    /// awaits the upgrade itself (so no second future waits around it).
    pub fn accept<F, Fut>(self, limit: usize, tasks: &TaskTracker, serve: F) -> Response
    where
        F: FnOnce(Upgrade) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Handshake {
            key,
            on_upgrade,
            admission,
        } = self;
        let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
        tasks.spawn(serve(Upgrade {
            on_upgrade,
            limit,
            admission,
        }));
        let mut response = Response::new(axum::body::Body::empty());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        if let Ok(accept) = HeaderValue::from_str(&accept) {
            headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
        }
        response
    }
}

/// A connection hyper hands over once the `101` response is out.
pub struct Upgrade {
    on_upgrade: hyper::upgrade::OnUpgrade,
    /// The largest frame and message accepted.
    limit: usize,
    admission: Option<Arc<Admission>>,
}

impl Upgrade {
    /// The socket, or `None` when the client went away first (logged).
    pub async fn socket(self) -> Option<Socket> {
        let upgraded = match self.on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!(error = %e, "the WebSocket upgrade did not complete");
                return None;
            }
        };
        match upgraded.downcast::<TokioIo<WriteDeadline<TcpStream>>>() {
            Ok(parts) => Some(
                Socket::new(
                    parts.io.into_inner(),
                    parts.read_buf.to_vec(),
                    self.limit,
                    self.admission,
                )
                .await,
            ),
            Err(_) => {
                tracing::error!("an upgraded connection is not a TCP stream; closing it");
                None
            }
        }
    }
}

/// What tungstenite reads into at a time, and keeps while the socket is idle. Client messages
/// are small JSON envelopes (an approval is ~100 bytes); a larger one is read in steps of this.
const READ_BUFFER: usize = 256;

/// How long a closing socket waits for the client's close frame (or its end of the stream)
/// before it lets the connection go.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The longest close reason that fits a control frame (125 bytes less the code's two).
const MAX_CLOSE_REASON: usize = 123;

/// tokio-tungstenite's settings for a server socket that accepts frames and messages of at most
/// `limit` bytes: a small read buffer and every frame written out at once (the default, 128 KiB
/// of each, is what a socket would otherwise hold for its whole life).
fn config(limit: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_frame_size(Some(limit))
        .max_message_size(Some(limit))
}

/// A whole message from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Text(Utf8Bytes),
    /// Binary data, which the route decides what to do with.
    Binary(Bytes),
    /// A ping (already answered with its pong) or a pong: the client is there. Counted against
    /// the frame rate like any other frame.
    Control,
    /// The client's close, with its code and reason if it gave one (already answered).
    Close(Option<(u16, String)>),
}

/// Why a socket stops reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The client broke the protocol or a cap: close with this code and reason.
    Close(u16, String),
    /// The connection is gone (reset, ended, failed): nothing more can be sent.
    Gone,
}

/// The connection is gone: a write failed or did not finish within the write deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// A server WebSocket over the connection's TCP stream.
pub struct Socket {
    stream: WebSocketStream<WriteDeadline<TcpStream>>,
    /// The connection's place under the edge's caps (kept as long as the socket lives).
    _admission: Option<Arc<Admission>>,
}

impl Socket {
    /// A socket over `stream`; `early` are bytes the client sent right behind its upgrade
    /// request (hyper read them already).
    pub async fn new(
        stream: WriteDeadline<TcpStream>,
        early: Vec<u8>,
        limit: usize,
        admission: Option<Arc<Admission>>,
    ) -> Self {
        let stream =
            WebSocketStream::from_partially_read(stream, early, Role::Server, Some(config(limit)))
                .await;
        Socket {
            stream,
            _admission: admission,
        }
    }

    /// The next whole message. Cancel-safe: a message read in part stays in the socket.
    pub async fn recv(&mut self) -> Result<Incoming, Failure> {
        match self.stream.next().await {
            None => Err(Failure::Gone),
            Some(Ok(message)) => Ok(incoming(message)),
            Some(Err(e)) => Err(failure(e)),
        }
    }

    /// Sends a text message as one frame. A client that does not take it within the write
    /// deadline (it stopped reading) fails the send, and the socket with it.
    pub async fn send_text(&mut self, text: String) -> Result<(), Gone> {
        self.send(Message::Text(text.into())).await
    }

    /// Sends a ping (the keep-alive; the client's pong comes back as [`Incoming::Control`]).
    pub async fn ping(&mut self) -> Result<(), Gone> {
        self.send(Message::Ping(Bytes::new())).await
    }

    async fn send(&mut self, message: Message) -> Result<(), Gone> {
        self.stream.send(message).await.map_err(|e| {
            tracing::debug!(error = %e, "a WebSocket write failed");
            Gone
        })
    }

    /// After the client's close: sends the answer tungstenite queued and ends the connection.
    pub async fn answer_close(mut self) {
        let _ = self.stream.flush().await;
        let _ = self.stream.get_mut().shutdown().await;
    }

    /// Closes with `code` and `reason` (§7.1.2; a reason too long for a control frame is cut
    /// at a character boundary): sends the close frame, then reads until the client's close or
    /// the end of its stream (bounded by [`CLOSE_WAIT`]) so the close frame is not lost to a
    /// reset, and lets the connection go.
    pub async fn close(mut self, code: u16, reason: &str) {
        let frame = CloseFrame {
            code: code.into(),
            reason: Utf8Bytes::from(cut(reason, MAX_CLOSE_REASON).to_owned()),
        };
        if self.stream.close(Some(frame)).await.is_err() {
            return;
        }
        let drain = async {
            while let Some(Ok(message)) = self.stream.next().await {
                if message.is_close() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, drain).await;
        let _ = self.stream.get_mut().shutdown().await;
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn incoming(message: Message) -> Incoming {
    match message {
        Message::Text(text) => Incoming::Text(text),
        Message::Binary(data) => Incoming::Binary(data),
        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Incoming::Control,
        Message::Close(frame) => Incoming::Close(
            frame.map(|frame| (u16::from(frame.code), frame.reason.as_str().to_owned())),
        ),
    }
}

/// The close code a read error ends the connection with (RFC 6455 §7.4.1), or `Gone`.
fn failure(error: tungstenite::Error) -> Failure {
    use tungstenite::{Error, error::ProtocolError};
    match error {
        Error::Capacity(e) => Failure::Close(close::TOO_BIG, e.to_string()),
        Error::Utf8(_) => Failure::Close(close::INVALID_PAYLOAD, "invalid UTF-8".into()),
        Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => Failure::Gone,
        Error::Protocol(e) => Failure::Close(close::PROTOCOL_ERROR, e.to_string()),
        Error::AttackAttempt => Failure::Close(close::POLICY, error.to_string()),
        _ => Failure::Gone,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpListener,
    };

    use super::*;

    /// A connected pair: our socket on the server side (frames up to `limit`), the raw client
    /// stream, and `early` bytes as if hyper had read them behind the upgrade request.
    async fn pair(limit: usize, early: &[u8]) -> (Socket, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let stream = WriteDeadline::new(server, Duration::from_secs(5));
        (
            Socket::new(stream, early.to_vec(), limit, None).await,
            client,
        )
    }

    /// A masked client frame as a browser sends it.
    fn masked(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [0x11, 0x22, 0x33, 0x44];
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        match payload.len() {
            n if n < 126 => out.push(0x80 | n as u8),
            n => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, k)| b ^ k));
        out
    }

    /// The next frame the server sent: its first byte and its payload.
    async fn server_frame(client: &mut TcpStream) -> (u8, Vec<u8>) {
        let mut header = [0u8; 2];
        client.read_exact(&mut header).await.unwrap();
        assert!(header[1] < 126, "short frames only here");
        let mut payload = vec![0u8; usize::from(header[1])];
        client.read_exact(&mut payload).await.unwrap();
        (header[0], payload)
    }

    #[tokio::test]
    async fn early_bytes_are_read_first_and_messages_split_across_reads_come_whole() {
        let early = masked(true, 0x1, b"early");
        let (mut socket, mut client) = pair(1024, &early).await;
        assert_eq!(socket.recv().await, Ok(Incoming::Text("early".into())));
        let long = "x".repeat(1000);
        let mut bytes = masked(true, 0x1, long.as_bytes());
        bytes.extend(masked(true, 0x1, b"second"));
        let (head, tail) = bytes.split_at(3);
        client.write_all(head).await.unwrap();
        let reading = tokio::spawn(async move {
            let first = socket.recv().await;
            let second = socket.recv().await;
            (first, second)
        });
        client.write_all(tail).await.unwrap();
        let (first, second) = reading.await.unwrap();
        assert_eq!(first, Ok(Incoming::Text(long.into())));
        assert_eq!(second, Ok(Incoming::Text("second".into())));
    }

    #[tokio::test]
    async fn binary_messages_reach_the_route_and_pings_are_answered() {
        let (mut socket, mut client) = pair(1024, &[]).await;
        let audio: Vec<u8> = (0..=255).collect();
        client.write_all(&masked(true, 0x2, &audio)).await.unwrap();
        client.write_all(&masked(true, 0x9, b"hi")).await.unwrap();
        assert_eq!(socket.recv().await, Ok(Incoming::Binary(audio.into())));
        assert_eq!(socket.recv().await, Ok(Incoming::Control));
        // The pong goes out with the next read or write.
        socket.send_text("after".into()).await.unwrap();
        assert_eq!(server_frame(&mut client).await, (0x8A, b"hi".to_vec()));
        assert_eq!(server_frame(&mut client).await, (0x81, b"after".to_vec()));
    }

    #[tokio::test]
    async fn protocol_violations_end_with_their_close_codes() {
        let cases: [(&[u8], u16); 5] = [
            // A frame over the cap: refused from its header alone, before its payload.
            (&masked(true, 0x1, &[b'a'; 40])[..6], close::TOO_BIG),
            // Each fragment fits, the message does not.
            (
                &[masked(false, 0x1, &[b'a'; 20]), masked(true, 0x0, &[b'a'; 20])].concat(),
                close::TOO_BIG,
            ),
            (&masked(true, 0x1, &[0xC3, 0x28]), close::INVALID_PAYLOAD),
            // Unmasked.
            (&[0x81, 0x01, b'x'], close::PROTOCOL_ERROR),
            // A reserved bit without an extension.
            (&masked(true, 0x41, b"x"), close::PROTOCOL_ERROR),
        ];
        for (bytes, code) in cases {
            let (mut socket, mut client) = pair(32, &[]).await;
            client.write_all(bytes).await.unwrap();
            match socket.recv().await {
                Err(Failure::Close(got, _)) => assert_eq!(got, code, "{bytes:?}"),
                other => panic!("{bytes:?}: {other:?}"),
            }
        }
        let (mut socket, client) = pair(32, &[]).await;
        drop(client);
        assert_eq!(socket.recv().await, Err(Failure::Gone));
    }

    #[tokio::test]
    async fn a_server_close_is_sent_and_the_clients_close_awaited() {
        let (socket, mut client) = pair(1024, &[]).await;
        let reason = "é".repeat(100);
        let closing = tokio::spawn(socket.close(4001, &reason));
        let (first, payload) = server_frame(&mut client).await;
        assert_eq!(first, 0x88);
        assert_eq!(&payload[..2], &4001u16.to_be_bytes());
        // The reason is cut to fit a control frame, on a character boundary.
        assert_eq!(payload.len(), 2 + 122);
        assert!(std::str::from_utf8(&payload[2..]).is_ok());
        client
            .write_all(&masked(true, 0x8, &4001u16.to_be_bytes()))
            .await
            .unwrap();
        closing.await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    }

    #[tokio::test]
    async fn a_clients_close_is_answered_with_its_code() {
        let (mut socket, mut client) = pair(1024, &[]).await;
        let mut close = 1000u16.to_be_bytes().to_vec();
        close.extend_from_slice(b"bye");
        client.write_all(&masked(true, 0x8, &close)).await.unwrap();
        assert_eq!(
            socket.recv().await,
            Ok(Incoming::Close(Some((1000, "bye".into()))))
        );
        socket.answer_close().await;
        let (first, payload) = server_frame(&mut client).await;
        assert_eq!(first, 0x88);
        assert_eq!(&payload[..2], &1000u16.to_be_bytes());
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    }
}
