//! The agent runtime (server only): models, tools, the approval gate, sessions and the turn
//! loop. Transport-agnostic: it consumes person input and produces `protocol` chunks.
//!
//! Read in this order: [`model`] (what a model is) → [`history`] (what it sees) → [`tools`] (what
//! it can call) → [`gate`] (who must countersign) → [`session`] (where state lives) → [`store`]
//! (where it is kept, with the audit log) → [`runtime`] (live sessions and their lifecycle) →
//! [`turn`] (the turn loop). The models it drives live beside it, in `models`.

pub mod answer;
pub mod attachments;
pub mod audit;
pub mod canonical;
pub mod chunk_log;
pub mod clock;
pub(crate) mod commit;
pub mod followers;
pub mod gate;
pub mod history;
pub mod inbox;
pub mod journal;
pub mod mcp;
pub mod metrics;
pub mod model;
pub mod notices;
pub mod people;
pub mod policy;

pub mod questions;

pub mod runtime;
pub mod turn;
/// Tool-argument validation lives in `protocol` (the browser checks edits with it too).
pub use crate::protocol::schema;
pub mod session;
pub mod store;
pub mod tools;
pub mod voice;

pub use gate::{ApprovalDecision, BrowserResult, InputError, PersonInput};

/// Locks a std mutex, recovering the data if a panicking thread poisoned it: every mutation
/// under these locks is a plain assignment, so the data stays consistent. The one helper for
/// the whole server.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How a turn reached the server: it picks the model (BIDI turns may have their own), labels the
/// chunk log and the audit log, and is kept with the turn so a resumed turn stays the same.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// `POST /api/chat`: the AI SDK's `useChat` over SSE.
    Sse,
    /// `/api/live`: one WebSocket per chat, many turns.
    Bidi,
    /// `GET /api/chat` upgraded: the AI SDK's `WebSocketChatTransport` (a request and its
    /// response, as over SSE, many multiplexed on one socket).
    Ws,
    /// The original system's own routes (`POST /stream`, `/live`).
    Seed,
    /// Anything else (a direct call of the runtime; older records without the field).
    #[default]
    #[serde(other)]
    Api,
}

impl Transport {
    /// The name on the wire, in the chunk log and in the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Sse => "sse",
            Transport::Bidi => "bidi",
            Transport::Ws => "ws",
            Transport::Seed => "seed",
            Transport::Api => "api",
        }
    }

    /// What the clients on this transport do with a browser call the policy lets run: report
    /// its result, or run it by themselves and never report (the original system's
    /// `POST /stream` client). Kept with the label because the label is what a turn keeps: a
    /// turn resumed after a restart behaves as it began. The turn loop asks this, never which
    /// client it is.
    pub fn browser_calls(self) -> BrowserCalls {
        match self {
            Transport::Seed => BrowserCalls::Unreported,
            Transport::Sse | Transport::Bidi | Transport::Ws | Transport::Api => {
                BrowserCalls::Reported
            }
        }
    }
}

/// What a turn's client does with the browser calls the policy lets run
/// ([`Transport::browser_calls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowserCalls {
    /// It runs them and sends their results: the turn waits for them.
    Reported,
    /// It runs them by itself and never sends a result: a call that needs no approval ends at
    /// once with its tool's acknowledgment ([`gate::Gate::acknowledging_browser_calls`]).
    Unreported,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
pub use runtime::{
    Runtime, RuntimeBuilder, RuntimeSettings, TextTiming, TurnError, TurnStarted, UserTurn,
};
pub use session::{Session, SessionRecord, TurnEntry, TurnLog, TurnStatus};
pub use store::SessionStore;
