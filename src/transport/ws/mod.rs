//! BIDI mode: one WebSocket per chat carrying many turns, parallel approvals, browser-tool
//! results, interrupts and reconnects (seed ADR 0003/0010, the BIDI confirmation draft).
//!
//! Client → server: JSON text frames, the seed system's envelopes ([`ClientFrame`]). Server →
//! client: one UI chunk per text frame in SSE form (`data: {json}\n\n`) and `data: [DONE]\n\n` at
//! the end of every turn, so the seed system's own frontend can talk to Countersign; plus the
//! `{"type":"pong"}` control frame.
//!
//! A socket reads the chat's turn log, so everything a turn emits reaches it whatever started
//! the turn, and a reconnecting client says how many frames of the current turn it received
//! (`{"type":"resume","id","received"}`) and gets exactly the missing ones. Approval requests are
//! already wrapped by `start-step` … `finish-step` in the runner's output (seed ADR 0011), and the
//! socket stays open while the person decides. One socket per chat: a newer one takes over and
//! the older is closed with a reason.
//!
//! Whose chat a frame addresses depends on the route ([`ChatScope`]): on `/api/live` the
//! client's `id` names it; on the seed's `/live` every connection has its own chat, as the seed
//! gave each connection its own session (its frontend sends one constant id per endpoint, so two
//! tabs would otherwise share and take over one chat). A `resume` frame naming a chat still
//! re-attaches to it on either route.
//!
//! What a socket's client speaks is its route's client profile (`transport::profile`, ADR 0031):
//! on `/api/live` the AI SDK's chunks; on `/live` the seed's dialect (`transport::seed`, ADR
//! 0019), whose encoder writes its stream and whose manners are the seed backend's: invalid JSON
//! closes the socket (1002), unknown or malformed frames are logged and ignored.
//!
//! Voice (ADR 0035, [`voice`]): binary frames are microphone audio; `audio_chunk` and
//! `audio_control` are voice on both routes; the agent's speech goes out as binary frames to a
//! socket opened with `?audio=binary`, as `data-pcm` chunks to every other.
//!
//! The WebSocket itself is ours ([`socket`], RFC 6455 framing in [`frame`]): a socket waiting for
//! a person holds its TCP stream, one small task and no buffers (bench/: 1.9 KiB per idle
//! socket, 7.2 KiB with tungstenite).

pub mod chat;
#[cfg(test)]
mod conformance;
mod connection;
mod dispatch;
mod forward;
mod frame;
mod inbound;
mod limiter;
mod socket;
mod voice;

use std::time::Instant;

use axum::{
    Router,
    extract::{Query, State},
    response::Response,
    routing::{MethodRouter, get},
};
use serde::Deserialize;

use self::connection::Connection;
pub use self::socket::is_upgrade;
use self::socket::{Handshake, SocketOptions};
use super::{
    edge::Client,
    profile::{Profile, ai_sdk},
    seed,
    segment::timing_named,
};
use crate::{agent::Transport, transport::state::AppState};

/// WebSocket close codes used here (RFC 6455 §7.4.1, plus application codes).
pub mod close {
    pub use super::frame::code::*;
    /// Another socket took over this chat.
    pub const REPLACED: u16 = 4001;
    /// Whoever opened the socket may no longer be signed in: they were removed, or signed out
    /// of the session they opened it with (HTTP's 401, in the application range). The reason
    /// says which; the page goes to sign-in rather than reconnecting.
    pub const SIGNED_OUT: u16 = 4401;
    /// The server failed (RFC 6455 §7.4.1).
    pub const INTERNAL: u16 = 1011;
}

/// The BIDI routes: `/api/live`, and `/live` as the seed system's alias (a client profile
/// each, ADR 0031).
pub fn routes() -> Router<AppState> {
    Router::new()
        // The AI SDK's chunks (`?dialect=full` for every key), text as it is generated unless
        // `?text=hold`, the client's `id` naming the chat.
        .route(
            "/api/live",
            live_route(|| ai_sdk(Transport::Bidi), ChatScope::Client),
        )
        .route("/live", live_route(seed::live, ChatScope::Connection))
}

/// Per-socket options from the upgrade URL: `?text=progressive|hold&dialect=full`.
#[derive(Debug, Default, Deserialize)]
pub struct LiveQuery {
    pub text: Option<String>,
    pub dialect: Option<String>,
    /// `binary`: the agent's speech as binary frames (our page); otherwise `data-pcm` chunks.
    pub audio: Option<String>,
}

/// Whose chat a socket's `message` frames address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChatScope {
    /// The client's `id` names the chat (`/api/live`).
    Client,
    /// The connection has its own chat, named by the server, unguessable (`/live`); the
    /// client's `id` is only logged.
    Connection,
}

/// A BIDI route whose client speaks `profile` (the seed's `/live`: its dialect, ADR 0019; text
/// timing from `COUNTERSIGN_TEXT_TIMING`, default `hold`, seed ADR 0004, unless `?text=`; a
/// chat per connection, seed ADR 0001).
fn live_route(profile: fn() -> Profile, scope: ChatScope) -> MethodRouter<AppState> {
    get(
        move |state: State<AppState>,
              client: Client,
              query: Query<LiveQuery>,
              handshake: Handshake| async move {
            upgrade(state, client, query, handshake, profile(), scope)
        },
    )
}

/// The upgrade. The origin check (CSRF) and the per-address rate limit ran in the edge guard.
/// `?text=` and (where the profile lets the client choose) `?dialect=` override the profile's
/// own.
fn upgrade(
    State(state): State<AppState>,
    client: Client,
    Query(query): Query<LiveQuery>,
    handshake: Handshake,
    profile: Profile,
    scope: ChatScope,
) -> Response {
    let timing = timing_named(query.text.as_deref()).or(profile.timing);
    let keys = profile.keys_named(query.dialect.as_deref());
    let options = SocketOptions {
        limit: state.edge_settings.ws_max_frame_bytes,
        write_timeout: state.edge_settings.write_timeout,
    };
    let hold = super::edge::hold(&state, &client);
    let mut connection = Connection::new(&state, timing, profile, keys, scope, client, hold);
    connection.voice = voice::Voice::new(
        &state.edge_settings,
        query.audio.as_deref() == Some("binary"),
        Instant::now(),
    );
    handshake.accept(options, &state.edge.sockets, move |upgrade| {
        connection.run(upgrade)
    })
}
