//! The wire, shared by the server and the browser.
//!
//! Countersign speaks the Vercel AI SDK v6 *UI message stream* protocol
//! (team reference `protocols.md` §A; the § numbers in this module cite it).
//! This module is the single source of truth for that wire: the server builds
//! [`Chunk`]s and frames them, the wasm client decodes the same type and folds
//! it into a [`UiMessage`] with the same [`MessageReducer`] the server uses to
//! persist the turn. It depends on nothing of ours and on nothing but `serde`,
//! `serde_json` and `thiserror`, so it compiles unchanged for `ssr` and
//! `hydrate`.
//!
//! Read it in this order:
//!
//! - [`chunk`]: every v6 chunk (`{"type": "text-delta", ...}`), unknown types
//!   kept verbatim, and the [`Dialect`] switch that keeps the keys an
//!   `ai@6.0.0` client rejects off the wire (§A.0, §A.2).
//! - [`message`]: `UIMessage` and its parts exactly as `useChat` sends and
//!   stores them, plus the two `sendAutomaticallyWhen` predicates (§A.3, §A.7).
//! - [`auto_send`]: Countersign's own client's `sendAutomaticallyWhen`: when the answers of a
//!   step (approvals, browser tools' results) go to the server by themselves.
//! - [`partial_json`]: best-effort parsing of a JSON prefix, for
//!   `tool-input-delta`.
//! - [`reducer`]: chunk → message, the AI SDK's `processUIMessageStream` rules,
//!   and [`Conversation`], the `useChat` message list with its write-back rule.
//! - [`sse`]: `data: {json}\n\n` framing and an incremental, size-capped
//!   decoder (§A.1).
//! - [`seed`]: the original system's dialect of the stream (`POST /stream`, `/live`): a
//!   stateful encoder from a turn's log to the frames its unmodified frontend expects.
//! - [`presentation`]: how a tool shows itself to the person (card title, the sentence they
//!   countersign, field labels), declared by the tool and sent with the tool list.
//! - [`question`]: a question a running tool's server asks the person (`data-question` parts)
//!   and the person's reply.
//! - [`schema`]: the JSON Schema subset tool arguments are checked against, on the server
//!   before a call runs or an edit is accepted, and in the browser before an edit is sent.
//! - [`countersign`]: what an approval needs from whom (several people, a role, not the
//!   requester, a passkey) and the signatures it has (`data-countersign` parts).
//! - [`audit`]: the audit log's records (`/api/audit`, the `/audit` page).
//! - [`envelope`]: the request bodies: the SSE `POST` body and the WebSocket
//!   client frames (seed-system.md §2.1, §2.2).
//! - [`chat_socket`]: ai@7's `WebSocketChatTransport` frames (`send` / `resume` / `abort`;
//!   `start` / `chunk` with its `sequence` / `end` / `error` / `no-active`).
//!
//! Conventions: wire structs mirror the spec with serde renames; anything that
//! came from outside is decoded into typed errors, never `unwrap`ped; a chunk
//! or part of a type we do not know is kept as `Unknown`, a known type with
//! broken fields is an error.

pub mod audit;
pub mod auto_send;
pub mod chat_socket;
pub mod chunk;
pub mod countersign;
pub mod envelope;
pub mod grant;
pub mod message;
pub mod money;
pub mod page;
pub mod partial_json;
pub mod presentation;
pub mod question;
pub mod reducer;
pub mod schema;
pub mod seed;
pub mod sse;
pub mod voice;

pub(crate) mod json_util;

pub use auto_send::{AnswerSet, answers_to_send};
pub use chunk::{Chunk, ChunkDecodeError, Dialect, FinishReason, ProviderMetadata, ToolMetadata};
pub use envelope::{
    ChatRequest, ClientFrame, EnvelopeError, ServerControl, ToolReport, ToolReportError, Trigger,
};
pub use message::{
    Approval, PartDecodeError, Role, ToolPart, ToolState, UiMessage, UiPart,
    last_assistant_message_is_complete_with_approval_responses,
    last_assistant_message_is_complete_with_tool_calls,
};
pub use partial_json::{PartialJson, parse_partial_json};
pub use presentation::ToolPresentation;
pub use reducer::{Applied, Conversation, MessageReducer, ReduceError};
pub use seed::{SeedEncoder, SeedTransport};
pub use sse::{
    ChunkStreamDecoder, DONE_FRAME, DecodeError, SseDecoder, SseError, SseEvent, StreamItem,
    encode_chunk,
};

#[cfg(test)]
mod decode_tests;
#[cfg(test)]
mod tests;
