//! The transports (server only): thin layers that decode requests into `protocol` and `agent`
//! types, drive the runtime, and frame its chunks for their wire.
//!
//! * [`sse`]: `POST /api/chat` — one HTTP request per turn segment, AI SDK compatible — with
//!   resume (`GET /api/chat/{id}/stream`), stop (`POST /api/chat/{id}/stop`) and the seed
//!   system's `POST /stream` alias.
//! * [`ws`]: `GET /api/live` — one WebSocket per chat for many turns (and `/live`, the seed
//!   system's alias).
//! * [`segment`]: one segment of a turn (what a request starts or continues, up to its pause or
//!   end), which SSE and the ai@7 WebSocket frame for their wires.
//! * [`request`]: one decoder for every client's chat request, with one set of checks.
//! * [`context`]: what a new chat may adopt from the client's earlier messages (text only).
//! * [`seed`]: the original system's dialect (its envelope, frames and confirmations).
//! * [`answers`]: reads the person's answers out of the client's copy of the conversation.
//! * [`error`]: the one error type every route returns, as `{error: {code, message}}`.
//! * [`functions`]: the page's Leptos server functions (`/api/fn/…`), refusing bad input with
//!   the same errors.
//! * [`edge`]: what stands in front of every route: connection caps and deadlines, the host
//!   allowlist, CORS, the API key and sign-in sessions, origin (CSRF), rate limits.
//! * [`audit`]: the audit log as JSON and as a JSONL export.
//! * [`app`]: the model and tools, and a chat's snapshot, for the page.
//! * [`site`]: the built site's files, precompressed and cached by content hash.
//! * [`people`]: one-time links (`/welcome/{token}`) and the passkey ceremonies that sign
//!   people in (ADR 0024).
//! * [`ops`]: `/healthz` (liveness), `/readyz` (readiness) and `/metrics` (Prometheus).
//! * [`tools_page`]: `GET /tools`, the tools by where they come from and what each needs;
//!   [`html`]: the plain pages' frame.

pub mod access;
pub mod answers;
pub mod app;
pub mod audit;
pub mod context;
pub mod edge;
pub mod error;
pub mod functions;
pub mod html;
pub mod ops;
pub mod pages;
pub mod people;
pub mod profile;
pub mod request;
pub mod seed;
pub mod segment;
pub mod site;
pub mod sse;
pub mod state;
pub mod tools_page;
pub mod ws;

pub use ws::is_upgrade;

pub use error::ApiError;
