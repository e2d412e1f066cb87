//! The server end of a WebSocket, made for connections that are idle most of their life.
//!
//! A BIDI session spends minutes waiting for a person, so what an idle socket holds is what ten
//! thousand of them cost. This one holds the TCP stream and nothing else: it waits for the
//! kernel to say bytes are readable (no buffer during the wait), reads them into a buffer that
//! lives only until the frames in it are handled, and writes each frame straight to the stream.
//! (tungstenite keeps a read buffer, a write buffer as large as the largest frame ever sent, and
//! two waker `Arc`s per socket; bench/: a bare socket cost 7.2 KiB with it.)
//!
//! [`Handshake`] is the HTTP side (RFC 6455 §4.2): it checks the upgrade request and answers
//! `101 Switching Protocols`; hyper then hands over the connection, which this server always
//! serves from a [`TcpStream`] (`server::serve`).

use std::{io, sync::Arc};

use axum::{
    extract::FromRequestParts,
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    response::Response,
};
use hyper_util::rt::TokioIo;
use tokio::{io::AsyncWriteExt, net::TcpStream};
use tokio_util::task::TaskTracker;

use super::frame::{self, Assembler, FrameError, Message, OpCode, Parsed};
use crate::transport::{
    ApiError,
    edge::connections::{Admission, WriteDeadline},
};

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
    pub fn accept<F, Fut>(self, options: SocketOptions, tasks: &TaskTracker, serve: F) -> Response
    where
        F: FnOnce(Upgrade) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Handshake {
            key,
            on_upgrade,
            admission,
        } = self;
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        tasks.spawn(serve(Upgrade {
            on_upgrade,
            options,
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

/// What a socket is allowed.
#[derive(Debug, Clone, Copy)]
pub struct SocketOptions {
    /// The largest message accepted.
    pub limit: usize,
    /// How long a frame may wait for the client to take it.
    pub write_timeout: std::time::Duration,
}

/// A connection hyper hands over once the `101` response is out.
pub struct Upgrade {
    on_upgrade: hyper::upgrade::OnUpgrade,
    options: SocketOptions,
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
            Ok(parts) => {
                let mut socket = Socket::new(
                    parts.io.into_inner().into_inner(),
                    &parts.read_buf,
                    self.options.limit,
                );
                socket.write_timeout = self.options.write_timeout;
                socket.admission = self.admission;
                Some(socket)
            }
            Err(_) => {
                tracing::error!("an upgraded connection is not a TCP stream; closing it");
                None
            }
        }
    }
}

/// A socket's write timeout unless the server's settings give one.
const DEFAULT_WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Bytes asked of the kernel per read when no frame says how many it needs.
const READ_CHUNK: usize = 4096;

/// How long a closing socket waits for the client's close frame (or its end of the stream)
/// before it lets the connection go.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a socket stopped.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("the connection failed: {0}")]
    Io(#[from] io::Error),
    #[error("the client closed the connection")]
    Eof,
}

/// A server WebSocket over a TCP stream.
pub struct Socket {
    stream: TcpStream,
    /// Bytes read but not yet parsed. Unallocated while the socket is idle.
    inbox: Vec<u8>,
    /// How many bytes the frame at the front of `inbox` needs in all, once its header is in.
    want: usize,
    /// The inbox may hold another whole frame: the last parse stopped at a message.
    more: bool,
    assembler: Assembler,
    /// The largest message accepted.
    limit: usize,
    /// How long a frame may wait for the client to take it.
    write_timeout: std::time::Duration,
    /// The connection's place under the edge's caps (kept as long as the socket lives).
    admission: Option<Arc<Admission>>,
}

impl Socket {
    /// A socket over `stream`; `early` are bytes the client sent right behind its upgrade
    /// request (hyper read them already).
    pub fn new(stream: TcpStream, early: &[u8], limit: usize) -> Self {
        Socket {
            stream,
            inbox: early.to_vec(),
            want: 0,
            more: !early.is_empty(),
            assembler: Assembler::default(),
            limit,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            admission: None,
        }
    }

    /// Waits until the client sent something (or closed), holding no buffer meanwhile. Returns
    /// at once while bytes already read wait to be parsed.
    ///
    /// Polls readiness with the task's own waker rather than `TcpStream::readable`'s waiter:
    /// that also replaces the waker hyper's connection task left in the stream when it handed
    /// it over, which would otherwise keep that finished task's memory (~1.1 KiB) as long as
    /// the socket lives.
    pub async fn readable(&self) -> io::Result<()> {
        if self.more {
            return Ok(());
        }
        std::future::poll_fn(|cx| self.stream.poll_read_ready(cx)).await
    }

    /// The next whole message: reads what the kernel has (without waiting) and parses it.
    /// `Ok(None)`: nothing whole yet — wait for [`Socket::readable`] again.
    pub fn next_message(&mut self) -> Result<Option<Message>, SocketError> {
        loop {
            if let Some(message) = self.parse()? {
                return Ok(Some(message));
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Parses whole frames from the front of the inbox until one completes a message.
    fn parse(&mut self) -> Result<Option<Message>, SocketError> {
        let mut at = 0;
        let result = loop {
            match frame::parse(&self.inbox[at..], self.limit) {
                Ok(Parsed::Frame(frame, used)) => {
                    at += used;
                    match self.assembler.push(frame, self.limit) {
                        Ok(Some(message)) => {
                            self.more = true;
                            break Ok(Some(message));
                        }
                        Ok(None) => {}
                        Err(e) => break Err(e.into()),
                    }
                }
                Ok(Parsed::Incomplete { total }) => {
                    self.more = false;
                    self.want = total.unwrap_or(0);
                    break Ok(None);
                }
                Err(e) => break Err(e.into()),
            }
        };
        self.inbox.drain(..at);
        if self.inbox.is_empty() {
            // Idle again: give the buffer back.
            self.inbox = Vec::new();
            self.want = 0;
        }
        result
    }

    /// Reads what the kernel has, without waiting. False when nothing was there.
    fn fill(&mut self) -> Result<bool, SocketError> {
        let need = self.want.saturating_sub(self.inbox.len()).max(READ_CHUNK);
        self.inbox.reserve(need);
        match self.stream.try_read_buf(&mut self.inbox) {
            Ok(0) => Err(SocketError::Eof),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if self.inbox.is_empty() {
                    self.inbox = Vec::new();
                }
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Sends a text message as one frame.
    pub async fn send_text(&mut self, text: &str) -> io::Result<()> {
        self.send(OpCode::Text, text.as_bytes()).await
    }

    /// Sends one whole frame. A client that does not take it within the write timeout (it
    /// stopped reading) fails the send, and the socket with it; nothing waits on it forever.
    pub async fn send(&mut self, opcode: OpCode, payload: &[u8]) -> io::Result<()> {
        let frame = frame::encode(opcode, payload);
        match tokio::time::timeout(self.write_timeout, self.stream.write_all(&frame)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not take a frame in time",
            )),
        }
    }

    /// Answers a client's close and ends the connection.
    pub async fn answer_close(mut self, close: Option<(u16, String)>) {
        let frame = match close {
            Some((code, _)) => frame::encode_close(code, ""),
            None => frame::encode(OpCode::Close, &[]),
        };
        let _ = tokio::time::timeout(self.write_timeout, self.stream.write_all(&frame)).await;
        let _ = self.stream.shutdown().await;
    }

    /// Closes with `code` and `reason` (§7.1.2): sends the close frame, then reads until the
    /// client's close or the end of its stream (bounded by [`CLOSE_WAIT`]) so the close frame is
    /// not lost to a reset, and lets the connection go.
    pub async fn close(mut self, code: u16, reason: &str) {
        let frame = frame::encode_close(code, reason);
        if !matches!(
            tokio::time::timeout(self.write_timeout, self.stream.write_all(&frame)).await,
            Ok(Ok(()))
        ) {
            return;
        }
        let drain = async {
            loop {
                match self.next_message() {
                    Ok(Some(Message::Close(_))) | Err(_) => return,
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        if self.readable().await.is_err() {
                            return;
                        }
                    }
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, drain).await;
        let _ = self.stream.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use tokio::{io::AsyncReadExt, net::TcpListener};

    use super::*;

    /// A connected pair: our socket on the server side, the raw client stream.
    async fn pair(limit: usize) -> (Socket, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (Socket::new(server, &[], limit), client)
    }

    fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [0x11, 0x22, 0x33, 0x44];
        let mut out = vec![0x80 | opcode];
        assert!(payload.len() < 126);
        out.push(0x80 | payload.len() as u8);
        out.extend_from_slice(&mask);
        out.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, k)| b ^ k));
        out
    }

    async fn next(socket: &mut Socket) -> Result<Message, SocketError> {
        loop {
            if let Some(message) = socket.next_message()? {
                return Ok(message);
            }
            socket.readable().await?;
        }
    }

    #[tokio::test]
    async fn messages_split_across_reads_and_several_in_one_read() {
        let (mut socket, mut client) = pair(1024).await;
        let one = masked(0x1, b"first");
        client.write_all(&one[..3]).await.unwrap();
        client.flush().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(socket.next_message().unwrap().is_none());
        let mut rest = one[3..].to_vec();
        rest.extend(masked(0x1, b"second"));
        client.write_all(&rest).await.unwrap();
        assert_eq!(
            next(&mut socket).await.unwrap(),
            Message::Text("first".into())
        );
        assert_eq!(
            next(&mut socket).await.unwrap(),
            Message::Text("second".into())
        );
        assert!(
            socket.inbox.capacity() == 0,
            "an idle socket holds no buffer"
        );
    }

    #[tokio::test]
    async fn early_bytes_are_read_first() {
        let (server, _client) = {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let client = TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            (listener.accept().await.unwrap().0, client)
        };
        let mut socket = Socket::new(server, &masked(0x1, b"early"), 1024);
        assert_eq!(
            next(&mut socket).await.unwrap(),
            Message::Text("early".into())
        );
    }

    #[tokio::test]
    async fn the_end_of_the_stream_and_protocol_errors_are_reported() {
        let (mut socket, client) = pair(1024).await;
        drop(client);
        assert!(matches!(next(&mut socket).await, Err(SocketError::Eof)));

        let (mut socket, mut client) = pair(16).await;
        client.write_all(&masked(0x1, &[b'a'; 40])).await.unwrap();
        match next(&mut socket).await {
            Err(SocketError::Frame(e)) => assert_eq!(e.close_code(), frame::code::TOO_BIG),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_server_close_is_sent_and_the_clients_close_awaited() {
        let (socket, mut client) = pair(1024).await;
        let closing = tokio::spawn(socket.close(4001, "replaced"));
        let mut header = [0u8; 2];
        client.read_exact(&mut header).await.unwrap();
        assert_eq!(header[0], 0x88);
        let mut payload = vec![0u8; usize::from(header[1])];
        client.read_exact(&mut payload).await.unwrap();
        assert_eq!(&payload[..2], &4001u16.to_be_bytes());
        assert_eq!(&payload[2..], b"replaced");
        client
            .write_all(&masked(0x8, &4001u16.to_be_bytes()))
            .await
            .unwrap();
        closing.await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    }
}
