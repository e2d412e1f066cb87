//! What the UI asks of the browser, behind one interface for both builds.
//!
//! In the wasm client (`hydrate`) these are the real web-sys services of `crate::ui::browser`. On the
//! server (`ssr`) the same functions exist so the isomorphic components compile, but they are
//! never reached: the server only renders HTML, and event handlers and effects run only in the
//! browser. Each server version says so and does nothing observable.

use std::rc::Rc;

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
    /// A binary frame: the agent's speech, PCM16LE mono 24 kHz (`?audio=binary`).
    Audio(Vec<u8>),
    Closed {
        code: u16,
        reason: String,
        by_us: bool,
    },
}

/// Why the microphone cannot be used: the page says so, and text keeps working.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MicError {
    /// The person (or the browser's settings) refused it.
    Refused,
    /// No microphone, or none that works.
    Absent,
    /// Another program holds it.
    Busy,
    /// This browser or page cannot capture audio at all (an old browser, a page not served over
    /// HTTPS).
    Unsupported(String),
}

impl std::fmt::Display for MicError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MicError::Refused => f.write_str(
                "The microphone was refused. Allow it for this site in the browser's settings to \
                 talk; typing works as before.",
            ),
            MicError::Absent => {
                f.write_str("No microphone was found. Connect one to talk; typing works as before.")
            }
            MicError::Busy => f.write_str(
                "The microphone is in use by another program. Close it to talk; typing works as \
                 before.",
            ),
            MicError::Unsupported(why) => {
                write!(
                    f,
                    "This browser cannot capture audio here ({why}); typing works as before."
                )
            }
        }
    }
}

/// What the browser does for BIDI mode's voice (ADR 0037): the microphone and the agent's speech.
/// The voice bar makes it ([`voice_engine`]), so its code loads with the bar's.
pub trait VoiceEngine {
    /// Opens the microphone at 16 kHz mono (echo cancellation on); each batch of samples
    /// (100 ms) goes to `on_batch` until [`VoiceEngine::close_mic`]. Called from a person's
    /// gesture (it also lets playback start).
    fn open_mic(
        &self,
        on_batch: Rc<dyn Fn(Vec<f32>)>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), MicError>>>>;

    /// Closes the microphone once the samples it still holds went to `on_batch`; then `done`.
    fn close_mic(&self, done: Box<dyn FnOnce()>);

    /// Plays a frame of the agent's speech (PCM16LE mono 24 kHz) right after what is queued.
    fn play(&self, pcm: &[u8]);

    /// Stops the agent's speech at once and drops what is queued.
    fn stop_playback(&self);

    /// Whether the agent's speech is playing (or queued).
    fn playing(&self) -> bool;
}
