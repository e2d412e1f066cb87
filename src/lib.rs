#![recursion_limit = "512"]
//! Countersign: an agent chat in which no sensitive tool runs until a person countersigns it.
//!
//! One crate, two builds (see `Cargo.toml` features):
//! * `ssr` — the axum server: configuration, the agent runtime and the HTTP/WebSocket transports;
//! * `hydrate` — the wasm client that hydrates the server-rendered page.
//!
//! The modules read in the order a turn travels (docs/architecture.md), and each uses only the
//! ones before it (`src/layers.rs` holds them to it): `protocol` (the wire, shared by both
//! builds) and `common` (text helpers) → `agent` (the runtime, its people and the gate, server
//! only) → `models` (the demo, replays and providers behind the agent's `Model` trait) → `config`
//! → `transport` (the edge, SSE and WebSocket endpoints, the app's state, server only) → `ui`
//! (isomorphic components, server functions, and `ui::browser`, client only) → `server`.

/// The AI SDK v6 UI-message-stream wire: chunks, messages, the reducer, SSE framing, envelopes.
/// Shared by the server and the browser; depends on nothing else of ours.
pub mod protocol;

/// Text helpers every layer may use (URL encoding, HTML escaping); nothing of ours below them.
pub mod common;

/// The agent runtime: people, tools, the approval gate, sessions and the turn loop.
#[cfg(feature = "ssr")]
pub mod agent;

/// The models behind the agent's one `Model` trait: the offline demo, replays of recorded chats,
/// and the providers (Gemini, Gemini Live, OpenAI-compatible).
#[cfg(feature = "ssr")]
pub mod models;

/// The HTTP and WebSocket transports: thin layers between the wire and the runtime.
#[cfg(feature = "ssr")]
pub mod transport;

/// Isomorphic Leptos components: rendered on the server, hydrated in the browser.
pub mod ui;

/// Start-up configuration: Cargo.toml's site table (embedded), Leptos.toml, environment overrides.
#[cfg(feature = "ssr")]
pub mod config;

/// The axum application: router, accept loop, graceful serving.
#[cfg(feature = "ssr")]
pub mod server;

/// Entry point of the wasm client: hydrates the page the server rendered (`ui::hydrate`).
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    ui::hydrate();
}

/// The layers above, held by a test.
#[cfg(all(test, feature = "ssr"))]
mod layers;
