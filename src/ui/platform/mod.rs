//! What the UI asks of the browser, behind one interface for both builds.
//!
//! In the wasm client (`hydrate`) these are the real web-sys services of `crate::ui::browser`. On the
//! server (`ssr`) the same functions exist so the isomorphic components compile, but they are
//! never reached: the server only renders HTML, and event handlers and effects run only in the
//! browser. Each server version says so and does nothing observable.

use serde_json::Value;

#[cfg(feature = "hydrate")]
mod web;
#[cfg(feature = "hydrate")]
pub use web::*;

#[cfg(not(feature = "hydrate"))]
mod server;
#[cfg(not(feature = "hydrate"))]
pub use server::*;

/// How a streamed request ended badly.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchError {
    /// The server answered an error status with `{error: {code, message}}`.
    Http {
        status: u16,
        code: String,
        message: String,
    },
    /// The network failed.
    Network(String),
    /// The stream carried something that is not the protocol.
    Protocol(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Http { message, .. } => f.write_str(message),
            FetchError::Network(m) => write!(f, "The connection failed: {m}"),
            FetchError::Protocol(m) => write!(f, "The server sent something unexpected: {m}"),
        }
    }
}

/// A file the person attached, read as a `data:` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct PickedFile {
    pub name: String,
    pub media_type: String,
    pub size: u64,
    pub url: String,
}

/// What the WebSocket reports.
#[derive(Debug, Clone)]
pub enum SocketEvent {
    Open,
    /// A chunk, with its JSON as it came (the chunk log shows that, so the page needs no
    /// encoder of chunks).
    Chunk(crate::protocol::Chunk, Value),
    /// `[DONE]`: the turn's stream ended.
    Done,
    Control(Value),
    Closed {
        code: u16,
        reason: String,
        by_us: bool,
    },
}
