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
    routing::{MethodRouter, get, post},
};
use futures::stream;
use serde_json::{Value, json};

use super::{
    edge::Client,
    error::ApiError,
    profile::{Profile, ai_sdk},
    request::{off_thread, read_body, read_limits},
    seed,
    segment::{self, PauseMetadata, Piece, Segment},
};
use crate::{
    agent::people::Hold,
    agent::{TextTiming, Transport},
    protocol::sse::{
        DIALECT_HEADER, DONE_FRAME, KEEP_ALIVE_FRAME, TEXT_TIMING_HEADER, UI_MESSAGE_STREAM_HEADERS,
    },
    transport::state::AppState,
};

/// The SSE routes: a chat route per client profile (ADR 0031).
pub fn routes() -> Router<AppState> {
    Router::new()
        // POST: SSE; GET with an upgrade: the AI SDK's WebSocketChatTransport.
        .route(
            "/api/chat",
            chat_route(|| ai_sdk(Transport::Sse)).get(super::ws::chat::upgrade),
        )
        .route("/api/chat/{id}/stream", get(resume))
        .route("/api/chat/{id}/stop", post(stop))
        .route("/stream", chat_route(seed::stream))
}

/// `POST` a chat request, from a client of `profile`: its body read by the profile's decoder,
/// the answer streamed by its encoder.
fn chat_route(profile: fn() -> Profile) -> MethodRouter<AppState> {
    post(
        move |State(state): State<AppState>, client: Client, headers: HeaderMap, body: Body| {
            chat(state, client, headers, body, profile())
        },
    )
}

/// Starts or continues the turn of the request's chat and streams the response. A seed
/// client's `X-API-Key` header, like every credential, was checked by the edge guard.
async fn chat(
    state: AppState,
    client: Client,
    headers: HeaderMap,
    body: Body,
    profile: Profile,
) -> Result<Response, ApiError> {
    let body = read_body(body, state.edge_settings.max_body_bytes).await?;
    let limits = read_limits(&state);
    let size = body.len();
    let decode = profile.decode;
    let request = off_thread(body, size, move |body| decode(&body, limits)).await??;
    let transport = profile.transport;
    let actor = client.actor(transport);
    let timing = timing(&headers).or(profile.timing);
    let opened = segment::open(&state, request, &profile, timing, &actor).await?;
    let chat_id = opened.chat_id.clone();
    let keys = profile.keys_named(header(&headers, DIALECT_HEADER));
    let mut segment = Segment::new(
        opened,
        profile.encoder(keys),
        state.edge_settings.keep_alive,
    );
    if segment.reports_usage_at_pause() {
        segment = segment.with_pause_metadata(pause_metadata(&state, &chat_id, transport).await?);
    }
    Ok(stream_response(
        &state,
        segment,
        super::edge::hold(&state, &client),
    ))
}

/// What a pause's `finish` reports where the client's encoder says one (the seed's SSE
/// response): the turn's usage so far and the model, as the turn's last `finish` will, read
/// from the chat's turn record when the pause comes.
async fn pause_metadata(
    state: &AppState,
    chat_id: &str,
    transport: Transport,
) -> Result<PauseMetadata, ApiError> {
    // The turn's record is all it reads: a chat an answer loaded with its head only stays so.
    let session = state.runtime.session_head(chat_id).await?;
    let runtime = state.runtime.clone();
    Ok(Box::new(move || {
        let usage = session.as_ref()?.turn_usage()?;
        Some(runtime.models().finish_metadata(transport, usage))
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
    super::access::may_touch_chat(&state.runtime, client.principal().id(), &chat_id).await?;
    Ok(match segment::streaming_log(&state, &chat_id).await? {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(log) => stream_response(
            &state,
            Segment::replay(
                log,
                resume_encoder(&headers),
                state.edge_settings.keep_alive,
            ),
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
    super::access::may_touch_chat(&state.runtime, client.principal().id(), &chat_id).await?;
    let stopped = state
        .runtime
        .interrupt(&chat_id, "stopped by the person")
        .await;
    tracing::info!(chat = %chat_id, stopped, "stop requested");
    Ok(Json(json!({ "stopped": stopped })))
}

/// A resume is the AI SDK's (§A.8): its keys as the client asks.
fn resume_encoder(headers: &HeaderMap) -> Box<dyn super::profile::Encoder> {
    let profile = ai_sdk(Transport::Sse);
    profile.encoder(profile.keys_named(header(headers, DIALECT_HEADER)))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn timing(headers: &HeaderMap) -> Option<TextTiming> {
    segment::timing_named(header(headers, TEXT_TIMING_HEADER))
}

/// Streams a segment of a turn as SSE: a `data:` event per chunk, `[DONE]` at its end, a
/// comment when the line is quiet. When `hold` ends (whoever asked was removed, or signed out)
/// the stream ends at once, with an `error` chunk that says why. It counts as open in
/// `/metrics` until its body is dropped.
pub fn stream_response(state: &AppState, segment: Segment, hold: Hold) -> Response {
    let open = state.runtime.metrics.sse_stream();
    let body = stream::unfold(Some((segment, hold, open)), |state| async move {
        let (mut segment, hold, open) = state?;
        let piece = tokio::select! {
            biased;
            why = hold.ended() => {
                let last = segment.signed_out(why.words())?;
                return Some((Ok::<_, Infallible>(frame_of(last)), None));
            }
            piece = segment.next() => piece?,
        };
        Some((Ok(frame_of(piece)), Some((segment, hold, open))))
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
        use crate::protocol::Dialect;
        let dialect = |headers: &HeaderMap| {
            ai_sdk(Transport::Sse).keys_named(header(headers, DIALECT_HEADER))
        };
        let mut headers = HeaderMap::new();
        assert_eq!(dialect(&headers), Dialect::V6Strict);
        assert_eq!(timing(&headers), None);
        headers.insert(DIALECT_HEADER, HeaderValue::from_static("full"));
        headers.insert(TEXT_TIMING_HEADER, HeaderValue::from_static("progressive"));
        assert_eq!(dialect(&headers), Dialect::Full);
        assert_eq!(timing(&headers), Some(TextTiming::Progressive));
    }
}
