//! SSE mode: `POST /api/chat`, one HTTP request per segment of a turn, exactly as the AI SDK's
//! `useChat` + `DefaultChatTransport` talk (protocols.md §A.5–A.8, seed ADR 0003).
//!
//! A request either starts a turn (its last message is a new user message) or continues the
//! chat's waiting turn with the person's answers (its last message is the assistant message with
//! approval responses or browser outputs). The response streams the turn's log from that point:
//! a continuation opens with `start` carrying the *same* assistant message id, so AI SDK clients
//! extend the message instead of adding one; a turn that stops to wait for the person ends the
//! response with `finish` (reason `tool-calls`) and `[DONE]`. A client that disconnects does not
//! cancel the turn (it finishes on the server and can be resumed); only `POST
//! /api/chat/{id}/stop` does.

use std::convert::Infallible;

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use futures::stream;
use serde_json::{Value, json};

use super::{
    edge::Client,
    error::ApiError,
    request::{off_thread, read_body, read_error, read_limits},
    seed,
    segment::{self, PauseMetadata, Piece, Segment},
};
use crate::{
    agent::people::Hold,
    agent::{TextTiming, Transport},
    protocol::{
        ChatRequest, Dialect, SeedTransport,
        sse::{DONE_FRAME, KEEP_ALIVE_FRAME, UI_MESSAGE_STREAM_HEADERS},
    },
    transport::state::AppState,
};

/// Header with which a client asks for chunk keys newer than `ai@6.0.0` (value `full`).
pub const DIALECT_HEADER: &str = "x-countersign-dialect";
/// Header with which a client asks for progressive text (value `progressive`) or held text
/// (`hold`) for this turn (ADR 0004). Without it `/api/chat` streams text progressively and the
/// seed's `/stream` follows `COUNTERSIGN_TEXT_TIMING` (default `hold`).
pub const TEXT_TIMING_HEADER: &str = "x-countersign-text";

/// The SSE routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        // POST: SSE; GET with an upgrade: the AI SDK's WebSocketChatTransport.
        .route("/api/chat", post(chat).get(super::ws::chat::upgrade))
        .route("/api/chat/{id}/stream", get(resume))
        .route("/api/chat/{id}/stop", post(stop))
        .route("/stream", post(seed_stream))
}

async fn chat(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, state.http.max_body_bytes).await?;
    let limits = read_limits(&state);
    let size = body.len();
    let request = off_thread(body, size, move |body| {
        ChatRequest::from_slice_for_server(&body, limits)
    })
    .await?
    .map_err(|e| {
        read_error(e, |e| {
            ApiError::bad_request(
                "invalid_request",
                format!("the body is not a chat request {{id, messages, trigger, messageId}}: {e}"),
            )
        })
    })?;
    run(
        &state,
        request,
        Transport::Sse,
        dialect(&headers),
        // Our own route streams text as it is generated unless the client asks to hold it.
        Some(timing(&headers).unwrap_or(TextTiming::Progressive)),
        &client,
    )
    .await
}

/// Starts or continues the turn of `request.id` and streams the response.
async fn run(
    state: &AppState,
    request: ChatRequest,
    transport: Transport,
    dialect: Dialect,
    timing: Option<TextTiming>,
    client: &Client,
) -> Result<Response, ApiError> {
    let actor = client.actor(transport);
    let opened = segment::open(state, request, transport, timing, &actor).await?;
    let chat_id = opened.chat_id.clone();
    let mut segment = Segment::new(opened, dialect, state.http.keep_alive);
    if let Dialect::Seed(_) = dialect {
        segment = segment.with_pause_metadata(pause_metadata(state, &chat_id, transport).await?);
    }
    Ok(stream_response(segment, super::edge::hold(state, client)))
}

/// The seed's SSE response ends at a pause with a `finish` of its own that reports the turn's
/// usage so far and the model, as the turn's last `finish` will: read from the chat's turn
/// record when the pause comes.
async fn pause_metadata(
    state: &AppState,
    chat_id: &str,
    transport: Transport,
) -> Result<PauseMetadata, ApiError> {
    let session = state.runtime.existing_session(chat_id).await?;
    let runtime = state.runtime.clone();
    Ok(Box::new(move || {
        let usage = session.as_ref()?.turn_usage()?;
        Some(runtime.finish_metadata(transport, usage))
    }))
}

/// `GET /api/chat/{id}/stream`: re-attaches to a turn that is still streaming. The replay starts
/// at the turn's `start` and covers the whole assistant message (a resuming AI SDK client starts
/// from an empty message, §A.8), then follows the live stream. 204 when nothing is streaming.
async fn resume(
    State(state): State<AppState>,
    Path(chat_id): Path<String>,
    client: Client,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    super::access::own_chat_of(&state, &client.principal(), &chat_id).await?;
    Ok(match segment::streaming_log(&state, &chat_id).await? {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(log) => stream_response(
            Segment::replay(log, dialect(&headers), state.http.keep_alive),
            super::edge::hold(&state, &client),
        ),
    })
}

/// `POST /api/chat/{id}/stop`: cancels the chat's running or waiting turn.
async fn stop(
    State(state): State<AppState>,
    Path(chat_id): Path<String>,
    client: Client,
) -> Result<Json<Value>, ApiError> {
    super::access::own_chat_of(&state, &client.principal(), &chat_id).await?;
    let stopped = state
        .runtime
        .interrupt(&chat_id, "stopped by the person")
        .await;
    tracing::info!(chat = %chat_id, stopped, "stop requested");
    Ok(Json(json!({ "stopped": stopped })))
}

/// The seed system's `POST /stream`: its request shape (`content` strings, ADK confirmation
/// parts, `tool-result` parts) and its dialect of the stream (ADR 0019: no step markers,
/// approval requests at the end of a response that closes with `finish{stop}` and `[DONE]`, the
/// seed's denial texts, Python-style JSON). Its `X-API-Key` header is checked by the edge guard.
async fn seed_stream(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body, state.http.max_body_bytes).await?;
    let limits = read_limits(&state);
    let size = body.len();
    let request = off_thread(body, size, move |body| seed::request(&body, limits)).await??;
    run(
        &state,
        request,
        Transport::Seed,
        Dialect::Seed(SeedTransport::Sse),
        timing(&headers),
        &client,
    )
    .await
}

fn dialect(headers: &HeaderMap) -> Dialect {
    segment::dialect_named(headers.get(DIALECT_HEADER).and_then(|v| v.to_str().ok()))
}

fn timing(headers: &HeaderMap) -> Option<TextTiming> {
    segment::timing_named(
        headers
            .get(TEXT_TIMING_HEADER)
            .and_then(|v| v.to_str().ok()),
    )
}

/// Streams a segment of a turn as SSE: a `data:` event per chunk, `[DONE]` at its end, a
/// comment when the line is quiet. When `hold` ends (whoever asked was removed, or signed out)
/// the stream ends at once, with an `error` chunk that says why.
pub fn stream_response(segment: Segment, hold: Hold) -> Response {
    let body = stream::unfold(Some((segment, hold)), |state| async move {
        let (mut segment, hold) = state?;
        let piece = tokio::select! {
            biased;
            why = hold.ended() => {
                let last = segment.signed_out(why.words())?;
                return Some((Ok::<_, Infallible>(frame_of(last)), None));
            }
            piece = segment.next() => piece?,
        };
        Some((Ok(frame_of(piece)), Some((segment, hold))))
    });
    let mut response = Response::new(Body::from_stream(body));
    for (name, value) in UI_MESSAGE_STREAM_HEADERS {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert(name, value);
        }
    }
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

/// A piece of a segment as SSE bytes.
fn frame_of(piece: Piece) -> Bytes {
    match piece {
        Piece::Chunk(json) => {
            let mut frame = String::with_capacity(json.len() + 8);
            frame.push_str("data: ");
            frame.push_str(&json);
            frame.push_str("\n\n");
            Bytes::from(frame)
        }
        Piece::Frame(frame) => Bytes::from(frame),
        Piece::KeepAlive => Bytes::from_static(KEEP_ALIVE_FRAME.as_bytes()),
        Piece::End => Bytes::from_static(DONE_FRAME.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_choose_dialect_and_text_timing() {
        let mut headers = HeaderMap::new();
        assert_eq!(dialect(&headers), Dialect::V6Strict);
        assert_eq!(timing(&headers), None);
        headers.insert(DIALECT_HEADER, HeaderValue::from_static("full"));
        headers.insert(TEXT_TIMING_HEADER, HeaderValue::from_static("progressive"));
        assert_eq!(dialect(&headers), Dialect::Full);
        assert_eq!(timing(&headers), Some(TextTiming::Progressive));
    }
}
