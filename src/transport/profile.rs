//! Client profiles (ADR 0031): what the client on a route speaks, chosen by the route and
//! carried by the connection. A [`Profile`] says how a request body is read, how a turn's log is
//! written for the client ([`Encoder`]), which chunk keys it takes, how its text is timed when it
//! names no timing, and its manners on a socket. The carriers (`sse.rs`, `ws/`) and
//! `segment.rs` ask the profile and never which client it is; the agent is told only the turn's
//! [`Transport`] label.
//!
//! The AI SDK's profile is here ([`ai_sdk`]); the original system's is in `seed.rs`, with its
//! requests, its answers and its socket frames, and its encoder in `protocol/seed.rs`. A new
//! client is those two files, their `mod` lines, and one route line per route it speaks on;
//! one whose turns the chunk and audit logs should tell apart adds a [`Transport`] label too.

use serde_json::Value;

use super::error::ApiError;
use crate::{
    agent::{PersonInput, TextTiming, Transport, TurnLog},
    protocol::{ChatRequest, Chunk, Dialect, ToolPart, envelope::ReadLimits},
};

/// What a client on a route speaks.
#[derive(Clone, Copy)]
pub struct Profile {
    /// The label of the turns it starts and the answers it sends (chunk log, audit log).
    pub transport: Transport,
    /// The chunk keys it takes (also for a chunk sent past its encoder: `/api/live`'s resume
    /// announcement).
    pub keys: Dialect,
    /// Whether the client may ask for other keys (`x-countersign-dialect`, `?dialect=`).
    pub keys_by_client: bool,
    /// Its text timing when it names none (`None`: the server's `COUNTERSIGN_TEXT_TIMING`).
    pub timing: Option<TextTiming>,
    /// Reads the body of a chat request it POSTs.
    pub decode: fn(&[u8], ReadLimits) -> Result<ChatRequest, ApiError>,
    /// Writes a turn's log for it, in `keys`.
    pub encoder: fn(Dialect) -> Box<dyn Encoder>,
    /// An answer in a tool part of its own making ([`OwnAnswer`]); `None`: the part is read as
    /// the AI SDK's.
    pub own_answer: fn(&ToolPart) -> Option<OwnAnswer>,
    /// A socket frame of its own shape made one of ours ([`FrameOf`]), before it is typed.
    pub frame: fn(Value, FrameOf<'_>) -> Value,
    /// How it behaves on a WebSocket.
    pub socket: SocketManners,
}

impl Profile {
    /// The same client on a route with another label.
    pub const fn on(self, transport: Transport) -> Self {
        Profile { transport, ..self }
    }

    /// The keys to send: the client's choice (`full`: every key of the newest AI SDK; anything
    /// else: the keys `ai@6.0.0` accepts) where it may choose, else its own.
    pub fn keys_named(&self, name: Option<&str>) -> Dialect {
        if !self.keys_by_client {
            return self.keys;
        }
        match name {
            Some(v) if v.trim().eq_ignore_ascii_case("full") => Dialect::Full,
            _ => Dialect::V6Strict,
        }
    }

    /// The encoder for a stream in `keys`.
    pub fn encoder(&self, keys: Dialect) -> Box<dyn Encoder> {
        (self.encoder)(keys)
    }
}

/// A tool part that is a client's own way of answering: the answer it carries, if any.
pub type OwnAnswer = Option<PersonInput>;

/// What a socket frame is read on: the chat the socket serves (`None` until it has one) and
/// the socket's number (a name for a chat a frame does not name).
#[derive(Debug, Clone, Copy)]
pub struct FrameOf<'a> {
    pub chat: Option<&'a str>,
    pub connection: u64,
}

/// How a client behaves on a WebSocket where it differs from ours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketManners {
    /// JSON it cannot parse closes the socket (1002) rather than earning an error chunk.
    pub close_on_bad_json: bool,
    /// Valid JSON that is no frame it understands is logged and ignored: an error chunk would
    /// fail the client's open stream.
    pub ignore_unknown_frames: bool,
}

/// What an [`Encoder`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// One chunk as JSON: the carrier frames it (a `data:` event, a `chunk` frame).
    Chunk(String),
    /// A whole SSE event (`data: …\n\n`, `[DONE]` included), sent as it is.
    Frame(String),
}

impl Out {
    /// As an SSE event's text.
    pub fn into_event(self) -> String {
        match self {
            Out::Chunk(json) => format!("data: {json}\n\n"),
            Out::Frame(frame) => frame,
        }
    }
}

/// Writes a turn's log (its numbered [`TurnEntry`](crate::agent::TurnEntry)s) for one client. Fed every entry a stream
/// sends, in order; what the client already has it is told first with [`Encoder::prime`].
pub trait Encoder: Send + Sync {
    /// The client already has the log's entries before `upto` (a continuation reads from its
    /// answer on; a socket may pick up a turn in its middle).
    fn prime(&mut self, _log: &TurnLog, _upto: usize) {}
    /// A pause the client already went through, passed again (a resume replays the message).
    fn passed_pause(&mut self) {}
    /// What a chunk adds to the stream (often one chunk; nothing for a chunk it holds back or
    /// drops).
    fn chunk(&mut self, chunk: &Chunk) -> Vec<Out>;
    /// The turn waits for the person. `metadata`: what the turn's own `finish` would carry
    /// now, for an encoder that [reports usage at a pause](Encoder::reports_usage_at_pause).
    fn pause(&mut self, _metadata: Option<&Value>) -> Vec<Out> {
        Vec::new()
    }
    /// The turn is over.
    fn end(&mut self) -> Vec<Out> {
        Vec::new()
    }
    /// Whether what it writes at a pause and at the end closes the stream by itself (its own
    /// `finish` and `[DONE]`): the carrier then adds nothing of its own.
    fn closes_itself(&self) -> bool {
        false
    }
    /// Whether its pause reports the turn's usage so far (the carrier then hands
    /// [`Encoder::pause`] the metadata).
    fn reports_usage_at_pause(&self) -> bool {
        false
    }
    /// What a response says last when whoever asked for it may no longer be signed in.
    fn signed_out(&mut self, why: &str) -> Vec<Out> {
        self.chunk(&Chunk::error(why))
    }
}

/// The AI SDK's UI message stream: each chunk as it is, in a key dialect.
pub struct ChunkEncoder(pub Dialect);

impl Encoder for ChunkEncoder {
    fn chunk(&mut self, chunk: &Chunk) -> Vec<Out> {
        chunk.to_json(self.0).map(Out::Chunk).into_iter().collect()
    }
}

/// The AI SDK's `useChat` (SSE and `WebSocketChatTransport`), our own page and `/api/live`'s
/// clients: `ai@6.0.0`'s keys unless they ask for all, text as it is generated.
pub fn ai_sdk(transport: Transport) -> Profile {
    Profile {
        transport,
        keys: Dialect::V6Strict,
        keys_by_client: true,
        timing: Some(TextTiming::Progressive),
        decode: read_chat_request,
        encoder: |keys| Box::new(ChunkEncoder(keys)),
        own_answer: |_| None,
        frame: |frame, _| frame,
        socket: SocketManners::default(),
    }
}

/// An AI SDK chat request body (`{id, messages, trigger, messageId}`).
fn read_chat_request(body: &[u8], limits: ReadLimits) -> Result<ChatRequest, ApiError> {
    ChatRequest::from_slice_for_server(body, limits).map_err(|e| {
        super::request::read_error(e, |e| {
            ApiError::bad_request(
                "invalid_request",
                format!("the body is not a chat request {{id, messages, trigger, messageId}}: {e}"),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_picks_keys_only_where_its_profile_lets_it() {
        let ai = ai_sdk(Transport::Sse);
        assert_eq!(ai.keys_named(None), Dialect::V6Strict);
        assert_eq!(ai.keys_named(Some(" FULL ")), Dialect::Full);
        assert_eq!(ai.keys_named(Some("v7")), Dialect::V6Strict);
        let fixed = Profile {
            keys_by_client: false,
            ..ai
        };
        assert_eq!(fixed.keys_named(Some("full")), Dialect::V6Strict);
    }
}
